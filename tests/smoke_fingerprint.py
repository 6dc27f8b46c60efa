"""The smoke run's numbers as a fingerprint, for the golden comparison in tests/test_end_to_end.py (issue #37:
a refactor must leave `privacy-audit run --preset smoke` giving the same numbers, bit for bit).

The fingerprint is every numeric leaf of results.json (ints and floats; booleans are not numbers here) by
its path ("targets/0/epsilon/prv"), except timings (a key naming seconds, time, elapsed or duration) and the
`environment` and `execution` sections (thread and worker counts follow the machine).

Two runs of the unmodified code (commit 9f7f2f4) on one machine gave identical fingerprints on all 1630
leaves they share, so the whole fingerprint is compared exactly.

Regenerate tests/data/smoke_numbers_golden.json (only when a change is MEANT to move the smoke run's
numbers; say so in the commit), with the command tests/test_end_to_end.py's `smoke_run` fixture runs:

    cd /tmp/golden && privacy-audit run --preset smoke --tracking-uri sqlite:////tmp/golden/mlflow.db \\
        --policy <repo>/examples/policy-lenient.yaml
    .venv/bin/python tests/smoke_fingerprint.py /tmp/golden/runs/*/results.json \\
        > tests/data/smoke_numbers_golden.json
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

GOLDEN = Path(__file__).parent / "data" / "smoke_numbers_golden.json"

# Sections that describe the machine, not the audit.
_SKIPPED_SECTIONS = {"environment", "execution"}
# Timings: a key that names seconds or a time.
_TIMING_KEY = re.compile(r"(seconds|time|elapsed|duration)", re.IGNORECASE)


def fingerprint(results: dict[str, Any]) -> dict[str, int | float]:
    """Every numeric leaf of a results dict by its path, timings and the machine's sections left out."""
    out: dict[str, int | float] = {}

    def walk(node: Any, path: str) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                if not path and key in _SKIPPED_SECTIONS:
                    continue
                if _TIMING_KEY.search(str(key)):
                    continue
                walk(value, f"{path}/{key}" if path else str(key))
        elif isinstance(node, list):
            for index, value in enumerate(node):
                walk(value, f"{path}/{index}")
        elif isinstance(node, (int, float)) and not isinstance(node, bool):
            out[path] = node

    walk(results, "")
    return out


def differences(golden: dict[str, Any], got: dict[str, Any]) -> dict[str, Any]:
    """What differs between two fingerprints (empty when they are identical)."""
    missing = sorted(set(golden) - set(got))
    extra = sorted(set(got) - set(golden))
    changed = {key: (golden[key], got[key]) for key in sorted(golden.keys() & got.keys()) if golden[key] != got[key]}
    found = {"missing": missing[:20], "extra": extra[:20], "changed": dict(list(changed.items())[:20])}
    return {key: value for key, value in found.items() if value}


if __name__ == "__main__":
    json.dump(fingerprint(json.loads(Path(sys.argv[1]).read_text())), sys.stdout, indent=1, sort_keys=True)
    sys.stdout.write("\n")
