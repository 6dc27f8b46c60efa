"""Federated targets in tables: one row per (target ε, client) with ε per level and the per-client
attacks, and one row per (target ε, level) with the best attack of each level — and, for a
client-level target, its "canary clients (one-run)" row (a twin federation with canary clients,
audit/federated/canary_rows.py) beside the membership rows, with each row's claim status from the
verdict. Used by the console, the HTML report and the README's tables
(`python -m reports.federated_tables RESULTS`)."""

from __future__ import annotations

import html
import math
import sys
from typing import Any


def _fmt(value: Any, digits: int = 3) -> str:
    if value is None:
        return "—"
    if isinstance(value, float) and math.isinf(value):
        return "∞"
    return f"{value:.{digits}f}" if isinstance(value, (int, float)) else str(value)


def _eps_target(target: dict[str, Any]) -> str:
    return "∞" if target["epsilon_target"] is None else f"{target['epsilon_target']:g}"


def _auc(attack: dict[str, Any] | None) -> str:
    if attack is None:
        return "—"
    lo, hi = attack["auc_ci"]
    return f"{attack['auc']:.3f} ({lo:.2f}–{hi:.2f})"


def _best_lb(attack: dict[str, Any] | None) -> float | None:
    """The proven bound (one-run, coin-flip membership); Clopper-Pearson over one model's candidates
    assumes independent trials and is shown in its own column only."""
    if attack is None:
        return None
    return attack["epsilon_lb"].get("one_run")


def federated_targets(results: dict[str, Any]) -> list[dict[str, Any]]:
    return [t for t in results.get("targets", []) if t.get("kind") == "federated"]


CLIENT_HEADERS = (
    "ε target",
    "level",
    "client",
    "n train",
    "local steps",
    "record ε (acct / PLD)",
    "client ε (PLD)",
    "test acc",
    "loss AUC (CI)",
    "LiRA-offline AUC (CI)",
    "server-update AUC (CI)",
    "best ε LB",
    "1-run ceiling",
)


def client_rows(results: dict[str, Any]) -> list[tuple[str, ...]]:
    rows: list[tuple[str, ...]] = []
    for target in federated_targets(results):
        fed = target["federated"]
        attacks = {a["name"]: a for a in target["attacks"]}
        accountant = target.get("accountant") or "prv"
        client_eps = (fed.get("client_level") or {}).get("epsilon", {})
        for client in fed["clients"]:
            k = client["client"]
            own = [attacks.get(f"{name}/client_{k}") for name in ("loss", "lira_offline", "server_update")]
            eps = client["epsilon"]
            record = f"{_fmt(eps.get(accountant), 2)} / {_fmt(eps.get('pld'), 2)}" if eps else "—"
            lbs = [b for b in (_best_lb(a) for a in own if a is not None) if b is not None]
            ceilings = [a.get("ceiling_one_run") for a in own if a is not None and a.get("ceiling_one_run") is not None]
            rows.append(
                (
                    _eps_target(target),
                    fed["level"],
                    str(k),
                    str(client["n_train"]),
                    str(client["local_steps"]),
                    record,
                    _fmt(client_eps.get("pld"), 2) if client_eps else "—",
                    _fmt(client.get("test_accuracy")),
                    _auc(own[0]),
                    _auc(own[1]),
                    _auc(own[2]),
                    _fmt(max(lbs) if lbs else None, 2),
                    _fmt(max(ceilings) if ceilings else None, 2),
                )
            )
    return rows


LEVEL_HEADERS = (
    "ε target",
    "level",
    "claimed ε (acct)",
    "attack",
    "AUC (CI)",
    "ε LB (CP)",
    "ε LB (1-run)",
    "1-run ceiling",
    "candidates",
    "claim",
)

_STATUS = {"fail": "refuted", "pass": "held", "inconclusive": "untestable"}


def row_status(results: dict[str, Any], index: int, row_name: str) -> str:
    """The verdict's word for one row of target `index` (its deciding check: held / not refuted / refuted /
    untestable;
    "shown" when the row decides nothing, e.g. the server, which client-level DP trusts)."""
    checks = (results.get("verdict") or {}).get("checks") or []
    subject = f"targets[{index}]"
    mine = [
        c
        for c in checks
        if isinstance(c, dict)
        and c.get("subject") == subject
        and (
            f" · {row_name} (" in str(c.get("name"))
            or str(c.get("name")).endswith(f" · {row_name}")
            or f" · {row_name} · one_run" in str(c.get("name"))
        )
        and c.get("outcome") in _STATUS
    ]
    outcomes = [c.get("outcome") for c in mine]
    for outcome in ("fail", "pass", "inconclusive"):
        if outcome in outcomes:
            # a passing row whose mode has no power against the claim does not hold it (docs/verdict.md)
            if outcome == "pass" and all(
                isinstance(c.get("power"), dict) and c["power"].get("kind") == "none"
                for c in mine
                if c.get("outcome") == "pass"
            ):
                return "not refuted"
            return _STATUS[outcome]
    return (
        "shown"
        if any(
            isinstance(c, dict) and c.get("subject") == subject and f" · {row_name}" in str(c.get("name"))
            for c in checks
        )
        else "—"
    )


def _canary_ceiling(results: dict[str, Any], index: int, row: dict[str, Any]) -> float | None:
    """The canary row's ceiling at its Holm level (the verdict's check), else the row's own (at α)."""
    for check in (results.get("verdict") or {}).get("checks") or []:
        if (
            isinstance(check, dict)
            and check.get("subject") == f"targets[{index}]"
            and str(check.get("name")).endswith(f" · {row.get('family')}")
            and check.get("ceiling") is not None
        ):
            return check["ceiling"]
    return row.get("ceiling")


def level_rows(results: dict[str, Any]) -> list[tuple[str, ...]]:
    """Per target, the pooled attack of each level: record (loss/all, lira_offline/all), server, client;
    then the target's canary-client row (client level; its ε LB is Steinke et al.'s, candidates its canaries)."""
    rows: list[tuple[str, ...]] = []
    targets = results.get("targets", [])
    for target in federated_targets(results):
        index = next(i for i, t in enumerate(targets) if t is target)
        for attack in target["attacks"]:
            name = attack["name"]
            if not (name.endswith("/all") or name.startswith("server_update") or name == "client_mia"):
                continue
            claim = attack.get("claim", {})
            level = "client" if name == "client_mia" else "server (update)" if name.startswith("server") else "record"
            rows.append(
                (
                    _eps_target(target),
                    level,
                    _fmt(claim.get("epsilon"), 2),
                    name,
                    _auc(attack),
                    _fmt(attack["epsilon_lb"]["clopper_pearson"], 2),
                    _fmt(attack["epsilon_lb"]["one_run"], 2),
                    _fmt(attack.get("ceiling_one_run"), 2),
                    str(attack["n_members"] + attack["n_nonmembers"]),
                    row_status(results, index, name),
                )
            )
        canary = target.get("whitebox_one_run")
        if isinstance(canary, dict):  # row family "canary clients (one-run)": the twin federation's canaries
            rows.append(
                (
                    _eps_target(target),
                    str(canary.get("level") or "client"),
                    _fmt(canary.get("claim"), 2),
                    str(canary.get("family") or "canary clients (one-run)"),
                    "—",
                    "—",
                    _fmt(canary.get("steinke_epsilon"), 2),
                    _fmt(_canary_ceiling(results, index, canary), 2),
                    f"{canary.get('m')} canaries",
                    row_status(results, index, str(canary.get("family"))),
                )
            )
    return rows


def federated_console_tables(results: dict[str, Any]) -> list:
    """Rich tables (per client, per level), or [] when the run has no federated target."""
    if not federated_targets(results):
        return []
    from rich.table import Table

    tables = []
    for title, headers, rows in (
        ("federated: per client", CLIENT_HEADERS, client_rows(results)),
        ("federated: per level", LEVEL_HEADERS, level_rows(results)),
    ):
        table = Table(title=title)
        for header in headers:
            table.add_column(header, justify="right")
        for row in rows:
            table.add_row(*row)
        tables.append(table)
    return tables


def markdown_table(headers: tuple[str, ...], rows: list[tuple[str, ...]]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def federated_html_section(results: dict[str, Any]) -> str:
    if not federated_targets(results):
        return ""

    def table(headers, rows) -> str:
        head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
        body = "".join(
            "<tr>" + "".join(f'<td class="num">{html.escape(c)}</td>' for c in row) + "</tr>" for row in rows
        )
        return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"

    return (
        "<section><h2>Federated targets</h2>"
        "<p>Record level: each client's ε from its own local DP-SGD steps over the rounds it joined "
        "(Poisson sampling; the selected Opacus accountant and the PLD accountant). Client level: the "
        "Poisson-subsampled Gaussian mechanism of DP-FedAvg over the rounds. Candidates are members by fair "
        "coin flips, so the one-run bound applies; the ceiling is the largest bound a perfect attack could "
        "reach with that many candidates — a claim at or above it cannot be refuted by this audit.</p>"
        "<h3>Per client</h3>"
        + table(CLIENT_HEADERS, client_rows(results))
        + "<h3>Per level</h3>"
        + table(LEVEL_HEADERS, level_rows(results))
        + "</section>"
    )


def main(argv: list[str]) -> None:
    """Print the two tables of a results.json as Markdown (the README's federated tables)."""
    import json

    with open(argv[0], encoding="utf-8") as handle:
        results = json.loads(handle.read())
    print(markdown_table(CLIENT_HEADERS, client_rows(results)))
    print()
    print(markdown_table(LEVEL_HEADERS, level_rows(results)))


if __name__ == "__main__":
    main(sys.argv[1:])
