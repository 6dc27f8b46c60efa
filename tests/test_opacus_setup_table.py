"""The conformance table of Opacus setups (issue #38; docs/one-run-audits.md, "Opacus as it is used"):
the rows not already covered by tests/test_in_script_audit.py, tests/test_conformance_opacus_usage.py
and tests/test_opacus_conformance.py.

The factory commands' work runs here in this process (`opacus_conformance_task`, `one_run_task` +
the same decision as the command) to share one interpreter's imports across the rows; two rows go
through the real CLI to show the exit code of a finding (1, never 2). Setups: the usage model of
audit.demos.whitebox_factories (28 674 coordinates, 400 rows, q 0.1, 2 epochs, ε 2 from
make_private_with_epsilon)."""

from __future__ import annotations

import json
import warnings

import pytest
import torch
from torch import nn

from audit.dp_validation.training_watch import released_parameters
from tests.opacus_sigma_memo import memoised_noise_multiplier  # noqa: F401 - the module fixture
from tests.opacus_usage_support import F, conformance_in_process, one_run_in_process

# Every usage setup asks Opacus for the same σ (ε 2, δ 1e-5, q 0.1, 2 epochs): computed once here.
pytestmark = pytest.mark.usefixtures("memoised_noise_multiplier")


@pytest.mark.slow
@pytest.mark.parametrize(
    "factory, failing",
    [
        ("usage_ghost_clipping", set()),
        ("usage_functorch", set()),
        ("usage_per_layer_clipping", set()),
        ("usage_non_private_epoch", {"parameters", "noisy_steps"}),
        ("usage_tenth_q", {"sampling_rate"}),
        ("usage_accumulate_poisson_batches", {"one_poisson_batch_per_step", "noisy_steps"}),
    ],
)
def test_conformance_factory_table(factory, failing):
    failed, found = conformance_in_process(factory)
    assert failing <= failed and bool(failed) == bool(failing), found["checks"]
    detail = {c["check"]: c["detail"] for c in found["checks"]}
    if factory == "usage_non_private_epoch":  # each parameter named, the inner optimizer named
        assert "0.weight: stepped by the DP optimizer's inner (original) optimizer" in detail["parameters"]
    if factory == "usage_accumulate_poisson_batches":
        assert "deferred their batch" in detail["noisy_steps"]
    if factory == "usage_ghost_clipping":  # what these checks cannot reach is said, never passed silently
        assert [n["check"] for n in found["not_checked"]] == ["per_example_clipping"]
        assert "per_example_clipping" not in detail


@pytest.mark.slow
@pytest.mark.parametrize(
    "factory, status, words",
    [
        ("usage_frozen_param_groups", "pass", None),
        ("usage_ghost_clipping", "pass", None),
        ("usage_functorch", "pass", None),
        ("usage_per_layer_clipping", "inconclusive", None),
        ("usage_parameter_outside", "fail", "logit_offset: updated by a second optimizer (SGD)"),
        ("usage_tenth_q", "fail", "the data loader samples at q"),
        ("usage_accumulate_poisson_batches", "fail", "several Poisson micro-batches accumulated"),
    ],
)
def test_one_run_factory_table(factory, status, words):
    result = one_run_in_process(factory)
    verdict = result["verdict"]
    failed = " ".join(c["message"] for c in verdict["checks"] if c.get("failed"))
    assert verdict["status"] == status, failed
    if words:
        assert words in failed
    if factory == "usage_frozen_param_groups":
        assert result["parameters"]["frozen"] == ["2.weight", "2.bias"]


@pytest.mark.slow
def test_factory_commands_exit_1_on_an_undeclared_finding(cli_in_process, tmp_path):
    """A non-private last epoch (one-run) and an undeclared second optimizer (conformance): findings,
    exit 1, named on the console; never exit 2."""
    one_run = cli_in_process(
        "whitebox-audit",
        "--mode",
        "one-run",
        "--factory",
        F + "usage_non_private_epoch",
        "--no-compare-plain",
        "--out",
        str(tmp_path / "runs"),
    )
    assert one_run.returncode == 1, one_run.stdout[-3000:] + one_run.stderr[-2000:]
    assert "without a noisy step" in one_run.stdout
    (path,) = (tmp_path / "runs").glob("*-whitebox-audit/whitebox-audit.json")
    updates = json.loads(path.read_text())["parameters"]["non_private_updates"]
    assert {u["parameter"] for u in updates} == {"0.weight", "0.bias", "2.weight", "2.bias"}

    conformance = cli_in_process(
        "conformance", "--factory", F + "usage_parameter_outside", "--out", str(tmp_path / "runs")
    )
    assert conformance.returncode == 1, conformance.stdout[-3000:] + conformance.stderr[-2000:]
    assert "logit_offset" in conformance.stdout


def test_released_parameters_finds_what_a_factory_returns_undeclared():
    offset, head = nn.Parameter(torch.zeros(2)), nn.Linear(2, 2)
    plain = torch.optim.SGD([nn.Parameter(torch.ones(3))], lr=0.1)
    frozen = torch.zeros(4)  # no gradient: not a parameter anyone trains
    made = {
        "model": nn.Linear(4, 2),
        "extra_parameters": {"declared": nn.Parameter(torch.ones(1))},
        "offset": offset,
        "heads": [head],
        "optimizers": {"plain": plain},
        "buffer": frozen,
        "epochs": 1,
    }
    found = released_parameters(made, made["model"])
    assert list(found) == [
        "declared",
        "offset",
        "heads[0].weight",
        "heads[0].bias",
        "optimizers.plain (SGD) group 0 parameter 0 (3)",
    ]
    assert found["offset"] is offset


@pytest.mark.slow
def test_in_script_functorch_and_accumulation_done_right_hold():
    """In-script rows: per-sample gradients through functorch, and gradient accumulation done right by
    hand (each Poisson batch split into micro-batches, `signal_skip_step` on all but the last)."""
    from opacus import PrivacyEngine
    from torch.utils.data import DataLoader, TensorDataset

    from audit.one_run import OpacusAudit

    torch.manual_seed(0)
    x = torch.randn(1000, 20)
    y = (x[:, :3].sum(1) > 0).long()
    for mode in ("functorch", "hooks-accumulated"):
        model = nn.Sequential(nn.Linear(20, 128), nn.ReLU(), nn.Linear(128, 128), nn.ReLU(), nn.Linear(128, 2))
        engine = PrivacyEngine(accountant="prv")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model, optimizer, loader = engine.make_private_with_epsilon(
                module=model,
                optimizer=torch.optim.SGD(model.parameters(), lr=0.5),
                data_loader=DataLoader(TensorDataset(x, y), batch_size=50),
                target_epsilon=1.0,
                target_delta=1e-5,
                epochs=2,
                max_grad_norm=1.0,
                grad_sample_mode="functorch" if mode == "functorch" else "hooks",
            )
        with OpacusAudit(engine, optimizer, model, data_loader=loader, out=None) as audit:
            for _ in range(2):
                for xb, yb in loader:
                    chunks = list(zip(xb.split(10), yb.split(10))) if mode != "functorch" and len(xb) else [(xb, yb)]
                    for i, (xc, yc) in enumerate(chunks):
                        optimizer.zero_grad()
                        nn.functional.cross_entropy(model(xc), yc).backward()
                        optimizer.signal_skip_step(i < len(chunks) - 1)
                        optimizer.step()
        failed = {c["name"]: c["message"] for c in audit.verdict["checks"] if c.get("failed")}
        assert audit.verdict["status"] == "pass", (mode, failed)
        assert audit.result["steps"] == sum(h[2] for h in engine.accountant.history)
        if mode != "functorch":
            assert audit.result["physical_steps"] > 2 * audit.result["steps"]
