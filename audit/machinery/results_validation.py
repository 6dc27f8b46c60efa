"""Reading a results.json for `gate` and `report`: the published JSON Schema
(audit/schema/results.schema.json, shipped in the wheel) and the schema versions this version reads.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from audit.errors import AuditInputError
from audit.machinery.input_files import clip

# Shipped inside the package (package-data), so an installed wheel validates like a checkout.
RESULTS_SCHEMA_PATH = Path(__file__).resolve().parents[1] / "schema" / "results.schema.json"


RESULTS_SCHEMA_VERSION = 3


READABLE_SCHEMA_VERSIONS = (1, 2, 3)


def load_results(path: str | Path, *, follow: bool = True) -> dict[str, Any]:
    """Read a results.json and validate it against audit/schema/results.schema.json.

    AuditInputError names the file and the JSON path of the first problem (e.g. a missing
    `targets[0].attacks[0].auc`).
    """
    from audit.machinery.input_files import load_json_file

    path = Path(path)
    where = f"results file '{path}'"
    results = load_json_file(path, where, follow=follow)  # NaN/Infinity, duplicate keys, deep nesting, FIFOs refused
    validate_results(results, source=where)
    return results


def validate_results(results: Any, *, source: str = "results") -> None:
    """Raise AuditInputError when `results` does not follow results.json schema_version 1, 2 or 3.

    Version 2 (this version) adds the verdict status, each bound's assumption and scope and the PLD
    interval; version 1 files are still read (their verdict is recomputed from their numbers).
    """
    if not isinstance(results, dict):
        raise AuditInputError(source, "must be a JSON object (a results.json written by privacy-audit)")
    version = results.get("schema_version")
    if isinstance(version, bool) or version not in READABLE_SCHEMA_VERSIONS:
        raise AuditInputError(
            f"{source}: field 'schema_version'",
            f"expected 1, 2 or 3, got {version!r} (written by another privacy-audit version?)",
        )
    import jsonschema

    schema = json.loads(RESULTS_SCHEMA_PATH.read_text(encoding="utf-8"))
    validator = jsonschema.Draft202012Validator(schema)
    try:
        errors = sorted(
            validator.iter_errors(results), key=lambda e: (len(e.absolute_path), list(map(str, e.absolute_path)))
        )
    except RecursionError:
        raise AuditInputError(source, "is nested too deeply to be a results file") from None
    if errors:
        first = errors[0]
        location = clip(_json_path(first.absolute_path) or "(top level)", 80)
        extra = f" (and {len(errors) - 1} more problem(s))" if len(errors) > 1 else ""
        # jsonschema's message quotes the offending value whole: cut it (it can be megabytes).
        raise AuditInputError(f"{source}: field '{location}'", clip(first.message) + extra)
    _check_rows_agree(results, schema, source)


def _check_rows_agree(results: dict[str, Any], schema: dict[str, Any], source: str) -> None:
    """What a schema cannot say: the parts of a target's one-run and conformance rows that the
    verdict reads must agree with the figures beside them (a flag is never trusted over its figures).

    - a one-run row holds only the fields its schema names; n_in ≤ m; its Steinke et al. bound is at
      most the ceiling (the bound a perfect attack reaches with the same m, δ and α);
    - a conformance row's `rules_failed` is exactly its failed exact checks, and its
      `statistical_p_values` exactly its statistical checks' p-values (the verdict reads both lists).
    """
    known = set(schema.get("$defs", {}).get("one_run_row", {}).get("properties", {}))
    for i, target in enumerate(results.get("targets") or []):
        if not isinstance(target, dict):
            continue
        row = target.get("whitebox_one_run")
        if isinstance(row, dict):
            where = f"{source}: field 'targets[{i}].whitebox_one_run"
            unknown = sorted(set(row) - known) if known else []
            if unknown:
                raise AuditInputError(f"{where}.{clip(unknown[0], 40)}'", "is not a field of a one-run row (edited?)")
            if isinstance(row.get("n_in"), int) and isinstance(row.get("m"), int) and row["n_in"] > row["m"]:
                raise AuditInputError(f"{where}.n_in'", f"{row['n_in']} canaries in the run, of only {row['m']}")
            ceiling, bound = row.get("ceiling"), row.get("steinke_epsilon")
            if isinstance(ceiling, (int, float)) and ceiling < 0:
                raise AuditInputError(f"{where}.ceiling'", f"{ceiling!r} is negative")
            if isinstance(bound, (int, float)) and bound < 0:
                raise AuditInputError(f"{where}.steinke_epsilon'", f"{bound!r} is negative")
            if isinstance(ceiling, (int, float)) and isinstance(bound, (int, float)) and bound > ceiling + 1e-9:
                raise AuditInputError(
                    f"{where}.steinke_epsilon'",
                    f"{bound:.4g} is above the ceiling {ceiling:.4g} a perfect attack reaches: the row was edited",
                )
        conformance = target.get("conformance")
        if isinstance(conformance, dict) and isinstance(conformance.get("checks"), list):
            where = f"{source}: field 'targets[{i}].conformance"
            checks = [c for c in conformance["checks"] if isinstance(c, dict)]
            failed = sorted(str(c.get("check")) for c in checks if c.get("p_value") is None and not c.get("passed"))
            if failed != sorted(map(str, conformance.get("rules_failed") or [])):
                raise AuditInputError(
                    f"{where}.rules_failed'", f"does not list the failed exact checks {clip(str(failed), 120)}"
                )
            p_values = {str(c.get("check")): c["p_value"] for c in checks if c.get("p_value") is not None}
            if p_values != (conformance.get("statistical_p_values") or {}):
                raise AuditInputError(
                    f"{where}.statistical_p_values'", "are not the p-values of its statistical checks (edited?)"
                )


def _json_path(parts) -> str:
    out = ""
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else (("." if out else "") + str(part))
    return out
