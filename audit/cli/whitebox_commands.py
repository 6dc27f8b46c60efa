"""`whitebox-audit`: the white-box audits of DP-SGD code (`--mode runs`, `--mode one-run`).

Split from dp_commands.py (issue #37): the command, its one-run branch and the console output of
both modes; the result is recorded once (`_record`) whichever mode made it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from audit.cli.app import app, console, shown, switch
from audit.cli.ledger_commands import DatasetOption, LedgerOption, record_in_ledger
from audit.cli.output import (
    QuietOption,
    TrackingUriOption,
    command_progress,
    print_verdict,
    record_audit,
)
from audit.cli.sequential_flags import LooksOption, SpendingOption, print_declared_design, print_runs_used
from audit.cli.verdict_flags import FailOnInconclusiveOption
from audit.errors import AuditInputError


@app.command(
    "whitebox-audit",
    short_help="White-box audit of DP-SGD code with a Dirac gradient canary in every step: "
    "exit 1 when the runs refute the claimed privacy.",
)
def whitebox_audit(
    factory: Annotated[
        str | None,
        typer.Option(
            "--factory",
            help="module:function () -> (model, optimizer, data_loader, privacy_engine) made private by Opacus; runs your code",
        ),
    ] = None,
    builtin: Annotated[
        bool,
        switch(
            "builtin", "audit the harness's own DP-SGD (vectorized trainer) at --noise-multiplier/--sample-rate/--steps"
        ),
    ] = False,
    noise_multiplier: Annotated[float | None, typer.Option("--noise-multiplier", help="σ (--builtin only)")] = None,
    sample_rate: Annotated[
        float, typer.Option("--sample-rate", help="q (--builtin only; 1 = full batch, where the audit is tight)")
    ] = 1.0,
    steps: Annotated[int, typer.Option("--steps", help="T (--builtin only)")] = 20,
    max_grad_norm: Annotated[float, typer.Option("--max-grad-norm", help="C (--builtin only)")] = 1.0,
    runs: Annotated[int, typer.Option("--runs", help="training runs per side (with / without the canary)")] = 1000,
    observe: Annotated[str, typer.Option("--observe", help="all (every iterate) | final (final model only)")] = "all",
    delta: Annotated[float, typer.Option("--delta", help="δ of the claim")] = 1e-5,
    claimed_epsilon: Annotated[
        float | None, typer.Option("--claimed-epsilon", help="overrides the accountant's ε")
    ] = None,
    seed: Annotated[int, typer.Option(help="seed of the runs and the canary's sampling")] = 0,
    looks: LooksOption = None,
    spending: SpendingOption = "haybittle-peto",
    workers: Annotated[
        int | None, typer.Option("--workers", help="worker processes training in parallel (default: the cores)")
    ] = None,
    timeout: Annotated[
        float, typer.Option("--timeout", help="seconds one block of runs may take in its worker")
    ] = 900.0,
    fail_on_inconclusive: FailOnInconclusiveOption = False,
    out: Annotated[Path, typer.Option("--out", help="folder that receives <timestamp>-whitebox-audit/")] = Path("runs"),
    tracking_uri: TrackingUriOption = None,
    quiet: QuietOption = False,
    mode: Annotated[
        str,
        typer.Option(
            "--mode",
            help="runs: many runs with / without one canary | one-run: m canaries in ONE training run (Steinke et al. 2023)",
        ),
    ] = "runs",
    canaries: Annotated[
        int | None, typer.Option("--canaries", help="m canaries (--mode one-run; default from the model size)")
    ] = None,
    canary_kind: Annotated[str, typer.Option("--canary-kind", help="auto | dirac | random (--mode one-run)")] = "auto",
    compare_plain: Annotated[
        bool, switch("compare-plain", "--mode one-run: also time one plain run (overhead, accuracy)")
    ] = True,
    device: Annotated[
        str | None,
        typer.Option(
            "--device",
            help="auto | cpu | cuda (--builtin only; auto: a GPU when PyTorch sees one; a --factory places its own model)",
        ),
    ] = None,
    ledger: LedgerOption = None,
    dataset: DatasetOption = None,
) -> None:
    """White-box audit of DP-SGD code with a Dirac gradient canary in every step (Nasr et al. 2023):
    exit 1 when the runs refute the claimed privacy. `--mode one-run`: m gradient canaries in one
    training run of your setup, claim held / refuted / untestable.

    Your factory runs only in isolated worker processes, one fresh setup per run. At q = 1 the claim
    is exactly μ-GDP and the test of its trade-off curve decides; the GDP-family bound assumes a
    Gaussian trade-off curve (true there). At q < 1 the claim's PLD trade-off curve decides; the GDP
    number is an estimate. At every q the Clopper-Pearson (ε, δ) bound of a tail rule (sound for any
    mechanism) decides too; the two tests split α."""
    from audit.dp_validation.whitebox_audit import run_whitebox_audit
    from audit.machinery.crash_log import set_log_folder
    from audit.machinery.input_files import check_number, check_seed
    from audit.machinery.run_directory import check_output_folder
    from audit.machinery.tracking import check_tracking_uri

    set_log_folder(out)
    check_number(timeout, "--timeout", low=0, low_open=True, high=86_400)
    check_seed(seed)
    if builtin and noise_multiplier is not None:  # σ = 1e-300 was an OverflowError, σ = 1e-6 a 71 PiB MemoryError
        from audit.ledger.composition import check_dpsgd_computable
        from audit.machinery.limits import check_count, check_range

        check_range("ledger --noise-multiplier", noise_multiplier, where="--noise-multiplier")
        check_range("ledger --sample-rate", sample_rate, where="--sample-rate")
        check_count("--steps", steps, high=100_000)
        if mode == "runs":  # the counts first (named as before): whitebox_audit's own estimate of the runs' memory
            from audit.machinery.limits import check_memory

            check_memory(
                2 * check_count("--runs", runs) * steps * 8 * 3,
                "--runs",
                f"whitebox-audit with {runs:,} runs per side of {steps:,} steps",
            )
        check_dpsgd_computable(
            noise_multiplier, sample_rate, steps, delta if 0 < delta < 1 else 1e-5, "--noise-multiplier"
        )
    if workers is not None and not 1 <= workers <= 1024:
        raise AuditInputError("--workers", f"must be in [1, 1024], got {workers}")
    if factory is not None and builtin:
        raise AuditInputError("--factory", "give either --factory or --builtin, not both")
    check_output_folder(out)
    check_tracking_uri(tracking_uri)
    if mode not in ("runs", "one-run"):
        raise AuditInputError("--mode", f"expected runs or one-run, got {mode!r}")
    if mode == "one-run" and looks not in (None, 1):  # one training run: nothing to look at before it ends
        raise AuditInputError("--looks", "sequential looks apply to --mode runs; --mode one-run is one training run")
    if device is not None:
        from audit.dp_validation.whitebox_audit import builtin_device

        device = builtin_device(device, builtin)  # before any worker starts: CUDA without a GPU is one line
    # What both modes take (each checks it again as a library function would, naming parameters).
    common: dict[str, Any] = {
        "factory": factory,
        "builtin": builtin,
        "noise_multiplier": noise_multiplier,
        "sample_rate": sample_rate,
        "steps": steps,
        "max_grad_norm": max_grad_norm,
        "observe": observe,
        "delta": delta,
        "claimed_epsilon": claimed_epsilon,
        "seed": seed,
        "timeout": timeout,
        "device": device,
    }
    recording = (out, tracking_uri, ledger, dataset, fail_on_inconclusive)
    if mode == "one-run":
        _one_run(common, canaries, canary_kind, compare_plain, quiet, recording)
        return
    from audit.dp_validation.whitebox_audit import whitebox_design
    from audit.machinery.limits import check_count as check_runs

    design = whitebox_design(check_runs("--runs", runs), looks=looks, spending=spending)
    if not quiet:
        print_declared_design(design, "runs per side")
    progress = command_progress(quiet)
    try:
        # Lazy: shown from the first finished block, so a factory that fails in its worker stays one error line.
        with progress.lazy_step(
            f"white-box audit: training runs finished (up to {runs} with the Dirac canary, {runs} without)",
            total=2 * runs,
        ) as runs_step:
            result = run_whitebox_audit(
                **common,
                n_runs=runs,
                workers=workers,
                report_runs=lambda done, _total: runs_step.update(done),
                looks=looks,
                spending=spending,
            )
    finally:
        progress.close()
    path, result = _record(
        result, recording, {"observe": observe, "runs": runs, "seed": seed, "mu_lower_bound": result["gdp_bound"]["mu"]}
    )
    print_runs_used(result, "runs per side")
    print_whitebox_result(result, path, fail_on_inconclusive)


def _record(result: dict, recording: tuple, params: dict[str, Any]) -> tuple[Path, dict[str, Any]]:
    """Write the result (its digest, MLflow) and, with --ledger/--dataset, record its spend: both modes.
    `recording` is the command's (out, tracking_uri, ledger, dataset, fail_on_inconclusive)."""
    out, tracking_uri, ledger, dataset, _ = recording
    path, result = record_audit("whitebox-audit", result, out, tracking_uri, {"subject": result["subject"], **params})
    record_in_ledger(ledger, dataset, "whitebox-audit", result, path)
    return path, result


def print_whitebox_result(result: dict, path: Path, fail_on_inconclusive: bool) -> None:
    s, claim, gdp = result["settings"], result["claim"], result["gdp_bound"]
    console.print(
        f"white-box audit of {shown(result['subject'])}: {result['n_runs_per_side']} runs per side, observing "
        f"{result['observed']}",
        highlight=False,
        soft_wrap=True,
    )
    console.print(
        f"claim ({shown(claim['source'])}): ε {result['claimed_epsilon']:.3f} at δ {result['delta']:g}; optimizer σ "
        f"{s['noise_multiplier']:g}, C {s['max_grad_norm']:g}, q {s.get('sample_rate')}, T {s['steps']}; "
        f"{claim['mu_label']}: μ {gdp['claimed_mu']:.3f}",
        highlight=False,
        soft_wrap=True,
    )
    console.print(
        f"sound (ε, δ) lower bound (Clopper-Pearson at its tail rule, any mechanism): "
        f"{result['epsilon_lower_bound']:.3f} ({result['epsilon_lower_bound'] / max(result['claimed_epsilon'], 1e-12):.2f} "
        f"× the claim; at the equal-error point: {result['epsilon_lower_bound_equal_error']:.3f})",
        highlight=False,
        soft_wrap=True,
    )
    console.print(
        f"GDP-family bound: μ ≥ {gdp['mu']:.3f}, ε ≥ {gdp['epsilon']:.3f} at δ {result['delta']:g} "
        f"({gdp['epsilon'] / result['claimed_epsilon']:.2f} × the claim); assumes {gdp['assumption']}",
        highlight=False,
        soft_wrap=True,
    )
    # No separate ceiling line: each deciding test below states its own (they differ; one number would mislead).
    for check in result["verdict"]["checks"]:
        console.print(f"· {shown(check['name'])}: {shown(check['message'])}", highlight=False, soft_wrap=True)
    console.print(f"details: {shown(path)}", highlight=False)
    print_verdict(result, fail_on_inconclusive=fail_on_inconclusive)


def _one_run(
    common: dict[str, Any],
    canaries: int | None,
    canary_kind: str,
    compare_plain: bool,
    quiet: bool,
    recording: tuple[Path, str | None, str | None, str | None, bool],
) -> None:
    from audit.dp_validation.one_run_whitebox import run_one_run_whitebox_audit

    progress = command_progress(quiet)
    try:
        # Counted in optimizer steps (the worker reports them), with the time left once one is done.
        with progress.lazy_step(
            "one-run audit: optimizer steps, training with canaries" + (" then plain" if compare_plain else "")
        ) as training:

            def report_steps(done: int, total: int) -> None:
                training.set_total(max(total, done))
                training.update(done)

            result = run_one_run_whitebox_audit(
                **common,
                n_canaries=canaries,
                canary_kind=canary_kind,
                compare_plain=compare_plain,
                report_steps=report_steps,
            )
    finally:
        progress.close()
    path, result = _record(
        result,
        recording,
        {"mode": "one-run", "observe": common["observe"], "canaries": result["canaries"]["m"], "seed": common["seed"]},
    )
    print_one_run_result(result, path, recording[-1])


def print_one_run_result(result: dict, path: Path, fail_on_inconclusive: bool) -> None:
    c, o, s = result["canaries"], result["one_run"], result["settings"]
    say = lambda text: console.print(text, highlight=False, soft_wrap=True)  # noqa: E731
    say(
        f"white-box one-run audit of {result['subject']}: {c['m']} {c['kind']} gradient canaries (norm "
        f"{c['norm_over_C']:g}·C, fair coins, then Poisson q) in ONE run of {result['steps']} steps; observing "
        f"{result['observed']}"
    )
    say(
        f"claim ({result['claim']['source']}): ε {result['claimed_epsilon']:.3f} at δ {result['delta']:g}; optimizer σ "
        f"{s['noise_multiplier']:g}, C {s['max_grad_norm']:g}, q {s.get('sample_rate')}, T {s['steps']}"
    )
    fdp = o["fdp"]
    say(
        f"sound: Steinke et al. ε ≥ {o['steinke']['epsilon']:.3f} (ceiling {o['ceiling']:.3f}); f-DP one-run test "
        + (
            "not run"
            if fdp is None
            else ("REFUTES the claim's curve" if fdp["refuted"] else "does not refute the claim's curve")
            + f" (GDP-family ε {_gaussian_figure(fdp['gdp_family_epsilon'], fdp.get('gdp_family_epsilon_withheld'))}, "
            "a bound only if the curve is Gaussian)"
        )
    )
    gsum, andrew = o["gaussian_sum"], o["andrew"]
    say(
        f"estimates: Gaussian normalized sum ε ≈ {_gaussian_figure(gsum['epsilon'], gsum.get('withheld'))} (assumes "
        f"{gsum['assumption']}); Andrew et al. ε ≈ {_gaussian_figure(andrew['epsilon'], andrew.get('withheld'))}"
        + (f"; Gaussian-family figures withheld: {gsum['withheld']}" if gsum.get("withheld") else "")
    )
    cost, acc = result["cost"], result["accuracy"]
    if cost.get("overhead") is not None:
        say(
            f"cost: {cost['seconds_with_canaries']:.1f} s with canaries vs {cost['seconds_plain']:.1f} s plain "
            f"({cost['overhead']:.2f}×; goal ≤ {cost['goal']}×)"
        )
    if acc.get("with_canaries") is not None:
        plain = acc.get("plain")
        say(
            f"test accuracy: {acc['with_canaries']:.3f} with canaries"
            + ("" if plain is None else f", {plain:.3f} without")
        )
    for claim in result["verdict"].get("claims") or []:
        say(f"claim {claim['claim']}: {claim['status']}")
    for check in result["verdict"]["checks"]:
        say(f"· {shown(check['name'])}: {shown(check['message'])}")
    console.print(f"details: {shown(path)}", highlight=False)
    print_verdict(result, fail_on_inconclusive=fail_on_inconclusive)


def _gaussian_figure(value, withheld) -> str:
    """A Gaussian-family ε for the console: the number, "withheld" where the scores contradict a
    Gaussian curve (audit.statistics.gdp_fit), "∞" where it is unbounded."""
    if withheld or value is None:
        return "withheld" if withheld else "—"
    return "∞" if value == float("inf") else f"{value:.3f}"
