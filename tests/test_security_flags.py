"""Flags whose values are in a plausible type but not computable (issue #39 item 4): exit 2 with a
sentence before any worker starts — never an OverflowError, a MemoryError or a ValueError deep in a
library (exit 3)."""

from __future__ import annotations

import pytest

from tests.conftest import run_cli_in_process

pytestmark = pytest.mark.security


@pytest.mark.parametrize(
    "sigma, words",
    [
        ("1e-300", "must be in"),
        ("1e-6", "must be in"),
        ("0", "must be in"),
        ("nan", "finite"),
        ("0.05", "PLD would need about"),
    ],
)
def test_whitebox_builtin_sigma_that_cannot_be_computed_is_exit_2(tmp_path, sigma, words):
    ended = run_cli_in_process(
        "whitebox-audit",
        "--builtin",
        "--noise-multiplier",
        sigma,
        "--sample-rate",
        "1",
        "--steps",
        "5",
        "--runs",
        "10",
        "--out",
        "out",
        cwd=tmp_path,
    )
    assert ended.returncode == 2, ended.stderr
    assert ended.stderr.startswith("error: --noise-multiplier") and words in ended.stderr, ended.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    "command",
    [
        ["canary-audit", "--trainer", "nowhere:train"],
        ["whitebox-audit", "--builtin", "--noise-multiplier", "1"],
        ["conformance", "--trainer", "nowhere:object"],
    ],
    ids=["canary-audit", "whitebox-audit", "conformance"],
)
@pytest.mark.parametrize("seed", ["-1", "-4294967296", "4294967296"])
def test_a_seed_out_of_range_is_exit_2(tmp_path, command, seed):
    ended = run_cli_in_process(*command, "--seed", seed, "--out", "out", cwd=tmp_path)
    assert ended.returncode == 2 and "--seed" in ended.stderr, ended.stderr


@pytest.mark.parametrize(
    "flags",
    [
        ["--preset", "text", "--log-models"],
        ["--preset", "hospitals", "--no-tracking"],
        ["--preset", "hospitals", "--log-models"],
    ],
    ids=" ".join,
)
def test_dry_run_refuses_what_the_real_run_refuses(tmp_path, flags):
    ended = run_cli_in_process("run", *flags, "--dry-run", cwd=tmp_path)
    assert ended.returncode == 2 and "not supported" in ended.stderr, ended.stderr


def test_an_interrupt_a_library_reraises_as_another_error_still_ends_as_130(tmp_path):
    # scikit-learn's gradient boosting turns the KeyboardInterrupt of a Ctrl-C into a ValueError; here a
    # database event plays that library: the signal is real, the re-raise is the library's habit.
    import os
    import signal

    from sqlalchemy import event
    from sqlalchemy.engine import Engine

    def library(_conn, _cursor, statement, *_args):
        if statement.startswith("INSERT INTO ledger_releases"):
            try:
                os.kill(os.getpid(), signal.SIGINT)
            except KeyboardInterrupt:
                raise ValueError("fit was interrupted") from None

    event.listen(Engine, "before_cursor_execute", library)
    try:
        ended = run_cli_in_process(
            "ledger", "record", "--dataset", "d", "--ledger", "l.db", "--epsilon", "1", "--delta", "0", cwd=tmp_path
        )
    finally:
        event.remove(Engine, "before_cursor_execute", library)
    assert ended.returncode == 130 and "interrupted" in ended.stderr and "internal error" not in ended.stderr, (
        ended.stderr
    )


@pytest.mark.parametrize("returned", ["1.0", float("nan"), -1.0, float("inf"), True])
def test_an_accountant_that_returns_no_epsilon_is_a_finding_not_a_claim(returned):
    """A privacy engine whose get_epsilon returns a string, NaN, a negative, ∞ or a bool: its value is
    never coerced into the claim under audit, and the broken accountant is a failed check (said on the
    console as the accountant's disagreement with the training), not a note only in the JSON."""
    from types import SimpleNamespace

    from audit.dp_validation.whitebox_audit import _accountant_disagreements
    from audit.dp_validation.whitebox_runs import _opacus_settings

    accountant = SimpleNamespace(history=[(1.0, 0.5, 4)])
    engine = SimpleNamespace(accountant=accountant, get_epsilon=lambda delta: returned)
    optimizer = SimpleNamespace(
        noise_multiplier=1.0,
        max_grad_norm=1.0,
        expected_batch_size=8,
        loss_reduction="mean",
        original_optimizer=object(),
    )
    loader = SimpleNamespace(sample_rate=0.5)
    settings = _opacus_settings(optimizer, loader, engine, 4, 1e-5)
    assert settings["accountant_epsilon"] is None
    assert settings["accountant_error"].startswith("get_epsilon returned")
    assert any("accountant is broken" in text for text in _accountant_disagreements(settings))
