"""The Lightning callback (`audit.one_run.OpacusAuditCallback`, over the in-script `OpacusAudit`) on
Opacus + Lightning written the way Opacus's own Lightning example writes it: the example holds and its
result passes `gate` and `ledger record`; a parameter updated outside the DP optimizer and noise skipped
on some steps are refuted (exit 1 in `gate`), each naming what broke. Small sizes: 800 rows, q 1/8,
16 logical steps, ≈ 22 000 coordinates."""

from __future__ import annotations

import importlib.util
import json
import logging
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
import torch

from tests.gate_and_ledger import assert_passes_gate_and_is_recorded, gate

ROOT = Path(__file__).resolve().parents[1]
ROWS, EPOCHS = 800, 2


def _example():
    spec = importlib.util.spec_from_file_location("opacus_lightning_example", ROOT / "examples" / "opacus_lightning.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _fit(model, out: Path | None):
    import lightning.pytorch as pl

    from audit.one_run import OpacusAuditCallback

    logging.getLogger("lightning.pytorch").setLevel(logging.ERROR)
    callback = OpacusAuditCallback(out=out)
    trainer = pl.Trainer(
        max_epochs=EPOCHS,
        accelerator="cpu",
        callbacks=[callback],
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trainer.fit(model)
    return callback


def _failed(callback) -> dict[str, str]:
    return {c["name"]: c["message"] for c in callback.verdict["checks"] if c.get("failed")}


@pytest.mark.slow
def test_lightning_example_holds_and_its_result_passes_gate_and_ledger_record(tmp_path):
    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(list(args), cwd=tmp_path, capture_output=True, text=True, timeout=600, check=False)

    done = run(
        sys.executable,
        str(ROOT / "examples" / "opacus_lightning.py"),
        "--rows",
        str(ROWS),
        "--epochs",
        str(EPOCHS),
        "--out",
        str(tmp_path / "runs"),
    )
    assert done.returncode == 0, done.stderr[-2000:]
    (path,) = (tmp_path / "runs").glob("*-whitebox-audit/whitebox-audit.json")
    result = json.loads(path.read_text())
    assert result["verdict"]["status"] == "pass", result["verdict"]["checks"]
    assert result["verdict"]["claims"][0]["status"] == "held"
    assert result["steps"] == EPOCHS * 8  # q = 1/8: the accountant's steps, each a noisy one
    assert result["parameters"]["privatised"][0] == "net.0.weight"
    assert_passes_gate_and_is_recorded(path, tmp_path)


@pytest.mark.slow
def test_a_parameter_updated_outside_the_dp_optimizer_is_refuted_by_name(tmp_path):
    example = _example()

    class WithOffset(example.LitClassifier):
        """A learnable logit offset beside the DP-wrapped network, stepped by a second, plain SGD."""

        def __init__(self):
            super().__init__(rows=ROWS)
            self.offset = torch.nn.Parameter(torch.zeros(2))

        def forward(self, x):
            return self.net(x) + self.offset

        def configure_optimizers(self):
            self.trainer.fit_loop.setup_data()
            _, optimizer, _ = self.privacy_engine.make_private(
                module=self.net,
                optimizer=torch.optim.SGD(self.net.parameters(), lr=self.lr),
                data_loader=self.trainer.train_dataloader,
                noise_multiplier=self.noise_multiplier,
                max_grad_norm=1.0,
            )
            self.plain = torch.optim.SGD([self.offset], lr=0.1)
            return optimizer

        def on_train_batch_end(self, outputs, batch, batch_idx):
            self.plain.step()  # the offset's gradient from this batch's loss: no clipping, no noise
            self.plain.zero_grad()

    callback = _fit(WithOffset(), tmp_path)
    assert callback.verdict["status"] == "fail"
    assert "offset: updated by a second optimizer (SGD)" in _failed(callback)["every trainable parameter privatised"]
    gated = gate(callback.audit.path, tmp_path)
    assert gated.returncode == 1 and "FAIL" in gated.stdout + gated.stderr, gated.stdout[-2000:] + gated.stderr[-2000:]


@pytest.mark.slow
def test_noise_skipped_on_some_steps_is_refuted():
    example = _example()

    class SkipsNoise(example.LitClassifier):
        def configure_optimizers(self):
            from audit.demos.whitebox_factories import skip_noise_every

            return skip_noise_every(super().configure_optimizers())

    callback = _fit(SkipsNoise(rows=ROWS), None)
    assert callback.verdict["status"] == "fail"
    assert "without a noisy step" in _failed(callback)["every trainable parameter privatised"]
    assert callback.audit.path is None  # out=None: nothing written
