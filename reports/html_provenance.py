"""The HTML report's closing sections: how to reproduce the run (config hash, the results file's digest,
versions, seed) and the sign-off block a reviewer fills in.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import yaml

from reports.html_format import _eps, _text
from reports.results_access import get as _get


def _config_hash(results: dict[str, Any]) -> str | None:
    for stored in (results.get("config_hash"), _get(results, "environment", "config_hash")):
        if isinstance(stored, str):
            return stored
    config = results.get("config")
    if not isinstance(config, dict):
        return None
    # Same canonical form as audit.machinery.config.AuditConfig.config_hash (results["config"] is its to_plain()).
    canonical = json.dumps(config, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:12]


def _results_file_digest(results: dict[str, Any], run_dir: Path | None) -> str | None:
    """SHA-256 of run_dir/results.json when that file holds exactly these results (ties a signature to it)."""
    if run_dir is None:
        return None
    from audit.errors import AuditInputError
    from audit.machinery.safe_files import read_run_file

    path = run_dir / "results.json"
    try:
        raw = read_run_file(run_dir, path)  # never a FIFO, a link or a device
        if json.loads(raw) != results:
            return None
    except (AuditInputError, ValueError):
        return None
    return hashlib.sha256(raw).hexdigest()


def _reproducibility(results: dict[str, Any], run_dir: Path | None, results_json: bytes | None = None) -> str:
    env = results.get("environment") or {}
    mlflow = results.get("mlflow") or {}
    rows: list[tuple[str, str]] = []
    config_hash = _config_hash(results)
    if config_hash:
        rows.append(
            (
                "Config hash",
                f"<code>{_text(config_hash)}</code> <small>(sha256 of the resolved config, "
                "as tagged on the MLflow parent run)</small>",
            )
        )
    digest = (
        hashlib.sha256(results_json).hexdigest() if results_json is not None else _results_file_digest(results, run_dir)
    )
    if digest:
        rows.append(("results.json SHA-256", f"<code>{digest}</code>"))
    rows.append(
        (
            "Git commit",
            f"<code>{_text(env.get('git_sha'))}</code>"
            if env.get("git_sha")
            else "unknown (not run from a git checkout)",
        )
    )
    seeds = [f"config seed {_text(_get(results, 'config', 'seed'))}"]
    for target in results.get("targets") or []:
        if target.get("seed") is not None:
            seeds.append(f"ε = {_eps(target.get('epsilon_target'))}: {_text(target['seed'])}")
    rows.append(("Seeds", "; ".join(seeds)))
    device = _text(env.get("device") or "—")
    if env.get("cuda_device_name"):
        device += f" ({_text(env['cuda_device_name'])})"
    if env.get("torch_threads") is not None:
        device += f", {_text(env['torch_threads'])} torch threads"
    rows.append(("Device", device))
    rows.append(("Python / platform", f"{_text(env.get('python') or '—')} on {_text(env.get('platform') or '—')}"))
    packages = env.get("packages") or {}
    if packages:
        rows.append(
            (
                "Packages",
                ", ".join(f"{_text(k)} {_text(v if v is not None else 'not installed')}" for k, v in packages.items()),
            )
        )
    if mlflow:
        rows.append(("MLflow tracking URI", f"<code>{_text(mlflow.get('tracking_uri'))}</code>"))
        rows.append(
            (
                "MLflow experiment / parent run",
                f"<code>{_text(mlflow.get('experiment_id'))}</code> / "
                f"<code>{_text(mlflow.get('parent_run_id'))}</code>",
            )
        )
        child_rows = []
        targets = results.get("targets") or []
        ids = list(mlflow.get("child_run_ids") or [])
        for index, run_id in enumerate(ids):
            target = targets[index] if index < len(targets) and targets[index].get("mlflow_run_id") == run_id else None
            label = f"ε = {_eps(target.get('epsilon_target'))}: " if target else ""
            child_rows.append(f"{label}<code>{_text(run_id)}</code>")
        if child_rows:
            rows.append(("MLflow child runs", "<br>".join(child_rows)))
    body = "".join(f"<dt>{k}</dt><dd>{v}</dd>" for k, v in rows)
    config_yaml = ""
    if isinstance(results.get("config"), dict):
        config_yaml = (
            "<h3>Resolved configuration</h3>"
            "<pre>"
            + _text(yaml.safe_dump(results["config"], sort_keys=False, allow_unicode=True, default_flow_style=None))
            + "</pre>"
        )
    return f'<section id="reproducibility"><h2>Reproducibility</h2><dl class="facts">{body}</dl>{config_yaml}</section>'


def _signoff() -> str:
    return (
        '<section id="signoff"><h2>Review and sign-off</h2>'
        '<p class="note">The figures and numbers above were produced automatically by privacy-audit. The reviewer '
        "confirms that the audited configuration is the one to be released and that the verdict was read together "
        "with the method notes.</p>"
        '<div class="signoff"><div><span>Reviewer name and role</span></div><div><span>Date</span></div>'
        "<div><span>Signature</span></div><div><span>Decision (release / do not release) and remarks</span></div></div>"
        "</section>"
        "<footer>Generated by privacy-audit. Self-contained page: figures are embedded; nothing is loaded from "
        "the network.</footer>"
    )
