"""`audit-scores` and `audit-model`: audits of what the user brings."""
from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from audit.cli.app import app, console, switch
from audit.cli.output import print_verdict, publish_results


@app.command("audit-scores")
def audit_scores_command(
    scores_file: Annotated[Path, typer.Argument(metavar="F", help="CSV/Parquet: member (0/1) + score (higher = member) or loss")],
    delta: Annotated[float, typer.Option(help="δ of the bounds")] = 1e-5,
    claimed_epsilon: Annotated[Optional[float], typer.Option("--claimed-epsilon", help="the ε the model claims")] = None,
    membership_randomized: Annotated[bool, switch("membership-randomized", "membership was a fair coin per record (enables the one-run bound)")] = False,
    confidence: Annotated[float, typer.Option(help="confidence of bounds and CIs")] = 0.95,
    policy: Annotated[Optional[Path], typer.Option("--policy", help="YAML policy; exit 1 when a rule fails")] = None,
    out: Annotated[Path, typer.Option("--out", help="folder that receives <timestamp>-scores/")] = Path("runs"),
    tracking_uri: Annotated[Optional[str], typer.Option("--tracking-uri", help="MLflow tracking URI (default: sqlite:///mlflow.db in the working directory)")] = None,
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
        lambda staging: audit_scores(scores_file, delta=delta, confidence=confidence, claimed_epsilon=claimed_epsilon,
                                     membership_randomized=membership_randomized),
        out=out, folder_name="scores", experiment="audit-scores", tracking_uri=tracking_uri,
        run_name=scores_file.name, tags={"source": str(scores_file)}, metrics_of=metrics_of, policy=loaded_policy,
    )
    console.print(results_summary_table(results))
    for note in results["notes"]:
        console.print(f"[yellow]note:[/yellow] {note}")
    console.print(f"results: {final}/results.json\nreport:  {final}/report.html")
    print_verdict(results)


@app.command("audit-model")
def audit_model(
    weights: Annotated[Path, typer.Option("--weights", help="state_dict (.pt, loaded weights_only) or .safetensors")],
    members: Annotated[Path, typer.Option("--members", help="CSV/Parquet of the model's training rows")],
    nonmembers: Annotated[Path, typer.Option("--nonmembers", help="CSV/Parquet of rows it never saw")],
    label: Annotated[str, typer.Option("--label", help="label column (integer classes)")],
    config: Annotated[Optional[Path], typer.Option("--config", help="YAML: training section = the model's architecture and training")] = None,
    claimed_epsilon: Annotated[Optional[str], typer.Option("--claimed-epsilon", help="the ε the model claims ('inf' = none)")] = None,
    population: Annotated[Optional[Path], typer.Option("--population", help="population rows for reference/shadow models")] = None,
    attacks: Annotated[Optional[str], typer.Option("--attacks", help="comma-separated, e.g. loss,lira,rmia")] = None,
    device: Annotated[str, typer.Option(help="auto | cpu | cuda")] = "auto",
    policy: Annotated[Optional[Path], typer.Option("--policy", help="YAML policy; exit 1 when a rule fails")] = None,
    out: Annotated[Path, typer.Option("--out", help="folder that receives <timestamp>-<name>/")] = Path("runs"),
    tracking_uri: Annotated[Optional[str], typer.Option("--tracking-uri", help="MLflow tracking URI (default: sqlite:///mlflow.db in the working directory)")] = None,
) -> None:
    """Audit your own trained PyTorch MLP from its weights and member / non-member files."""
    from audit.machinery.config import parse_epsilon_list, resolve_config
    from audit.model_audits.model_audit import audit_user_model
    from audit.machinery.policy import load_policy
    from audit.machinery.crash_log import set_log_folder
    from audit.machinery.run_directory import check_output_folder
    from audit.machinery.tracking import check_tracking_uri, target_metrics
    from reports.console import results_summary_table

    set_log_folder(out)
    check_output_folder(out)
    check_tracking_uri(tracking_uri)
    overrides = {"privacy": {"epsilons": parse_epsilon_list(claimed_epsilon)}} if claimed_epsilon else None
    resolved = resolve_config("default", config, overrides)
    loaded_policy = load_policy(policy) if policy is not None else None
    names = [name.strip() for name in attacks.split(",") if name.strip()] if attacks else None
    results, final = publish_results(
        lambda staging: audit_user_model(
            resolved, weights=weights, members=members, nonmembers=nonmembers, label=label, population=population,
            attack_names=names, device=device, scores_path=staging / "scores" / "scores.csv",
        ),
        out=out, folder_name=resolved.name, experiment=resolved.name, tracking_uri=tracking_uri,
        run_name=f"audit-model {weights.name}", tags={"weights": str(weights)},
        metrics_of=lambda results: target_metrics(results["targets"][0]), policy=loaded_policy,
    )
    console.print(results_summary_table(results))
    for note in results["notes"]:
        console.print(f"[yellow]note:[/yellow] {note}", soft_wrap=True)
    console.print(f"results: {final}/results.json\nreport:  {final}/report.html")
    print_verdict(results)
