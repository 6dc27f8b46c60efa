"""`audit-scores` and `audit-model`: audits of what the user brings."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated

import typer

from audit.cli.app import app, console, shown, switch
from audit.cli.output import (
    QuietOption,
    RayAddressOption,
    TrackingUriOption,
    command_progress,
    print_one_run_bounds,
    print_verdict,
    publish_results,
    with_fail_on_leak,
)
from audit.cli.verdict_flags import AllowLeakOption, FailOnInconclusiveOption, LegacyFailOnLeakOption, leak_fails


@app.command("audit-scores")
def audit_scores_command(
    scores_file: Annotated[
        Path, typer.Argument(metavar="F", help="CSV/Parquet: member (0/1) + score (higher = member) or loss")
    ],
    delta: Annotated[float, typer.Option(help="δ of the bounds")] = 1e-5,
    claimed_epsilon: Annotated[float | None, typer.Option("--claimed-epsilon", help="the ε the model claims")] = None,
    membership_randomized: Annotated[
        bool, switch("membership-randomized", "membership was a fair coin per record (enables the one-run bound)")
    ] = False,
    confidence: Annotated[float, typer.Option(help="confidence of bounds and CIs")] = 0.95,
    policy: Annotated[Path | None, typer.Option("--policy", help="YAML policy; exit 1 when a rule fails")] = None,
    out: Annotated[Path, typer.Option("--out", help="folder that receives <timestamp>-scores/")] = Path("runs"),
    tracking_uri: TrackingUriOption = None,
    quiet: QuietOption = False,
    allow_leak: AllowLeakOption = False,
    fail_on_inconclusive: FailOnInconclusiveOption = False,
    fail_on_leak: LegacyFailOnLeakOption = None,
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
    fail_on_leak = leak_fails(allow_leak, fail_on_leak)
    check_number(delta, "--delta", low=1e-10, high=1, high_open=True)
    check_number(confidence, "--confidence", low=0.5, low_open=True, high=1, high_open=True)
    if claimed_epsilon is not None:
        check_number(
            claimed_epsilon,
            "--claimed-epsilon",
            low=0,
            low_open=True,
            high=1000,
            why="a finite claim; leave the flag out when the model claims no ε",
        )
    check_output_folder(out)
    check_tracking_uri(tracking_uri)
    loaded_policy = load_policy(policy) if policy is not None else None

    def metrics_of(results: dict) -> dict:
        target = results["targets"][0]
        attack = target["attacks"][0]
        return {
            "auc": attack["auc"],
            "tpr_at_fpr_0.001": attack["tpr_at_fpr"]["0.001"],
            "eps_lb_cp": attack["epsilon_lb"]["clopper_pearson"],
            "eps_lb_one_run": attack["epsilon_lb"]["one_run"],
            "eps_lb_best": target["epsilon_lb_best"],
        }

    results, final = publish_results(
        lambda staging: with_fail_on_leak(
            audit_scores(
                scores_file,
                delta=delta,
                confidence=confidence,
                claimed_epsilon=claimed_epsilon,
                membership_randomized=membership_randomized,
            ),
            fail_on_leak,
        ),
        out=out,
        folder_name="scores",
        experiment="audit-scores",
        tracking_uri=tracking_uri,
        run_name=scores_file.name,
        tags={"source": str(scores_file)},
        metrics_of=metrics_of,
        policy=loaded_policy,
        progress=command_progress(quiet),
        what="scores: attack metrics, CIs and ε bounds",
    )
    console.print(results_summary_table(results))
    print_one_run_bounds(results)
    for note in results["notes"]:
        console.print(f"[yellow]note:[/yellow] {shown(note)}")
    console.print(f"results: {shown(final)}/results.json\nreport:  {shown(final)}/report.html")
    print_verdict(results, fail_on_inconclusive=fail_on_inconclusive)


# audit-model's data and model options (one line each in its signature).
_MembersOption = Annotated[Path | None, typer.Option("--members", help="CSV/Parquet/.npz of the model's training rows")]
_NonmembersOption = Annotated[Path | None, typer.Option("--nonmembers", help="CSV/Parquet/.npz of rows it never saw")]
_LabelOption = Annotated[
    str | None, typer.Option("--label", help="label column of CSV/Parquet files (integer classes)")
]
_ConfigOption = Annotated[
    Path | None,
    typer.Option("--config", help="YAML: model section (model, trainer, data), training, privacy, attacks"),
]
_ClaimOption = Annotated[str | None, typer.Option("--claimed-epsilon", help="the ε the model claims ('inf' = none)")]
_PopulationOption = Annotated[
    Path | None, typer.Option("--population", help="population rows for reference/shadow models")
]


@app.command("audit-model")
def audit_model(
    weights: Annotated[
        Path | None, typer.Option("--weights", help="torch state_dict (.pt, loaded weights_only) or .safetensors")
    ] = None,
    factory: Annotated[
        str | None,
        typer.Option(
            "--factory",
            help="module:function returning the nn.Module the weights fit (default: the MLP of training.hidden_sizes)",
        ),
    ] = None,
    skops: Annotated[
        Path | None,
        typer.Option("--skops", help="scikit-learn estimator saved with skops.io.dump (pickle/joblib refused)"),
    ] = None,
    onnx: Annotated[Path | None, typer.Option("--onnx", help="ONNX file (run with onnxruntime)")] = None,
    function: Annotated[
        str | None, typer.Option("--function", help="module:function, a black-box prediction function")
    ] = None,
    output: Annotated[
        str | None,
        typer.Option("--output", help="what the model returns: logits | probabilities | labels (label-only)"),
    ] = None,
    trainer: Annotated[
        str | None,
        typer.Option(
            "--trainer", help="module:function train(features, labels, seed) -> model, for reference/shadow models"
        ),
    ] = None,
    members: _MembersOption = None,
    nonmembers: _NonmembersOption = None,
    label: _LabelOption = None,
    config: _ConfigOption = None,
    claimed_epsilon: _ClaimOption = None,
    population: _PopulationOption = None,
    attacks: Annotated[
        str | None,
        typer.Option(
            "--attacks", help="comma-separated attack names, of: {attack_names} (a language model: {text_attack_names})"
        ),
    ] = None,
    executor: Annotated[
        str,
        typer.Option(
            "--executor",
            help="where --trainer trains reference/shadow models, each isolated "
            "from this process: local (one child process) | processes | ray (same numbers on each)",
        ),
    ] = "processes",
    workers: Annotated[
        int | None,
        typer.Option(
            "--workers",
            help="processes: parallel processes training reference models "
            "[default: the cores]; ray: CPUs of the local cluster started here",
        ),
    ] = None,
    ray_address: RayAddressOption = None,
    timeout: Annotated[float | None, typer.Option("--timeout", help="seconds one call of your code may take")] = None,
    device: Annotated[str, typer.Option(help="auto | cpu | cuda")] = "auto",
    policy: Annotated[Path | None, typer.Option("--policy", help="YAML policy; exit 1 when a rule fails")] = None,
    out: Annotated[Path, typer.Option("--out", help="folder that receives <timestamp>-<name>/")] = Path("runs"),
    tracking_uri: TrackingUriOption = None,
    quiet: QuietOption = False,
    hf_model: Annotated[
        Path | None,
        typer.Option(
            "--hf-model",
            help="a local Hugging Face causal-LM folder (safetensors, "
            "tokenizer.json; remote code and pickles refused); members / "
            "non-members are JSONL or Parquet texts",
        ),
    ] = None,
    lm_module: Annotated[
        str | None,
        typer.Option(
            "--lm-module",
            help="module:function returning a PyTorch module "
            "with logits(token_ids) -> (batch, length, vocab); needs --tokenizer",
        ),
    ] = None,
    tokenizer: Annotated[Path | None, typer.Option("--tokenizer", help="tokenizers JSON file for --lm-module")] = None,
    reference_model: Annotated[
        Path | None,
        typer.Option(
            "--reference-model",
            help="a Hugging Face causal-LM folder trained on disjoint data (enables reference_ratio)",
        ),
    ] = None,
    text_field: Annotated[
        str, typer.Option("--text-field", help="the text's field (JSONL) or column (Parquet)")
    ] = "text",
    max_length: Annotated[int, typer.Option("--max-length", help="tokens per text (longer ones are cut)")] = 512,
    batch_size: Annotated[int, typer.Option("--batch-size", help="texts per forward pass")] = 16,
    allow_leak: AllowLeakOption = False,
    fail_on_inconclusive: FailOnInconclusiveOption = False,
    fail_on_leak: LegacyFailOnLeakOption = None,
) -> None:
    """Audit your own trained model: a PyTorch module, a scikit-learn estimator (skops), an ONNX file, a
    prediction function (optionally label-only), or a causal language model (--hf-model / --lm-module),
    on member / non-member files."""
    fail_on_leak = leak_fails(allow_leak, fail_on_leak)
    if hf_model is not None or lm_module is not None:
        _audit_language_model(
            hf_model=hf_model,
            lm_module=lm_module,
            tokenizer=tokenizer,
            reference_model=reference_model,
            members=members,
            nonmembers=nonmembers,
            claimed_epsilon=claimed_epsilon,
            attacks=attacks,
            text_field=text_field,
            max_length=max_length,
            batch_size=batch_size,
            device=device,
            timeout=timeout,
            policy=policy,
            out=out,
            tracking_uri=tracking_uri,
            quiet=quiet,
            fail_on_leak=fail_on_leak,
            fail_on_inconclusive=fail_on_inconclusive,
            others={
                "--weights": weights,
                "--factory": factory,
                "--skops": skops,
                "--onnx": onnx,
                "--function": function,
                "--trainer": trainer,
                "--population": population,
                "--label": label,
                "--config": config,
                "--output": output,
            },
        )
        return
    from audit.machinery.config import parse_epsilon_list, resolve_config
    from audit.machinery.crash_log import set_log_folder
    from audit.machinery.executors import check_executor_options
    from audit.machinery.policy import load_policy
    from audit.machinery.run_directory import check_output_folder
    from audit.machinery.tracking import check_tracking_uri, target_metrics
    from audit.model_audits.model_audit import audit_user_model
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
        model_name = next(
            (
                str(getattr(resolved.model, k))
                for k in ("weights", "skops", "onnx", "function")
                if getattr(resolved.model, k)
            ),
            None,
        )
    model_name = Path(model_name).name if model_name else "model"
    if resolved.name == "default":  # the user audits their model, not the default preset: name the run after it
        resolved = resolve_config("default", config, {**overrides, "name": audit_name_for_model(model_name)})
    progress = command_progress(quiet)
    results, final = publish_results(
        lambda staging: with_fail_on_leak(
            audit_user_model(
                resolved,
                weights=weights,
                factory=factory,
                skops=skops,
                onnx=onnx,
                function=function,
                output=output,
                trainer=trainer,
                members=members,
                nonmembers=nonmembers,
                label=label,
                population=population,
                attack_names=names,
                device=device,
                workers=workers,
                executor=executor,
                ray_address=ray_address,
                scores_path=staging / "scores" / "scores.csv",
            ),
            fail_on_leak,
        ),
        out=out,
        folder_name=resolved.name,
        experiment="audit-model",
        tracking_uri=tracking_uri,
        run_name=f"audit-model {model_name}",
        tags={"model": model_name},
        metrics_of=lambda results: target_metrics(results["targets"][0]),
        policy=loaded_policy,
        progress=progress,
        what="model audit",
    )
    console.print(results_summary_table(results))
    print_one_run_bounds(results)
    for note in results["notes"]:
        console.print(f"[yellow]note:[/yellow] {shown(note)}", soft_wrap=True)
    console.print(f"results: {shown(final)}/results.json\nreport:  {shown(final)}/report.html")
    print_verdict(results, fail_on_inconclusive=fail_on_inconclusive)


def _audit_language_model(
    *,
    hf_model,
    lm_module,
    tokenizer,
    reference_model,
    members,
    nonmembers,
    claimed_epsilon,
    attacks,
    text_field,
    max_length,
    batch_size,
    device,
    timeout,
    policy,
    out,
    tracking_uri,
    quiet,
    others,
    fail_on_leak=True,
    fail_on_inconclusive=False,
) -> None:
    """`audit-model --hf-model DIR | --lm-module module:function`: the language-model audit."""
    import math

    from audit.errors import AuditInputError
    from audit.machinery.config import parse_epsilon_list
    from audit.machinery.crash_log import set_log_folder
    from audit.machinery.policy import load_policy
    from audit.machinery.run_directory import check_output_folder
    from audit.machinery.tracking import check_tracking_uri
    from audit.model_audits.language_model_audit import (
        LanguageModelInputs,
        audit_language_model,
        prepare_language_model_audit,
    )
    from reports.console import results_summary_table
    from reports.text_tables import text_console_tables

    set_log_folder(out)
    given = [flag for flag, value in others.items() if value is not None]
    if given:
        raise AuditInputError(given[0], "does not apply to a language model (--hf-model / --lm-module)")
    if members is None or nonmembers is None:
        raise AuditInputError("--members/--nonmembers", "a language-model audit needs both (JSONL or Parquet texts)")
    check_output_folder(out)
    check_tracking_uri(tracking_uri)
    claim = None
    if claimed_epsilon is not None:
        values = parse_epsilon_list(claimed_epsilon)
        if len(values) != 1 or values[0] <= 0:
            raise AuditInputError("--claimed-epsilon", "expected one ε > 0 (or inf)")
        claim = None if math.isinf(values[0]) else values[0]
    loaded_policy = load_policy(policy) if policy is not None else None
    names = [name.strip() for name in attacks.split(",") if name.strip()] if attacks else None
    model_name = Path(hf_model).name if hf_model is not None else lm_module
    # Counts, texts, the model folder and the memory it needs: checked before a run folder exists.
    inputs = LanguageModelInputs(
        members=members,
        nonmembers=nonmembers,
        hf_model=hf_model,
        lm_module=lm_module,
        tokenizer=tokenizer,
        reference_model=reference_model,
        text_field=text_field,
        max_length=max_length,
        batch_size=batch_size,
        device=device,
        attack_names=None if names is None else tuple(names),
    )
    prepared = prepare_language_model_audit(inputs)
    progress = command_progress(quiet)
    results, final = publish_results(
        lambda staging: with_fail_on_leak(
            audit_language_model(
                inputs,
                claimed_epsilon=claim,
                timeout=timeout or 600.0,
                progress=progress,
                scores_path=staging / "scores" / "scores.csv",
                prepared=prepared,
            ),
            fail_on_leak,
        ),
        out=out,
        folder_name="language-model",
        experiment="audit-model",
        tracking_uri=tracking_uri,
        run_name=f"audit-model {model_name}",
        tags={"model": str(model_name), "kind": "text"},
        metrics_of=lambda results: {f"{a['name']}_auc": a["auc"] for a in results["targets"][0]["attacks"]},
        policy=loaded_policy,
        progress=progress,
        what=None,
    )
    console.print(results_summary_table(results))
    for table in text_console_tables(results)[1:]:
        console.print(table)
    for note in results["notes"]:
        console.print(f"[yellow]note:[/yellow] {shown(note)}", soft_wrap=True)
    console.print(f"results: {shown(final)}/results.json\nreport:  {shown(final)}/report.html")
    print_verdict(results, fail_on_inconclusive=fail_on_inconclusive)


def audit_name_for_model(model_name: str) -> str:
    """A run name from the model's file or function name (`forest.skops` → `forest`, `api:predict` →
    `api-predict`), within the config's name pattern; `model` when nothing usable is left."""
    stem = model_name.rsplit(".", 1)[0] if "." in model_name and ":" not in model_name else model_name
    cleaned = re.sub(r"[^A-Za-z0-9_.-]+", "-", stem).strip("-._")[:64]
    return cleaned or "model"
