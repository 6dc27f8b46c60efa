"""Claims about progress reporting (audit/machinery/progress.py): what a terminal, a CI log and a
Python caller see while long work runs."""

from __future__ import annotations

import io
import re
import time

import pytest
from rich.console import Console

from audit.machinery.progress import (
    CallbackProgress,
    LineProgress,
    Progress,
    RichProgress,
    as_progress,
    progress_for,
)


def test_a_log_gets_one_line_per_finished_step_with_counts_and_elapsed_time():
    stream = io.StringIO()
    progress = LineProgress(stream, heartbeat_s=0)
    with progress.step("targets", total=2) as targets:
        for index in range(2):
            with progress.step(f"target {index + 1}: training", total=3) as training:
                for epoch in range(3):
                    training.update(epoch + 1)
            targets.advance()
    progress.note("warning: something to know")
    lines = stream.getvalue().splitlines()
    assert [re.sub(r"\d+\.\d s", "T s", line[8:]) for line in lines] == [
        "target 1: training 3/3: T s",
        "target 2: training 3/3: T s",
        "targets 2/2: T s",
        "warning: something to know",
    ]
    assert all(re.match(r"^\[\d\d:\d\d\] ", line) for line in lines)


def test_a_step_that_fails_prints_nothing_so_bad_input_stays_one_line_and_the_error_propagates():
    stream = io.StringIO()
    progress = LineProgress(stream, heartbeat_s=0)
    with pytest.raises(KeyboardInterrupt), progress.step("attack lira"):
        raise KeyboardInterrupt
    assert stream.getvalue() == ""


def test_a_long_step_prints_heartbeats_so_a_log_never_sits_silent():
    stream = io.StringIO()
    progress = LineProgress(stream, heartbeat_s=0.2)
    progress._heartbeat_poll = 0.05
    with progress.step("64 reference models", total=64) as step:
        step.update(10)
        time.sleep(1.2)
    progress.close()
    beats = [line for line in stream.getvalue().splitlines() if "running for" in line]
    assert beats and "64 reference models 10/64" in beats[0]


def test_the_python_api_gets_plain_event_dicts_from_a_callback():
    events = []
    progress = as_progress(events.append)
    assert isinstance(progress, CallbackProgress)
    with progress.step("synthetic checks", total=2) as step:
        step.advance()
    reporter = progress.reporter("target 1/1 (ε = 1)")
    reporter("8 reference models", 4.5, 8)
    reporter.close()
    assert [(e["event"], e.get("description"), e.get("completed")) for e in events] == [
        ("start", "synthetic checks", 0),
        ("update", "synthetic checks", 1),
        ("finish", "synthetic checks", 1),
        ("start", "target 1/1 (ε = 1): 8 reference models", 0),
        ("update", "target 1/1 (ε = 1): 8 reference models", 4),
        ("finish", "target 1/1 (ε = 1): 8 reference models", 4),
    ]
    assert events[2]["ok"] is True and events[2]["total"] == 2


def test_the_right_display_is_chosen_for_the_output():
    assert type(as_progress(None)) is Progress
    assert type(progress_for(Console(file=io.StringIO()), quiet=False)) is LineProgress
    assert type(progress_for(Console(file=io.StringIO(), force_terminal=True), quiet=False)) is RichProgress
    assert type(progress_for(Console(file=io.StringIO(), force_terminal=True), quiet=True)) is Progress
    with pytest.raises(TypeError, match="progress"):
        as_progress(42)


def test_a_terminal_shows_live_bars_and_keeps_top_level_steps():
    out = io.StringIO()
    progress = RichProgress(Console(file=out, force_terminal=True, width=100))
    with progress.step("targets", total=1) as targets:
        with progress.step("target 1: training", total=2) as training:
            training.update(2)
        targets.advance()
    progress.close()
    text = out.getvalue()
    assert "targets" in text and "1/1" in text


def test_a_lazy_step_shows_nothing_until_work_starts():
    stream = io.StringIO()
    progress = LineProgress(stream, heartbeat_s=0)
    with pytest.raises(ValueError), progress.lazy_step("models trained"):
        raise ValueError("bad input found before any model")
    with progress.lazy_step("models trained") as models:
        models.advance()
        models.advance()
    assert stream.getvalue().count("\n") == 1 and "models trained 2: " in stream.getvalue()


def test_reference_model_training_is_booked_under_its_own_line_not_the_attack_that_asked_for_it():
    stream = io.StringIO()
    progress = LineProgress(stream, heartbeat_s=0)
    reporter = progress.reporter("target 1/1 (ε = 1)")
    with progress.step("target 1/1 (ε = 1): attack lira"):
        reporter("8 reference models", 0, 8)  # the piece starts when its work starts
        time.sleep(0.6)
        reporter("8 reference models", 8, 8)
        reporter.close()
        time.sleep(0.1)
    lines = stream.getvalue().splitlines()
    seconds = {line[8:].rsplit(":", 1)[0]: float(line.rsplit(":", 1)[1].split()[0]) for line in lines}
    assert seconds["target 1/1 (ε = 1): 8 reference models 8/8"] >= 0.55
    assert seconds["target 1/1 (ε = 1): attack lira"] < 0.4  # its own work only


def test_reference_models_report_from_the_start_of_their_training(monkeypatch):
    """The attacks' helper reports 0/K before training, so the piece's clock starts with its work."""
    import numpy as np

    import attacks.reference_models as reference_models

    calls = []

    class Context:
        train_models = staticmethod(lambda features, labels, in_masks, queries, seed: [np.zeros((len(in_masks), 2, 2))])
        report_progress = staticmethod(lambda what, done, total: calls.append((what, done, total)))

    reference_models._train_logits(
        Context(),
        np.zeros((2, 1)),
        np.zeros(2),
        np.ones((4, 2), bool),
        0,
        [np.zeros((2, 1))],
        what="4 reference models",
    )
    assert calls[0] == ("4 reference models", 0, 4) and calls[-1] == ("4 reference models", 4, 4)


def test_a_long_step_says_how_far_it_is_and_how_long_is_left_in_the_log():
    stream = io.StringIO()
    progress = LineProgress(stream, heartbeat_s=0.3)
    progress._heartbeat_poll = 0.05
    with progress.step("canary audit: training runs finished of runs planned", total=100) as step:
        step.update(25)
        time.sleep(1.0)
    progress.close()
    beats = [line for line in stream.getvalue().splitlines() if "running for" in line]
    assert beats and "25/100" in beats[0]
    assert re.search(r"about \d+ (s|min \d+ s) left", beats[0]), beats[0]


def test_the_time_left_is_a_linear_estimate_from_the_pace_so_far():
    from audit.machinery.progress import Step

    step = Step("runs", total=100, depth=0)
    assert step.seconds_left() is None  # nothing done: no pace to extrapolate
    step.started -= 10.0
    step.completed = 25
    assert step.seconds_left() == pytest.approx(30.0, rel=0.05)
    assert Step("open-ended", total=None, depth=0).seconds_left() is None


def test_a_terminal_shows_the_time_left_too():
    out = io.StringIO()
    progress = RichProgress(Console(file=out, force_terminal=True, width=140))
    with progress.step("runs", total=4) as step:
        step.update(2)
    progress.close()
    assert "left" in out.getvalue()


def test_a_unit_done_is_drawn_at_once_even_when_the_rest_follow_before_the_next_timed_frame():
    # A slow first unit (start-up) then quick ones: rich's timed frames (10 a second) alone can skip every count
    # between 0 and the total, and the step never shows its time left (seen in CI on a loaded machine).
    out = io.StringIO()
    progress = RichProgress(Console(file=out, force_terminal=True, width=100))
    with progress.step("target 1: training (epochs)", total=4) as step:
        time.sleep(0.3)  # long enough for the start frame; the updates below come well inside one frame
        for epoch in range(1, 5):
            step.update(epoch)
    progress.close()
    shown = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", out.getvalue())  # colours and cursor moves dropped
    assert re.search(r" 1/4 +\d+:\d\d:\d\d left \d", shown), shown[-500:]


def test_counted_runs_show_only_once_the_users_code_has_run_so_bad_input_stays_one_line():
    from audit.machinery.progress import CountingPool

    class Pool:
        def map(self, function, tasks, kwargs=None, on_result=None):
            results = [function(*task) for task in tasks]
            for index, result in enumerate(results):
                if on_result is not None:
                    on_result(index, result)
            return results

    def claim_check(x):
        return x

    def training_run(x):
        return x * 2

    stream = io.StringIO()
    progress = LineProgress(stream, heartbeat_s=0)
    with progress.lazy_step("runs finished", total=10) as runs:
        pool = CountingPool(Pool(), runs, lambda function: function is training_run)
        pool.map(claim_check, [(1,)])  # not counted, and nothing shown yet
        assert runs.step is None
        assert pool.map(training_run, [(1,), (2,), (3,)]) == [2, 4, 6]
        assert runs.step is not None and runs.step.completed == 3 and runs.step.total == 10
    assert "runs finished 3/10" in stream.getvalue()


def test_a_step_with_nothing_done_yet_waits_the_full_heartbeat_before_its_first_line():
    import audit.machinery.progress as progress_module

    stream = io.StringIO()
    progress = LineProgress(stream, heartbeat_s=3.0)
    progress._heartbeat_poll = 0.05
    original = progress_module.FIRST_HEARTBEAT_SECONDS
    progress_module.FIRST_HEARTBEAT_SECONDS = 0.3
    try:
        with progress.step("checking the trainer", total=10):
            time.sleep(1.0)  # nothing done: may still be input checks, so no line yet
        with progress.step("runs", total=10) as runs:
            runs.update(2)
            time.sleep(1.0)  # pieces done: says how far it is early
    finally:
        progress_module.FIRST_HEARTBEAT_SECONDS = original
        progress.close()
    beats = [line for line in stream.getvalue().splitlines() if "running for" in line]
    assert beats and all("runs 2/10" in line for line in beats)
