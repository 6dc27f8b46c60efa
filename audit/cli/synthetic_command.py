"""`synth-check`: privacy checks of a synthetic release."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from audit.cli.app import app, console, err_console, shown, switch
from audit.cli.ledger_commands import DatasetOption, LedgerOption, record_in_ledger
from audit.cli.output import (
    QuietOption,
    TrackingUriOption,
    command_progress,
    print_one_run_bounds,
    print_verdict,
    publish_results,
)
from audit.cli.verdict_flags import AllowLeakOption, FailOnInconclusiveOption, LegacyFailOnLeakOption, leak_fails
from audit.errors import AuditInputError

# A holdout sharing more than this share of its rows with train is not a holdout (a few identical
# rows happen by chance in low-cardinality tables; a copied or overlapping file is refused).
MAX_HOLDOUT_OVERLAP = 0.1


def _check_distinct_files(train: Path, holdout: Path, synthetic: Path) -> None:
    """The holdout must be a file of its own: the same file as train or synthetic makes every check
    vacuous (it used to PASS). A synthetic file equal to train is allowed — a generator that copies
    its training data is exactly what the checks find."""
    import os

    pairs = ((("--train", train), ("--holdout", holdout)), (("--holdout", holdout), ("--synthetic", synthetic)))
    for (flag_a, a), (flag_b, b) in pairs:
        try:
            same = os.path.samefile(a, b)
        except OSError:
            continue  # a missing file: the reader names it
        if same:
            raise AuditInputError(
                f"{flag_b} '{b}'", f"is the same file as {flag_a} '{a}'; the holdout must be a file of its own"
            )


def _check_holdout_overlap(train_frame, holdout_frame, holdout: Path) -> None:
    import pandas as pd

    if set(map(str, train_frame.columns)) != set(map(str, holdout_frame.columns)):
        return  # the checks name the column mismatch
    columns = list(train_frame.columns)
    try:
        train_rows = set(pd.util.hash_pandas_object(train_frame[columns], index=False).to_numpy().tolist())
        holdout_hashes = pd.util.hash_pandas_object(holdout_frame[columns], index=False).to_numpy()
    except (TypeError, ValueError):
        return
    shared = sum(1 for h in holdout_hashes.tolist() if h in train_rows)
    if len(holdout_hashes) and shared / len(holdout_hashes) > MAX_HOLDOUT_OVERLAP:
        raise AuditInputError(
            f"--holdout '{holdout}'",
            f"shares {shared} of its {len(holdout_hashes)} rows with "
            f"--train (> {MAX_HOLDOUT_OVERLAP:.0%}); the holdout must be records the generator "
            "never saw",
        )


@app.command("synth-check")
def synth_check(
    train: Annotated[Path, typer.Option("--train", help="the generator's training table (CSV/Parquet)")],
    holdout: Annotated[Path, typer.Option("--holdout", help="same-population rows the generator never saw, same size")],
    synthetic: Annotated[Path, typer.Option("--synthetic", help="the synthetic release")],
    target_column: Annotated[str | None, typer.Option("--target-column", help="for TSTR utility")] = None,
    nan_policy: Annotated[str, typer.Option("--nan-policy", help="error | drop_rows | indicator")] = "error",
    claimed_epsilon: Annotated[float | None, typer.Option("--claimed-epsilon", help="the generator's DP ε")] = None,
    delta: Annotated[float, typer.Option(help="δ of the ε lower bound")] = 1e-5,
    membership_randomized: Annotated[
        bool, switch("membership-randomized", "rows went to train/holdout by fair coin (enables the one-run bound)")
    ] = False,
    subsample_train: Annotated[
        bool, switch("subsample-train", "accept a smaller holdout by subsampling train")
    ] = False,
    seed: Annotated[int, typer.Option(help="seed of subsampling and the distance attack")] = 0,
    policy: Annotated[Path | None, typer.Option("--policy", help="YAML policy; exit 1 when a rule fails")] = None,
    out: Annotated[Path, typer.Option("--out", help="folder that receives <timestamp>-synth-check/")] = Path("runs"),
    tracking_uri: TrackingUriOption = None,
    quiet: QuietOption = False,
    allow_leak: AllowLeakOption = False,
    fail_on_inconclusive: FailOnInconclusiveOption = False,
    ledger: LedgerOption = None,
    dataset: DatasetOption = None,
    fail_on_leak: LegacyFailOnLeakOption = None,
) -> None:
    """Is a synthetic release a disguised copy of its training data? NNDR, DCR, distance MIA, fidelity."""
    from audit.machinery.crash_log import set_log_folder
    from audit.machinery.input_files import check_number, check_seed
    from audit.machinery.policy import load_policy
    from audit.machinery.run_directory import check_output_folder
    from audit.machinery.tracking import check_tracking_uri, synthetic_risk_metrics
    from audit.synthetic.synthetic_check import read_table, synthetic_check_results

    set_log_folder(out)
    fail_on_leak = leak_fails(allow_leak, fail_on_leak)
    if nan_policy not in ("error", "drop_rows", "indicator"):
        raise AuditInputError("--nan-policy", f"expected error, drop_rows or indicator, got {nan_policy[:40]!r}")
    if claimed_epsilon is not None:
        check_number(claimed_epsilon, "--claimed-epsilon", low=0, low_open=True, high=1000)
    elif ledger is not None:  # before any work: a release without an ε cannot be recorded (nothing written)
        raise AuditInputError(
            "--ledger",
            "synth-check records a release only with --claimed-epsilon (the "
            "generator's DP ε); without a claim there is nothing to spend",
        )
    check_number(
        delta,
        "--delta",
        low=1e-10,
        high=1,
        high_open=True,
        why="δ = 0 has no finite Clopper-Pearson ε bound; below 1e-10 the bounds lose precision",
    )
    check_seed(seed)
    check_output_folder(out)
    check_tracking_uri(tracking_uri)
    loaded_policy = load_policy(policy) if policy is not None else None
    _check_distinct_files(train, holdout, synthetic)
    frames = [
        read_table(path, role) for path, role in ((train, "train"), (holdout, "holdout"), (synthetic, "synthetic"))
    ]
    _check_holdout_overlap(frames[0], frames[1], holdout)
    from audit.machinery.limits import check_memory
    from audit.machinery.memory_estimates import synth_check_bytes

    n_train, n_holdout, n_synthetic = (len(frame) for frame in frames)
    check_memory(
        synth_check_bytes(
            n_train,
            n_holdout,
            n_synthetic,
            frames[0].shape[1],
            sum(int(frame.memory_usage(deep=True).sum()) for frame in frames),
        ),
        f"--synthetic '{synthetic}'",
        f"synth-check of {n_train:,} + {n_holdout:,} + {n_synthetic:,} rows × {frames[0].shape[1]} columns",
    )
    progress = command_progress(quiet)
    try:
        with progress.step("distances, DCR, NNDR, distance MIA, fidelity, re-identification risks"):
            results = synthetic_check_results(
                *frames,
                sources=(str(train), str(holdout), str(synthetic)),
                generator=f"user-supplied ({synthetic.name})",
                nan_policy=nan_policy,  # type: ignore[arg-type]  # one of NanPolicy's three values: checked above
                target_column=target_column,
                claimed_epsilon=claimed_epsilon,
                delta=delta,
                membership_randomized=membership_randomized,
                subsample_train=subsample_train,
                seed=seed,
                fail_on_leak=fail_on_leak,
            )
    except BaseException:
        progress.close()
        raise
    entry = results["synthetic"][0]
    results, final = publish_results(
        lambda staging: results,
        out=out,
        folder_name="synth-check",
        experiment="synth-check",
        tracking_uri=tracking_uri,
        run_name=synthetic.name,
        tags={"synthetic": str(synthetic)},
        metrics_of=lambda results: {
            "dcr_share": entry["dcr"]["dcr_share"],
            "nndr_p10": entry["nndr"]["p10"],
            "exact_match_rate": entry["dcr"].get("exact_match_rate"),
            "mia_auc": entry["mia"]["auc"],
            "mia_eps_lb_cp": entry["mia"]["epsilon_lb"]["clopper_pearson"],
            **synthetic_risk_metrics(entry),
        },
        policy=loaded_policy,
        progress=progress,
        what=None,
        inputs=[
            {"frame": frame, "name": path.name, "source": str(path), "context": role}
            for frame, path, role in zip(frames, (train, holdout, synthetic), ("training", "holdout", "synthetic"))
        ],
    )
    dcr, nndr, mia = entry["dcr"], entry["nndr"], entry["mia"]
    lo, hi = dcr.get("dcr_share_ci", [None, None])
    console.print(
        f"DCR share (closer to train than holdout): {dcr['dcr_share']:.3f} (95% CI {lo:.3f}–{hi:.3f}; "
        f"≈0.5 expected), exact-match rate {dcr.get('exact_match_rate', 0):.4f}"
    )
    console.print(
        f"NNDR p1 / p10 / median: {nndr['p1']:.3f} / {nndr['p10']:.3f} / {nndr['median']:.3f} (near 0 = near-copies)"
    )
    console.print(
        f"distance MIA: AUC {mia['auc']:.3f}, ε lower bound (Clopper-Pearson) "
        f"{mia['epsilon_lb']['clopper_pearson']:.3f}"
    )
    from reports.console import synthetic_risks_table

    risks_table = synthetic_risks_table(results)
    if risks_table is not None:
        console.print(risks_table)
    print_one_run_bounds(results)
    for flag in entry["flags"]:
        err_console.print(f"[red]FLAG[/red] {shown(flag['message'])}", soft_wrap=True)
    console.print(f"results: {shown(final)}/results.json\nreport:  {shown(final)}/report.html")
    record_in_ledger(ledger, dataset, "synth-check", results, final / "results.json", loaded_policy)
    print_verdict(results, fail_on_inconclusive=fail_on_inconclusive)  # exit 1 on "fail", with or without a policy
