"""Hostile user code (issue 26, class "user code that escapes its worker", "trust in the trainer's
CLAIM"): everything that touches the user's objects runs in the isolated worker; whatever it raises
— `KeyboardInterrupt` and `SystemExit` included — is exit 2 naming the function; a worker's whole
process group is killed when it ends, so nothing the user's code forked outlives the command; a
CLAIM is validated like any input; non-finite outputs are exit 2; SIGTERM is 130 for every command.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from hostile_support import assert_refused, run_main

pytestmark = pytest.mark.security
REPO = Path(__file__).resolve().parents[1]

FACTORIES = textwrap.dedent("""
    import os, sys, time
    from audit.demos.whitebox_factories import correct_opacus

    class Trap:
        def __getattr__(self, name):
            raise RuntimeError("booby-trapped attribute " + name)

    def trapped_optimizer():
        setup = correct_opacus()
        setup["optimizer"] = Trap()
        return setup

    class FakeOptimizer:
        noise_multiplier = float("nan")
        max_grad_norm = 1.0
        expected_batch_size = 4
        original_optimizer = object()
        params = []

    def fake_optimizer():
        setup = correct_opacus()
        setup["optimizer"] = FakeOptimizer()
        return setup

    def empty_loader():
        setup = correct_opacus()
        setup["data_loader"] = []
        return setup

    def interrupts():
        raise KeyboardInterrupt

    def exits_zero():
        sys.exit(0)

    def returns_text():
        return "model"

    def raises_in_forward():
        setup = correct_opacus()
        def forward(*args):
            raise ValueError("forward failed")
        setup["model"].forward = forward
        return setup

    def epochs_text():
        setup = correct_opacus()
        setup["epochs"] = "4"
        return setup

    def forks():
        pid_file = os.environ["HOSTILE_PID_FILE"]
        for _ in range(3):
            pid = os.fork()
            if pid == 0:
                time.sleep(300)
                os._exit(0)
            with open(pid_file, "a") as handle:
                handle.write(f"{pid}\\n")
        raise RuntimeError("forked and failed")
""")

CLAIMS = textwrap.dedent("""
    import numpy as np
    from audit.demos.planted_bugs import DPSGDRecipe

    def _recipe(claim=None, **kwargs):
        recipe = DPSGDRecipe(name="hostile", **kwargs)
        if claim is not None:
            object.__setattr__(recipe, "claim", claim)
        return recipe

    GOOD = {"noise_multiplier": 4.5, "sample_rate": 0.25, "steps": 20, "delta": 1e-5}
    sigma_text = _recipe({**GOOD, "noise_multiplier": "4.5"})
    steps_fraction = _recipe({**GOOD, "steps": 20.9})
    steps_text = _recipe({**GOOD, "steps": "20"})
    delta_true = _recipe({**GOOD, "delta": True})
    delta_negative = _recipe({**GOOD, "delta": -1})
    delta_one = _recipe({**GOOD, "delta": 1.0})
    sigma_inf = _recipe({**GOOD, "noise_multiplier": float("inf")})
    sigma_nan = _recipe({**GOOD, "noise_multiplier": float("nan")})
    rate_zero = _recipe({**GOOD, "sample_rate": 0.0})
    rate_two = _recipe({**GOOD, "sample_rate": 2.0})
    steps_huge = _recipe({**GOOD, "steps": 10**12})
    clip_negative = _recipe(max_grad_norm=-1.0)

    class NaNNoise(type(_recipe())):
        def privatize_gradients(self, grads, rng, step):
            return {k: np.full_like(v, np.nan) for k, v in grads.items()}

    class InfNoise(type(_recipe())):
        def privatize_gradients(self, grads, rng, step):
            return {k: np.full_like(v, np.inf) for k, v in grads.items()}

    class TextNoise(type(_recipe())):
        def privatize_gradients(self, grads, rng, step):
            return {k: "noise" for k in grads}

    class Interrupts(type(_recipe())):
        def sample_batches(self, n, rng):
            raise KeyboardInterrupt

    nan_noise = NaNNoise(name="nan")
    inf_noise = InfNoise(name="inf")
    text_noise = TextNoise(name="text")
    interrupts = Interrupts(name="interrupts")
""")


@pytest.fixture
def code_dir(tmp_path, monkeypatch):
    (tmp_path / "hostile_factories.py").write_text(FACTORIES)
    (tmp_path / "hostile_claims.py").write_text(CLAIMS)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path


FACTORY_CASES = {
    "trapped_optimizer": "booby-trapped",
    "fake_optimizer": "--factory",
    "empty_loader": "no batch",
    "interrupts": "KeyboardInterrupt",
    "exits_zero": "sys.exit",
    "returns_text": "must return",
    "raises_in_forward": "forward failed",
    "epochs_text": "epochs",
}


@pytest.mark.parametrize("factory", list(FACTORY_CASES))
def test_a_hostile_whitebox_factory_is_exit_2_naming_it(code_dir, capsys, factory):
    err = assert_refused(
        capsys,
        [
            "whitebox-audit",
            "--factory",
            f"hostile_factories:{factory}",
            "--runs",
            "10",
            "--workers",
            "1",
            "--timeout",
            "120",
        ],
        "--factory",
        folder=code_dir,
        limit=240,
    )
    assert FACTORY_CASES[factory] in err, err


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is dead; only its parent (the worker, now gone) could reap it
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def test_processes_a_factory_forks_do_not_outlive_the_command(code_dir, capsys, monkeypatch):
    pid_file = code_dir / "pids.txt"
    monkeypatch.setenv("HOSTILE_PID_FILE", str(pid_file))
    code, _ = run_main(["whitebox-audit", "--factory", "hostile_factories:forks", "--runs", "10", "--workers", "1"])
    err = capsys.readouterr().err
    assert code == 2 and "forked and failed" in err, err
    pids = [int(p) for p in pid_file.read_text().split()]
    assert len(pids) == 3
    deadline = time.monotonic() + 10
    while any(_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not any(_alive(p) for p in pids), "a process forked by user code outlived the command"


CLAIM_CASES = {
    "sigma_text": "noise_multiplier",
    "steps_fraction": "steps",
    "steps_text": "steps",
    "delta_true": "delta",
    "delta_negative": "delta",
    "delta_one": "delta",
    "sigma_inf": "noise_multiplier",
    "sigma_nan": "noise_multiplier",
    "rate_zero": "sample_rate",
    "rate_two": "sample_rate",
    "steps_huge": "steps",
    "clip_negative": "max_grad_norm",
    "nan_noise": "NaN or infinite",
    "inf_noise": "NaN or infinite",
    "text_noise": "not arrays of numbers",
    "interrupts": "KeyboardInterrupt",
}


@pytest.mark.parametrize("name", list(CLAIM_CASES))
def test_conformance_validates_the_trainers_claim_and_outputs(code_dir, capsys, name):
    err = assert_refused(
        capsys,
        ["conformance", "--trainer", f"hostile_claims:{name}", "--timeout", "120"],
        "--trainer",
        folder=code_dir,
        limit=240,
    )
    assert CLAIM_CASES[name] in err, err


# --------------------------------------------------------------------------------------------
# SIGTERM: 130 for every command, the workers' process groups killed


SLOW_COMMANDS = {
    "whitebox-audit": ["whitebox-audit", "--factory", "slow_code:factory", "--runs", "10", "--workers", "1"],
    "mechanism-audit": ["mechanism-audit", "--mechanism", "slow_code:mechanism", "--trials", "100"],
    "accountant-check": ["accountant-check", "--accountant", "slow_code:accountant"],
    "conformance": ["conformance", "--trainer", "slow_code:trainer"],
}
SLOW_CODE = textwrap.dedent("""
    import os, time
    CLAIM = {"epsilon": 1.0, "delta": 0.0}
    def _wait():
        with open(os.environ["HOSTILE_STARTED"], "w") as handle:
            handle.write(str(os.getpid()))
        time.sleep(600)
    def factory():
        _wait()
    def mechanism(data, rng):
        _wait()
    DATASETS = ([0.0, 1.0], [0.0, 1.0, 1.0])
    def accountant(sigma, q, steps, delta):
        _wait()
    class _T:
        CLAIM = {"noise_multiplier": 1.0, "sample_rate": 0.5, "steps": 2, "delta": 1e-5}
        max_grad_norm = 1.0
        def sample_batches(self, n, rng):
            _wait()
        def privatize_gradients(self, grads, rng, step):
            return grads
    trainer = _T()
""")


@pytest.mark.slow  # a fresh interpreter per command
@pytest.mark.parametrize("command", list(SLOW_COMMANDS))
def test_sigterm_is_130_for_every_command_and_kills_the_workers(tmp_path, command):
    (tmp_path / "slow_code.py").write_text(SLOW_CODE)
    started = tmp_path / "started"
    env = {**os.environ, "PYTHONPATH": str(REPO), "HOSTILE_STARTED": str(started)}
    process = subprocess.Popen(
        [sys.executable, "-m", "audit.cli", *SLOW_COMMANDS[command], "--tracking-uri", f"sqlite:///{tmp_path}/m.db"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 120
    while not started.exists() and time.monotonic() < deadline and process.poll() is None:
        time.sleep(0.2)
    assert started.exists(), process.communicate(timeout=30)
    worker = int(started.read_text() or 0)
    process.send_signal(signal.SIGTERM)
    out, err = process.communicate(timeout=60)
    assert process.returncode == 130, err
    assert "interrupted" in err and "Traceback" not in err
    deadline = time.monotonic() + 10
    while _alive(worker) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not _alive(worker), "the worker running user code survived SIGTERM"
