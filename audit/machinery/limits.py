"""One range table for every count a command takes, checked before any work starts.

A count out of range used to be found late — a `MemoryError` after minutes (exit 3), a billion
worker processes requested, a federated run of 10⁹ rounds that passed `--dry-run`. Every count
option and count field is listed here with its range and the reason for it; the commands call
`check_count` (and `check_workers`, `check_memory`) before a worker starts or a file is written.
docs/errors.md shows this table (tests/test_hostile_limits.py keeps the two equal).

The memory a command will need is estimated from its counts (`check_memory`) and refused when it
exceeds what this machine has available: a refusal in a second beats an out-of-memory kill later.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from audit.errors import AuditInputError

__all__ = [
    "COUNT_LIMITS",
    "LEDGER_RANGES",
    "check_range",
    "Limit",
    "available_memory",
    "check_count",
    "check_memory",
    "check_workers",
    "max_workers",
    "limits_table_markdown",
    "attack_knob_rows_markdown",
    "model_folder_limits_markdown",
]


@dataclass(frozen=True)
class Limit:
    low: int
    high: int
    commands: str
    why: str


# The one table: option or field → range. Lower ends are what the statistics need; upper ends are
# where the work or memory stops being plausible on any machine this tool runs on.
_FIXED_LIMITS: dict[str, Limit] = {
    "--rows": Limit(20, 1_000_000, "canary-audit", "rows of the generated audit table; each run trains on all of them"),
    "--models": Limit(2, 10_000_000, "canary-audit", "training runs (or models per side); the profile test needs ≥ 4"),
    "--canaries": Limit(1, 100_000, "canary-audit", "canaries per run (multi-canary) or in the one run (one-run)"),
    "--looks": Limit(
        1,
        20,
        "canary-audit, mechanism-audit, whitebox-audit",
        "looks at the evidence of a sequential audit (1 = fixed size)",
    ),
    "--runs": Limit(9, 10_000_000, "whitebox-audit", "training runs per side"),
    "whitebox-audit --canaries": Limit(19, 1_000_000, "whitebox-audit --one-run", "canaries of the one-run audit"),
    "ledger --steps": Limit(1, 100_000_000, "ledger record", "DP-SGD steps T of a recorded release"),
    "ledger --count": Limit(1, 10_000_000, "ledger record", "how many times a recorded mechanism ran"),
    "--trials": Limit(4, 100_000_000, "mechanism-audit", "mechanism draws per dataset"),
    "--steps": Limit(1, 10_000_000, "accountants, whitebox-audit --builtin (≤ 100,000)", "DP-SGD steps"),
    "--workers": Limit(
        1,
        0,
        "run, canary-audit, whitebox-audit, audit-model",
        "worker processes; at most 4 × the cores this process may use (max_workers), and 1 with --executor local",
    ),
    # audit-model on a language model (--hf-model / --lm-module)
    "--max-length": Limit(2, 1_000_000, "audit-model (language model)", "tokens per text (longer ones are cut)"),
    "--batch-size": Limit(
        1,
        65_536,
        "audit-model (language model)",
        "texts per forward pass; the logits are batch × length × vocabulary floats",
    ),
    "texts per file": Limit(
        2,
        1_000_000,
        "audit-model (language model) --members/--nonmembers",
        "JSONL lines or Parquet rows of one texts file",
    ),
    # bench (the vectorized-trainer benchmark and the executor benchmark)
    "bench --models": Limit(1, 4_096, "bench", "models trained at once by the vectorized trainer"),
    "bench --epochs": Limit(1, 1_000, "bench", "epochs per benchmarked model"),
    "bench --runs": Limit(1, 100_000, "bench --executor", "trainer runs timed per worker count"),
    "bench --rows": Limit(20, 1_000_000, "bench --executor", "rows each benchmarked run trains on"),
    "bench --slots-per-gpu": Limit(1, 64, "bench --executor", "tasks sharing one GPU in the projection"),
    "bench --gpus": Limit(1, 1_000_000, "bench --executor", "GPU counts of the projection (arithmetic only)"),
    # run: config fields (the config's own validation reads these numbers: tests keep them equal)
    "data.n_rows": Limit(100, 10_000_000, "run", "rows generated when data.source = synthetic"),
    "training.hidden_sizes": Limit(1, 65_536, "run", "width of each hidden layer (1–16 layers)"),
    "training.epochs": Limit(1, 10_000, "run", "training epochs of every model"),
    "training.batch_size": Limit(
        1, 1_000_000, "run", "expected batch size; Opacus holds batch × parameters per-sample gradients"
    ),
    "privacy.one_run_canaries": Limit(100, 1_000_000, "run", "canaries of the white-box one-run audit"),
    # attacks.*: each attack's integer knobs, declared by the attack class (attacks/registry.py), go here
    "synthetic.dp_vae_epochs": Limit(1, 10_000, "run (synthetic)", "epochs of the DP-VAE generator"),
    "federated.partition_feature": Limit(0, 100_000, "run (federated)", "feature column whose ranges define the sites"),
    "federated.n_clients": Limit(1, 1_000, "run (federated)", "clients; every client must hold ≥ 8 rows of the split"),
    "federated.rounds": Limit(1, 10_000, "run (federated)", "FedAvg rounds"),
    "federated.n_reference_federations": Limit(0, 256, "run (federated)", "LiRA reference federations"),
    "federated.client_mia_runs": Limit(0, 10_000, "run (federated)", "federations of the client-level MIA"),
    # run --preset text: the language-model job's config (audit/machinery/config.py TextConfig)
    "text.n_candidates": Limit(20, 1_000_000, "run (text)", "candidate records, each a member by a fair coin"),
    "text.n_pool": Limit(20, 1_000_000, "run (text)", "population records (tokenizer and reference model)"),
    "text.n_test": Limit(10, 1_000_000, "run (text)", "held-out records (perplexity)"),
    "text.repetitions": Limit(1, 10_000, "run (text)", "insertions of each canary group (1–16 distinct values)"),
    "text.canaries_per_repetition": Limit(1, 100, "run (text)", "canaries per repetition count"),
    "text.control_canaries": Limit(1, 1_000, "run (text)", "canaries never inserted"),
    "text.secret_digits": Limit(1, 12, "run (text)", "the secret space is 10^digits"),
    "text.exact_exposure_limit": Limit(
        10, 100_000_000, "run (text)", "secret spaces enumerated exactly up to this size"
    ),
    "text.exposure_samples": Limit(20, 10_000_000, "run (text)", "sampled secrets of the exposure estimate"),
    "text.vocab_size": Limit(50, 100_000, "run (text)", "tokenizer vocabulary; the logits are batch × length × vocab"),
    "text.d_model": Limit(8, 4_096, "run (text)", "transformer width"),
    "text.n_layers": Limit(1, 48, "run (text)", "transformer blocks"),
    "text.n_heads": Limit(1, 64, "run (text)", "attention heads (must divide d_model)"),
    "text.max_length": Limit(16, 4_096, "run (text)", "tokens per document"),
    "text.epochs": Limit(1, 10_000, "run (text)", "training epochs"),
    "text.batch_size": Limit(1, 1_000_000, "run (text)", "expected batch size"),
    "text.beams": Limit(1, 64, "run (text)", "beam width of the extraction"),
    "text.extraction_records": Limit(0, 1_000_000, "run (text)", "candidate records prompted for their fields"),
}
_ATTACKS_AFTER = "privacy.one_run_canaries"  # where the attacks' rows sit in the table


def _attack_limits() -> dict[str, Limit]:
    """The integer knobs of the registered attacks (attacks/registry.py), as rows of the table."""
    from attacks.registry import all_knobs

    return {
        f"attacks.{k.name}": Limit(int(k.low), int(k.high), "run, audit-model", k.why)
        for k in all_knobs()
        if k.kind is int and not k.choices and k.low is not None and k.high is not None
    }


class _RangeTable(Mapping):
    """The fixed rows plus the attacks' integer knobs, read from the attack registry on every use (so an
    attack registered by a plug-in is checked and documented like a built-in one)."""

    def _rows(self) -> dict[str, Limit]:
        rows: dict[str, Limit] = {}
        for option, limit in _FIXED_LIMITS.items():
            rows[option] = limit
            if option == _ATTACKS_AFTER:
                rows.update(_attack_limits())
        return rows

    def __getitem__(self, option: str) -> Limit:
        if option in _FIXED_LIMITS:
            return _FIXED_LIMITS[option]
        if option.startswith("attacks."):
            return _attack_limits()[option]
        raise KeyError(option)

    def __iter__(self) -> Iterator[str]:
        return iter(self._rows())

    def __len__(self) -> int:
        return len(self._rows())


# The one table: option or field → range (a Mapping; iterate it for the docs' order).
COUNT_LIMITS: Mapping[str, Limit] = _RangeTable()


def attack_knob_rows_markdown() -> list[str]:
    """Rows of docs/errors.md for the attacks' non-integer knobs with a range (the integer ones are counts)."""
    from attacks.registry import all_knobs

    return [
        f"| `attacks.{k.name}` | {k.range_text()} | run, audit-model | {k.why} |"
        for k in all_knobs()
        if k.kind is float and k.low is not None
    ]


# Federated numbers that are not counts but crash late when absurd.
FEDERATED_RANGES = {
    "federated.server_lr": (1e-6, 10.0, "larger server steps diverge to NaN scores"),
    "federated.client_sample_rate": (1e-4, 1.0, "below 1e-4 no client takes part in any plausible number of rounds"),
    "federated.dirichlet_alpha": (1e-3, 1e3, "below 1e-3 the split leaves clients empty; above 1e3 it is uniform"),
    "federated.client_clip": (1e-6, 1e6, "the client update's clipping norm"),
}
MIN_CLIENT_ROWS = 8
# The ledger's numbers that are not counts (`ledger record`, `set-budget`, and every mechanism a
# results file or a ledger row holds): (low, high, low included?, high included?, why). Inside these
# every composition finishes in seconds — a composed ε beyond what a PLD grid holds is bounded by
# RDP instead (audit/ledger/composition.py) — and outside them the figure is meaningless anyway.
LEDGER_RANGES: dict[str, tuple[float, float, bool, bool, str]] = {
    "ledger --noise-multiplier": (1e-3, 1e6, True, True, "DP-SGD σ; at σ = 10⁻³ one step alone spends ε ≈ 5·10⁵"),
    "ledger --sample-rate": (1e-9, 1.0, True, True, "DP-SGD Poisson sampling rate q"),
    "ledger --gaussian-scale": (1e-9, 1e12, True, True, "noise standard deviation; scale / sensitivity ≥ 10⁻³"),
    "ledger --laplace-scale": (1e-9, 1e12, True, True, "noise scale b; scale / sensitivity ≥ 10⁻³"),
    "ledger --sensitivity": (1e-9, 1e12, True, True, "the query's L2 (Gaussian) or L1 (Laplace) sensitivity"),
    "ledger --zcdp-rho": (1e-12, 1e4, True, True, "a ρ-zCDP release's ρ"),
    "ledger --epsilon": (0.0, 1e3, True, True, "an (ε, δ) pair's ε"),
    "ledger --delta": (0.0, 1.0, True, False, "an (ε, δ) pair's δ (0: pure ε-DP)"),
    "ledger set-budget --max-epsilon": (0.0, 1e4, False, True, "a dataset's max_total_epsilon"),
    "ledger set-budget --delta": (0.0, 1.0, True, False, "the δ at which a dataset's ε is composed"),
}
MIN_NOISE_TO_SENSITIVITY = 1e-3  # a Gaussian / Laplace mechanism's scale / sensitivity


def check_range(option: str, value, *, where: str | None = None) -> float:
    """`value` as a finite float in LEDGER_RANGES[option]; exit 2 naming `where` (default: the flag) otherwise."""
    import math

    low, high, low_in, high_in, why = LEDGER_RANGES[option]
    where = where or option.split()[-1]
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise AuditInputError(where, f"expected a number, got {str(value)[:40]!r}")
    number = float(value)
    interval = f"{'[' if low_in else '('}{low:g}, {high:g}{']' if high_in else ')'}"
    if not math.isfinite(number):
        raise AuditInputError(where, f"must be a finite number in {interval}, got {number}")
    if (number < low if low_in else number <= low) or (number > high if high_in else number >= high):
        raise AuditInputError(where, f"must be in {interval}, got {number:g} ({why})")
    return number


def max_workers() -> int:
    """The most worker processes a command may start: 4 per core this process may use."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cores = os.cpu_count() or 1
    return 4 * max(1, cores)


def _high(option: str) -> int:
    return max_workers() if option == "--workers" else COUNT_LIMITS[option].high


def check_count(
    option: str,
    value,
    low: int | None = None,
    high: int | None = None,
    *,
    where: str | None = None,
    local_cap: bool = True,
) -> int:
    """`value` as an int in the table's range for `option` (narrowed by `low`/`high`); exit 2 otherwise.

    `where` names the input in the error when it is not the command-line flag (a Python API's parameter).
    `local_cap=False` (only `--workers` of a joined Ray cluster): `high` replaces this machine's cap.
    """
    limit = COUNT_LIMITS[option]
    where = where or option
    lo = limit.low if low is None else low
    hi = _high(option) if high is None else (high if not local_cap else min(high, _high(option)))
    if isinstance(value, bool) or not isinstance(value, int):
        try:
            import numpy as np

            if isinstance(value, np.integer):
                value = int(value)
            else:
                raise TypeError
        except TypeError:
            raise AuditInputError(where, f"expected an integer in [{lo:,}, {hi:,}], got {str(value)[:40]!r}") from None
    if not lo <= value <= hi:
        why = (
            f" ({limit.why})"
            if option != "--workers"
            else (" (4 × the cores this process may use)" if local_cap else " (a Ray cluster's sanity bound)")
        )
        raise AuditInputError(where, f"must be in [{lo:,}, {hi:,}], got {value:,}{why}"[:300])
    return value


def check_workers(workers, executor: str = "processes") -> int | None:
    """`--workers` within what the executor can run: None (the default), or 1..max_workers()."""
    if workers is None:
        return None
    workers = check_count("--workers", workers)
    if executor == "local" and workers != 1:
        raise AuditInputError("--workers", "applies to --executor processes or ray (local runs one task at a time)")
    return workers


def available_memory() -> int:
    """Bytes this machine can give a command now (MemAvailable; the physical memory elsewhere)."""
    try:
        with open("/proc/meminfo", encoding="ascii") as handle:
            for line in handle:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 2**62


def check_memory(needed_bytes: float, where: str, what: str) -> None:
    """Refuse (exit 2) a command whose counts imply more memory than the machine has available."""
    have = available_memory()
    if needed_bytes > have:
        raise AuditInputError(
            where,
            f"{what} needs about {_size(needed_bytes)} of memory; this machine has "
            f"{_size(have)} available: use smaller counts",
        )


def _size(n: float) -> str:
    for unit, scale in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20)):
        if n >= scale:
            return f"{n / scale:,.1f} {unit}"
    return f"{n / 1024:,.1f} KiB"


def limits_table_markdown() -> list[str]:
    """The rows of docs/errors.md's range table, generated from `COUNT_LIMITS`."""
    rows = []
    for option, limit in COUNT_LIMITS.items():
        shown_high = "4 × cores" if option == "--workers" else f"{limit.high:,}"
        rows.append(f"| `{option}` | [{limit.low:,}, {shown_high}] | {limit.commands} | {limit.why} |")
        if option == _ATTACKS_AFTER:  # the attacks' knobs that are not counts sit after their counts
            at_end_of_attacks = len(rows) + sum(1 for o in COUNT_LIMITS if o.startswith("attacks."))
    rows[at_end_of_attacks:at_end_of_attacks] = attack_knob_rows_markdown()
    for field, (federated_low, federated_high, why) in FEDERATED_RANGES.items():
        rows.append(f"| `{field}` | [{federated_low:g}, {federated_high:g}] | run (federated) | {why} |")
    for option, (low, high, low_in, high_in, why) in LEDGER_RANGES.items():
        interval = f"{'[' if low_in else '('}{low:g}, {high:g}{']' if high_in else ')'}"
        where = (
            "ledger set-budget"
            if "set-budget" in option
            else "ledger record; mechanisms in results files and ledger rows"
        )
        rows.append(f"| `{option}` | {interval} | {where} | {why} |")
    return rows


def model_folder_limits_markdown() -> list[str]:
    """The rows of docs/errors.md's table of a Hugging Face folder's config sizes and file sizes,
    generated from targets/language_model_sources.py (where the folder is inspected)."""
    from targets import language_model_sources as lm

    rows = [f"| `config.json` `{key}` | ≤ {high:,} |" for key, high in lm.SIZE_LIMITS.items()]
    rows += [
        f"| any other integer in `config.json` | ≤ {lm.ANY_INT_LIMIT:,} |",
        f"| parameters (config estimate and safetensors headers) | ≤ {lm.DEFAULT_MAX_PARAMETERS:,} |",
        "| `config.json`, `tokenizer_config.json`, `generation_config.json`, index files "
        f"| ≤ {lm.JSON_LIMIT:,} bytes |",
        f"| `tokenizer.json` | ≤ {lm.TOKENIZER_LIMIT:,} bytes |",
        f"| one safetensors header | ≤ {lm.HEADER_LIMIT:,} bytes |",
        f"| files in the folder | ≤ {lm.MAX_FILES:,} |",
    ]
    return rows
