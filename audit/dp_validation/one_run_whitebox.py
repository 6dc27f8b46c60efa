"""`whitebox-audit --mode one-run`: gradient canaries in ONE run of the user's own Opacus training.

Steinke, Nasr, Jagielski 2023 ("Privacy Auditing with One (1) Training Run", arXiv 2305.08846):
m canaries, each put into the run by its own fair coin, then sampled at every step with the
claimed rate q like a real record; the auditor sees every iterate (white-box) or only the final
model, scores each canary without looking at the coins, and bounds ε from how well the scores
sort the coins. The canaries are per-sample *gradients* (`targets.canaries`): Dirac canaries on
coordinates of their own, or random unit directions (Andrew et al. 2023, arXiv 2302.03098),
appended as rows of Opacus's `p.grad_sample` so that the optimizer's own clipping, noise and
scaling act on them.

From the same scores (`audit.statistics.one_run_audit`): Steinke et al.'s bound and the f-DP
one-run test against the claim's trade-off curve (Mahloujifar, Melis, Chaudhuri 2024, arXiv
2410.22235) decide, each at α/2; the Gaussian normalized-sum estimate (Agrawal et al. 2026, arXiv
2606.12733) and Andrew et al.'s estimate are shown. The claim is held, refuted or untestable
(ceiling at or below it). The accountant is checked against what the optimizer and loader did.

One worker process runs the user's factory (isolated, with a timeout): the canary run, then, for
the overhead and accuracy comparison, one plain run of a fresh setup from the same seed.
"""

from __future__ import annotations

import contextlib
import os
import random
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from audit.dp_validation.one_run_result import (  # noqa: F401
    CANARY_KINDS,
    CLIP_TOLERANCE,
    PAPER,
    one_run_result,
)
from audit.dp_validation.training_watch import released_parameters
from audit.dp_validation.whitebox_audit import (
    _unpack_setup,
    load_factory_in_worker,
)
from audit.errors import AuditInputError
from audit.machinery.workers import run_isolated, user_code

__all__ = ["CANARY_KINDS", "one_run_result", "one_run_task", "run_one_run_whitebox_audit", "train_loop"]

TASK_TIMEOUT_S = 3600.0


def _seed_everything(seed: int) -> None:
    import torch

    torch.manual_seed(seed)
    np.random.seed(seed % 2**32)
    random.seed(seed)


def train_loop(
    model,
    optimizer,
    loader,
    epochs: int,
    loss=None,
    *,
    canaries=None,
    max_steps: int | None = None,
    on_step: Callable[[], None] | None = None,
) -> tuple[int, float]:
    """The training the audit runs on a factory's objects: cross-entropy (or the factory's `loss`),
    every batch, `epochs` times (stopping at `max_steps`), canaries inserted between backward() and
    step(); `on_step()` after each step. Returns (steps, seconds)."""
    import torch.nn.functional as F

    steps, start = 0, time.perf_counter()
    model.train()
    for _ in range(int(epochs)):
        for batch in loader:
            if max_steps is not None and steps >= max_steps:
                break
            features, labels = batch[0], batch[1]
            optimizer.zero_grad()
            output = model(features)
            value = loss(output, labels) if loss is not None else F.cross_entropy(output, labels)
            value.backward()
            if canaries is not None:
                canaries.insert()
            optimizer.step()
            steps += 1
            if on_step is not None:
                on_step()
    return steps, time.perf_counter() - start


class StepReport:
    """Steps done / planned, written by the worker to a file the command's progress reads (a worker
    has no other channel back before it returns): `done total`, replaced atomically, at most every
    `every` seconds."""

    def __init__(self, path: str | None, total: int, every: float = 0.5):
        self.path, self.total, self.every = path, max(1, int(total)), every
        self.done, self._last = 0, 0.0

    def __call__(self) -> None:
        self.done += 1
        now = time.monotonic()
        if self.path is not None and (now - self._last >= self.every or self.done >= self.total):
            self._last = now
            with open(self.path + ".tmp", "w", encoding="utf-8") as f:
                f.write(f"{self.done} {max(self.total, self.done)}")
            os.replace(self.path + ".tmp", self.path)


@contextlib.contextmanager
def step_reports(report: Callable[[int, int], None] | None) -> Iterator[str | None]:
    """A file for `StepReport` in a private temporary folder, polled by a thread that calls
    `report(done, total)` while the worker runs; None (nothing polled) without `report`."""
    if report is None:
        yield None
        return
    folder = tempfile.mkdtemp(prefix="privacy-audit-steps-")
    path = os.path.join(folder, "steps")
    stop = threading.Event()

    def poll() -> None:
        seen = ""
        while not stop.wait(0.5):
            try:
                with open(path, encoding="utf-8") as f:
                    text = f.read()
            except OSError:
                continue
            if text != seen and len(text.split()) == 2:
                seen = text
                done, total = (int(v) for v in text.split())
                report(done, total)

    thread = threading.Thread(target=poll, name="one-run-steps", daemon=True)
    thread.start()
    try:
        yield path
    finally:
        stop.set()
        thread.join(timeout=2)
        shutil.rmtree(folder, ignore_errors=True)


def _planned_steps(loader, epochs: int, max_steps: int | None) -> int:
    try:
        per_epoch = len(loader)
    except TypeError:
        per_epoch = 1
    planned = max(1, per_epoch) * int(epochs)
    return min(planned, int(max_steps)) if max_steps else planned


def _accuracy(model, loader) -> float | None:
    import torch

    if loader is None:
        return None
    right = total = 0
    model.eval()
    with torch.no_grad():
        for batch in loader:
            right += int((model(batch[0]).argmax(1) == batch[1]).sum())
            total += int(batch[1].numel())
    return right / total if total else None


def _make_setup(factory: str | None, builtin: dict | None, name: str):
    if builtin is not None:
        from targets.opacus_setups import tabular_mlp_setup

        return tabular_mlp_setup(**builtin)
    function = load_factory_in_worker(factory)
    with user_code(name):
        return function()


def one_run_task(
    factory: str | None,
    builtin: dict | None,
    n_canaries: int | None,
    kind: str,
    scale: float,
    seed: int,
    delta: float,
    compare_plain: bool,
    steps_path: str | None = None,
) -> dict[str, Any]:
    """A worker task: one training run of the setup with canaries (and one plain run); plain data back.
    `steps_path`: where to report the optimizer steps done (`StepReport`)."""
    import torch

    from audit.dp_validation.in_script import OpacusAudit

    load_factory_in_worker(None)
    name = f"--factory {factory}" if factory else "--builtin"
    _seed_everything(seed)
    made = _make_setup(factory, builtin, name)
    model, optimizer, loader, engine, epochs, loss = _unpack_setup(made, factory or "--builtin")
    extra = made if isinstance(made, dict) else {}
    max_steps = extra.get("steps")
    # The same hooks as the in-script API (audit.dp_validation.in_script): canaries per logical
    # step, noisy steps counted, every parameter accounted for — the model's and every tensor,
    # module or second optimizer the factory returned, declared or not; only the loop is the tool's.
    try:
        with user_code(name, "training setup"):
            released = released_parameters(made, model, optimizer)
            audit = OpacusAudit(
                engine,
                optimizer,
                model,
                data_loader=loader,
                out=None,
                canaries=n_canaries,
                canary_kind=kind,
                canary_scale=scale,
                seed=seed,
                delta=delta,
                extra_parameters=released,
            )
            audit.start()
    except AuditInputError as exc:  # the API's field names, as this command's flags
        raise AuditInputError(
            "n_canaries" if exc.where == "canaries" else "factory",
            exc.message if exc.where == "canaries" else f"{name}: {exc.message}",
        ) from None
    planned = _planned_steps(loader, epochs, max_steps)
    tick = StepReport(steps_path, planned * (2 if compare_plain else 1))
    with user_code(name, "training setup"):
        try:
            train_loop(model, optimizer, loader, epochs, loss, max_steps=max_steps, on_step=tick)
        finally:
            audit.stop()
        audit.ledger.finish()
        result = audit.observations()
        result["accuracy"] = _accuracy(model, extra.get("test_loader"))
    result["parameters"], result["n_records"] = audit.ledger.summary(), audit._records()
    if compare_plain:
        _seed_everything(seed)
        made = _make_setup(factory, builtin, name)
        model, optimizer, loader, _, epochs, loss = _unpack_setup(made, factory or "--builtin")
        cpu_start = time.process_time()
        with user_code(name, "training setup"):
            tick.total = max(tick.total, tick.done + _planned_steps(loader, epochs, max_steps))
            plain_steps, plain_seconds = train_loop(
                model, optimizer, loader, epochs, loss, max_steps=max_steps, on_step=tick
            )
            result["plain_cpu_seconds"] = time.process_time() - cpu_start
            result["plain_accuracy"] = _accuracy(model, (made if isinstance(made, dict) else {}).get("test_loader"))
        result["plain_seconds"], result["plain_steps"] = plain_seconds, plain_steps
    del torch
    return result


def run_one_run_whitebox_audit(
    *,
    factory: str | None = None,
    builtin: bool = False,
    noise_multiplier: float | None = None,
    sample_rate: float = 1.0,
    steps: int = 20,
    max_grad_norm: float = 1.0,
    n_canaries: int | None = None,
    canary_kind: str = "auto",
    observe: str = "all",
    delta: float = 1e-5,
    claimed_epsilon: float | None = None,
    confidence: float = 0.95,
    seed: int = 0,
    timeout: float = TASK_TIMEOUT_S,
    canary_scale: float = 1000.0,
    compare_plain: bool = True,
    builtin_rows: int = 2000,
    builtin_hidden: tuple[int, ...] = (256, 256),
    device: str | None = None,
    report_steps: Callable[[int, int], None] | None = None,
) -> dict[str, Any]:
    """One training run with gradient canaries, its claim held / refuted / untestable (module
    docstring); `report_steps(done, total)` hears of the optimizer steps as the worker trains."""
    from audit.dp_validation.whitebox_arguments import (
        _check_positive,
        check_builtin_dpsgd,
        check_whitebox_arguments,
    )

    arguments = check_whitebox_arguments(
        factory=factory,
        builtin=builtin,
        observe=observe,
        delta=delta,
        confidence=confidence,
        claimed_epsilon=claimed_epsilon,
        canary_scale=canary_scale,
        min_canary_scale=0.999,
        device=device,
    )
    if canary_kind not in CANARY_KINDS:
        raise AuditInputError("canary_kind", f"expected one of {', '.join(CANARY_KINDS)}, got {canary_kind!r}")
    if n_canaries is not None:
        n_canaries = _check_positive(n_canaries, "n_canaries", integer=True, low=19, high=10**6)
    device = arguments.device
    spec = None
    if builtin:
        sigma, q, T, C = check_builtin_dpsgd(noise_multiplier, sample_rate, steps, max_grad_norm)
        spec = {
            "noise_multiplier": sigma,
            "sample_rate": q,
            "steps": T,
            "max_grad_norm": C,
            "rows": int(builtin_rows),
            "hidden": tuple(builtin_hidden),
            "seed": int(seed),
            "device": device,
        }
        subject = (
            f"Opacus MLP {list(builtin_hidden)} on the default table (σ {spec['noise_multiplier']:g}, "
            f"q {spec['sample_rate']:g}, T {spec['steps']}, C {spec['max_grad_norm']:g})"
        )
    else:
        from audit.machinery.user_code import check_spec

        check_spec(factory, "factory")  # type: ignore[arg-type]  # check_spec refuses None itself, naming it
        subject = f"--factory {factory}"
    with step_reports(report_steps) as steps_path:
        run = run_isolated(
            one_run_task,
            factory,
            spec,
            n_canaries,
            canary_kind,
            float(canary_scale),
            int(seed),
            float(delta),
            bool(compare_plain),
            steps_path,
            name=subject,
            timeout=timeout,
            what="one training run with canaries",
        )
    from audit.dp_validation.training_watch import parameter_checks, rows_check

    return one_run_result(
        run,
        subject=subject,
        factory=factory,
        builtin=builtin,
        observe=observe,
        delta=delta,
        claimed_epsilon=claimed_epsilon,
        confidence=confidence,
        seed=seed,
        device=device,
        extra_checks=parameter_checks(run["parameters"], subject)
        + rows_check(run["settings"], run.get("n_records"), subject),
        extra={"parameters": run["parameters"], "physical_steps": run["settings"].get("physical_steps", run["steps"])},
    )
