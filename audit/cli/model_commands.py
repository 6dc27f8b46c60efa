"""`audit-scores` and `audit-model`: audits of what the user brings."""
from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Optional

import typer

from audit.cli.app import app, console, switch
from audit.cli.output import (FailOnLeakOption, QuietOption, RayAddressOption, TrackingUriOption, command_progress, print_verdict,
                              publish_results, with_fail_on_leak)


@app.command("audit-scores")
def audit_scores_command(
    scores_file: Annotated[Path, typer.Argument(metavar="F", help="CSV/Parquet: member (0/1) + score (higher = member) or loss")],
    delta: Annotated[float, typer.Option(help="δ of the bounds")] = 1e-5,
    claimed_epsilon: Annotated[Optional[float], typer.Option("--claimed-epsilon", help="the ε the model claims")] = None,
    membership_randomized: Annotated[bool, switch("membership-randomized", "membership was a fair coin per record (enables the one-run bound)")] = False,
    confidence: Annotated[float, typer.Option(help="confidence of bounds and CIs")] = 0.95,
    policy: Annotated[Optional[Path], typer.Option("--policy", help="YAML policy; exit 1 when a rule fails")] = None,
    out: Annotated[Path, typer.Option("--out", help="folder that receives <timestamp>-scores/")] = Path("runs"),
    tracking_uri: TrackingUriOption = None,
    quiet: QuietOption = False,
    fail_on_leak: FailOnLeakOption = False,
) -> None:
    """Audit your own membership scores: every attack metric, ε lower bounds, report, gate."""
    from audit.machinery.crash_log import set_log_folder
    from audit.machinery.input_files import check_number
    from audit.machinery.policy import load_policy
    from audit.machinery.run_directory import check_output_folder
    from audit.machinery.tracking import check_tracking_uri
    from audit.model_audits.score_audit import audit_scores
    from reports.console import results_summary_table

    set_log_folder(out)
    check_number(delta, "--delta", low=1e-10, high=1, high_open=True)
    check_number(confidence, "--confidence", low=0.5, low_open=True, high=1, high_open=True)
    if claimed_epsilon is not None:
        check_number(claimed_epsilon, "--claimed-epsilon", low=0, low_open=True, high=1000,
                     why="a finite claim; leave the flag out when the model claims no ε")
    check_output_folder(out)
    check_tracking_uri(tracking_uri)
    loaded_policy = load_policy(policy) if policy is not None else None

    def metrics_of(results: dict) -> dict:
        target = results["targets"][0]
        attack = target["attacks"][0]
        return {"auc": attack["auc"], "tpr_at_fpr_0.001": attack["tpr_at_fpr"]["0.001"],
                "eps_lb_cp": attack["epsilon_lb"]["clopper_pearson"], "eps_lb_one_run": attack["epsilon_lb"]["one_run"],
                "eps_lb_best": target["epsilon_lb_best"]}

    results, final = publish_results(
        lambda staging: with_fail_on_leak(audit_scores(
            scores_file, delta=delta, confidence=confidence, claimed_epsilon=claimed_epsilon,
            membership_randomized=membership_randomized), fail_on_leak),
        out=out, folder_name="scores", experiment="audit-scores", tracking_uri=tracking_uri,
        run_name=scores_file.name, tags={"source": str(scores_file)}, metrics_of=metrics_of, policy=loaded_policy,
        progress=command_progress(quiet), what="scores: attack metrics, CIs and ε bounds",
    )
    console.print(results_summary_table(results))
    for note in results["notes"]:
        console.print(f"[yellow]note:[/yellow] {note}")
    console.print(f"results: {final}/results.json\nreport:  {final}/report.html")
    print_verdict(results)


@app.command("audit-model")
def audit_model(
    weights: Annotated[Optional[Path], typer.Option("--weights", help="torch state_dict (.pt, loaded weights_only) or .safetensors")] = None,
    factory: Annotated[Optional[str], typer.Option("--factory", help="module:function returning the nn.Module the weights fit (default: the MLP of training.hidden_sizes)")] = None,
    skops: Annotated[Optional[Path], typer.Option("--skops", help="scikit-learn estimator saved with skops.io.dump (pickle/joblib refused)")] = None,
    onnx: Annotated[Optional[Path], typer.Option("--onnx", help="ONNX file (run with onnxruntime)")] = None,
    function: Annotated[Optional[str], typer.Option("--function", help="module:function, a black-box prediction function")] = None,
    output: Annotated[Optional[str], typer.Option("--output", help="what the model returns: logits | probabilities | labels (label-only)")] = None,
    trainer: Annotated[Optional[str], typer.Option("--trainer", help="module:function train(features, labels, seed) -> model, for reference/shadow models")] = None,
    members: Annotated[Optional[Path], typer.Option("--members", help="CSV/Parquet/.npz of the model's training rows")] = None,
    nonmembers: Annotated[Optional[Path], typer.Option("--nonmembers", help="CSV/Parquet/.npz of rows it never saw")] = None,
    label: Annotated[Optional[str], typer.Option("--label", help="label column of CSV/Parquet files (integer classes)")] = None,
    config: Annotated[Optional[Path], typer.Option("--config", help="YAML: model section (model, trainer, data), training, privacy, attacks")] = None,
    claimed_epsilon: Annotated[Optional[str], typer.Option("--claimed-epsilon", help="the ε the model claims ('inf' = none)")] = None,
    population: Annotated[Optional[Path], typer.Option("--population", help="population rows for reference/shadow models")] = None,
    attacks: Annotated[Optional[str], typer.Option("--attacks", help="comma-separated, e.g. loss,lira,rmia or label_only")] = None,
    executor: Annotated[str, typer.Option("--executor", help="where --trainer trains reference/shadow models, each isolated "
                                          "from this process: local (one child process) | processes | ray (same numbers on each)")] = "processes",
    workers: Annotated[Optional[int], typer.Option("--workers", help="processes: parallel processes training reference models "
                                                   "[default: the cores]; ray: CPUs of the local cluster started here")] = None,
    ray_address: RayAddressOption = None,
    timeout: Annotated[Optional[float], typer.Option("--timeout", help="seconds one call of your code may take")] = None,
    device: Annotated[str, typer.Option(help="auto | cpu | cuda")] = "auto",
    policy: Annotated[Optional[Path], typer.Option("--policy", help="YAML policy; exit 1 when a rule fails")] = None,
    out: Annotated[Path, typer.Option("--out", help="folder that receives <timestamp>-<name>/")] = Path("runs"),
    tracking_uri: TrackingUriOption = None,
    quiet: QuietOption = False,
    fail_on_leak: FailOnLeakOption = False,
) -> None:
    """Audit your own trained model: a PyTorch module, a scikit-learn estimator (skops), an ONNX file or a
    prediction function (optionally label-only), on member / non-member files."""
    from audit.machinery.config import parse_epsilon_list, resolve_config
    from audit.model_audits.model_audit import audit_user_model
    from audit.machinery.policy import load_policy
    from audit.machinery.crash_log import set_log_folder
    from audit.machinery.executors import check_executor_options
    from audit.machinery.run_directory import check_output_folder
    from audit.machinery.tracking import check_tracking_uri, target_metrics
    from reports.console import results_summary_table

    set_log_folder(out)
    check_executor_options(executor, workers, ray_address)
    check_output_folder(out)
    check_tracking_uri(tracking_uri)
    overrides: dict = {"privacy": {"epsilons": parse_epsilon_list(claimed_epsilon)}} if claimed_epsilon else {}
    if timeout is not None:
        overrides["model"] = {"timeout": timeout}
    resolved = resolve_config("default", config, overrides or None)
    loaded_policy = load_policy(policy) if policy is not None else None
    names = [name.strip() for name in attacks.split(",") if name.strip()] if attacks else None
    model_name = next((str(v) for v in (weights, skops, onnx, function) if v is not None), None)
    if model_name is None and resolved.model is not None:
        model_name = next((str(getattr(resolved.model, k)) for k in ("weights", "skops", "onnx", "function")
                           if getattr(resolved.model, k)), None)
    model_name = Path(model_name).name if model_name else "model"
    if resolved.name == "default":  # the user audits their model, not the default preset: name the run after it
        resolved = resolve_config("default", config, {**overrides, "name": audit_name_for_model(model_name)})
    progress = command_progress(quiet)
    results, final = publish_results(
        lambda staging: with_fail_on_leak(audit_user_model(
            resolved, weights=weights, factory=factory, skops=skops, onnx=onnx, function=function, output=output,
            trainer=trainer, members=members, nonmembers=nonmembers, label=label, population=population,
            attack_names=names, device=device, workers=workers, executor=executor, ray_address=ray_address,
            scores_path=staging / "scores" / "scores.csv",
        ), fail_on_leak),
        out=out, folder_name=resolved.name, experiment="audit-model", tracking_uri=tracking_uri,
        run_name=f"audit-model {model_name}", tags={"model": model_name},
        metrics_of=lambda results: target_metrics(results["targets"][0]), policy=loaded_policy,
        progress=progress, what="model audit",
    )
    console.print(results_summary_table(results))
    for note in results["notes"]:
        console.print(f"[yellow]note:[/yellow] {note}", soft_wrap=True)
    console.print(f"results: {final}/results.json\nreport:  {final}/report.html")
    print_verdict(results)


def audit_name_for_model(model_name: str) -> str:
    """A run name from the model's file or function name (`forest.skops` → `forest`, `api:predict` →
    `api-predict`), within the config's name pattern; `model` when nothing usable is left."""
    stem = model_name.rsplit(".", 1)[0] if "." in model_name and ":" not in model_name else model_name
    cleaned = re.sub(r"[^A-Za-z0-9_.-]+", "-", stem).strip("-._")[:64]
    return cleaned or "model"
