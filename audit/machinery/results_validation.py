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


def _json_path(parts) -> str:
    out = ""
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else (("." if out else "") + str(part))
    return out
