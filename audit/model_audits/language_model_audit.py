"""`audit-model --hf-model DIR | --lm-module module:function`: membership audit of the user's own
causal language model on member / non-member texts.

The model folder is inspected before anything runs (targets/language_model_sources.py: pickle
weights, remote code, huge configs, symlinks refused, exit 2), then loaded and queried only in an
isolated worker process (audit/machinery/workers.py) with a timeout, chunk by chunk with
progress, on the GPU when one is present. The attacks (attacks/: loss, zlib ratio, min-k %,
min-k %++, and the reference-model ratio when `--reference-model` is given) score each text from
the per-token statistics the worker returns.

The user's sets were not drawn by coin flips, so the one-run bound does not apply: no bound proven
for one model decides a DP claim (the verdict says inconclusive), and the figures are the attacks'
AUC and TPR at low FPR. The blind baseline (Das et al. 2024, arXiv 2406.16201) always runs on the
same sets: when the text alone separates them, the attacks' numbers measure that distribution
shift rather than leakage, and the results say so.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from attacks import TEXT_ATTACKS, BlindBaseline, TextAttackContext, get_text_attack
from attacks.text_outputs import TokenStatistics
from audit.errors import AuditInputError
from audit.machinery.environment import describe_environment
from audit.machinery.limits import COUNT_LIMITS, check_count, check_memory
from audit.machinery.memory_estimates import language_model_bytes
from audit.machinery.verdict import verdict_for_results
from audit.machinery.workers import WorkerPool
from audit.model_audits.language_model_scoring import score_texts_task
from audit.model_audits.score_audit import NOT_TRAINED_HERE
from audit.statistics.attack_evaluation import evaluate_attack

SCHEMA_VERSION = 3
MAX_TEXTS = COUNT_LIMITS["texts per file"].high
MAX_FILE_BYTES = 2 << 30
CHUNK = 64


def read_texts(path: str | Path, flag: str, field: str = "text") -> list[str]:
    """Texts of a JSONL file (one JSON object per line, the text under `field`) or a Parquet file
    (column `field`)."""
    path = Path(path)
    where = f"{flag} '{path}'"
    if not path.is_file():
        raise AuditInputError(where, "is not a file (JSONL or Parquet of texts)")
    if path.stat().st_size > MAX_FILE_BYTES:
        raise AuditInputError(where, f"is larger than {MAX_FILE_BYTES} bytes")
    suffix = path.suffix.lower()
    texts: list[Any] = []
    if suffix in (".jsonl", ".json", ".ndjson"):
        with path.open(encoding="utf-8", errors="strict") as handle:
            try:
                for number, line in enumerate(handle, 1):
                    if not line.strip():
                        continue
                    try:
                        from audit.machinery.input_files import check_json_depth

                        check_json_depth(line, f"{where}: line {number}")
                        row = json.loads(line)
                    except ValueError as exc:
                        raise AuditInputError(f"{where}: line {number}", f"is not JSON ({str(exc)[:80]})") from None
                    if not isinstance(row, dict) or field not in row:
                        raise AuditInputError(f"{where}: line {number}", f"needs an object with a '{field}' field")
                    texts.append(row[field])
                    if len(texts) > MAX_TEXTS:
                        check_count("texts per file", len(texts), where=where)
            except UnicodeDecodeError:
                raise AuditInputError(where, "is not UTF-8 text") from None
    elif suffix == ".parquet":
        try:
            import pyarrow.parquet as pq

            rows = pq.ParquetFile(path).metadata.num_rows  # the count before the texts are read
        except Exception as exc:  # noqa: BLE001 - any unreadable file is the user's input
            raise AuditInputError(where, f"cannot be read as Parquet ({str(exc)[:120]})") from None
        check_count("texts per file", rows, where=where)
        try:
            frame = pd.read_parquet(path, columns=[field])
        except Exception as exc:  # noqa: BLE001 - any unreadable file is the user's input
            raise AuditInputError(
                where, f"cannot be read as Parquet with a '{field}' column ({str(exc)[:120]})"
            ) from None
        texts = frame[field].tolist()
    else:
        raise AuditInputError(where, "must be .jsonl or .parquet")
    bad = next((i for i, t in enumerate(texts) if not isinstance(t, str) or not t.strip()), None)
    if bad is not None:
        raise AuditInputError(f"{where}: text {bad + 1}", "is not a non-empty string")
    if len(texts) < 2:
        raise AuditInputError(where, "needs at least 2 texts")
    return [str(t) for t in texts]


def _sha256(path: Path) -> str:
    with open(path, "rb") as handle:  # read in blocks by hashlib (Python ≥ 3.11)
        return hashlib.file_digest(handle, "sha256").hexdigest()


def _source(
    hf_model: Path | None,
    lm_module: str | None,
    tokenizer: Path | None,
    flag: str,
    max_length: int = 512,
    batch_size: int = 16,
) -> tuple[dict, dict]:
    """The model source a worker loads, and what results.json records about it (checked here, run nowhere);
    a folder's parameters and one batch's logits must fit in this machine's memory."""
    if (hf_model is None) == (lm_module is None):
        raise AuditInputError("--hf-model/--lm-module", "give exactly one of them")
    if hf_model is not None:
        from targets.language_model_sources import inspect_hf_folder

        folder = inspect_hf_folder(hf_model, flag=flag)
        vocab = folder.config.get("vocab_size")
        vocab = vocab if isinstance(vocab, int) and not isinstance(vocab, bool) else 0
        check_memory(
            language_model_bytes(folder.parameters, vocab, max_length, batch_size),
            f"{flag} '{hf_model}'",
            f"the model ({folder.parameters:,} parameters) with batches of {batch_size} × {max_length} "
            f"tokens × a {vocab:,}-token vocabulary",
        )
        return (
            {"kind": "hf", "path": str(folder.path.resolve())},
            {
                "kind": "Hugging Face causal LM (safetensors)",
                "path": str(hf_model),
                "model_type": folder.model_type,
                "parameters": folder.parameters,
                "weights_sha256": {f: _sha256(folder.path / f) for f in folder.weight_files},
            },
        )
    from audit.machinery.user_code import check_spec

    assert lm_module is not None  # exactly one of the two was given (checked above)
    check_spec(lm_module, "--lm-module")
    if tokenizer is None or not Path(tokenizer).is_file() or Path(tokenizer).is_symlink():
        raise AuditInputError("--tokenizer", "--lm-module needs --tokenizer FILE, a Hugging Face tokenizers JSON file")
    from targets.language_model_sources import TOKENIZER_LIMIT

    if Path(tokenizer).stat().st_size > TOKENIZER_LIMIT:
        raise AuditInputError(f"--tokenizer '{tokenizer}'", f"is larger than {TOKENIZER_LIMIT:,} bytes")
    return (
        {"kind": "module", "factory": lm_module, "tokenizer": str(Path(tokenizer).resolve())},
        {
            "kind": "PyTorch module with logits(token_ids)",
            "factory": lm_module,
            "tokenizer": str(tokenizer),
            "tokenizer_sha256": _sha256(Path(tokenizer)),
        },
    )


def _score(
    pool: WorkerPool, source: dict, texts: list[str], max_length: int, batch_size: int, device: str, progress, what: str
) -> TokenStatistics:
    chunks = [(source, texts[i : i + CHUNK], max_length, batch_size, device) for i in range(0, len(texts), CHUNK)]
    with progress.step(what, total=len(texts)) as step:
        done = 0

        def advanced(index: int, result) -> None:
            nonlocal done
            done += len(chunks[index][1])
            step.update(done)

        parts = pool.map(score_texts_task, chunks, on_result=advanced)
    return TokenStatistics.concat([TokenStatistics(p["logprob"], p["mean"], p["std"]) for p in parts])


@dataclass(frozen=True)
class LanguageModelInputs:
    """What one language-model audit reads: the member and non-member texts files (`text_field` of each
    JSON line), the model (a Hugging Face folder `hf_model`, or `lm_module` "module:function"), its
    `tokenizer`, an optional `reference_model` (trained on disjoint data), how the texts are batched
    (`max_length` tokens, `batch_size` texts, on `device`) and the attacks (`attack_names`; None: every
    text attack the inputs allow)."""

    members: Path
    nonmembers: Path
    hf_model: Path | None = None
    lm_module: str | None = None
    tokenizer: Path | None = None
    reference_model: Path | None = None
    text_field: str = "text"
    max_length: int = 512
    batch_size: int = 16
    device: str = "auto"
    attack_names: tuple[str, ...] | None = None


def prepare_language_model_audit(inputs: LanguageModelInputs) -> dict[str, Any]:
    """Every check of a language-model audit that runs nothing: the counts (the range table), the
    texts files, the model folder (targets/language_model_sources.py) and the memory the batches
    need. The CLI calls it before it creates a run folder, so a refusal leaves nothing behind."""
    max_length, batch_size, device, reference_model = (
        inputs.max_length,
        inputs.batch_size,
        inputs.device,
        inputs.reference_model,
    )
    check_count("--max-length", max_length)  # the range table (audit/machinery/limits.py)
    check_count("--batch-size", batch_size)
    if device not in ("auto", "cpu") and not str(device).startswith("cuda"):
        raise AuditInputError("--device", f"expected auto, cpu or cuda, got {device!r}")
    member_texts = read_texts(inputs.members, "--members", inputs.text_field)
    nonmember_texts = read_texts(inputs.nonmembers, "--nonmembers", inputs.text_field)
    source, record = _source(inputs.hf_model, inputs.lm_module, inputs.tokenizer, "--hf-model", max_length, batch_size)
    reference_source = None
    if reference_model is not None:
        reference_source, reference_record = _source(
            reference_model, None, None, "--reference-model", max_length, batch_size
        )
        record["reference"] = reference_record
    names = list(inputs.attack_names or []) or [
        n
        for n in TEXT_ATTACKS  # an attack that needs a reference model says so
        if not get_text_attack(n).needs_reference or reference_source is not None
    ]
    for name in names:
        attack = get_text_attack(name)
        if attack.needs_reference and reference_source is None:
            raise AuditInputError(
                "--attacks", f"'{name}' needs --reference-model DIR (a model trained on disjoint data)"
            )
    return {
        "member_texts": member_texts,
        "nonmember_texts": nonmember_texts,
        "source": source,
        "record": record,
        "reference_source": reference_source,
        "names": names,
    }


def audit_language_model(
    inputs: LanguageModelInputs,
    *,
    claimed_epsilon: float | None = None,
    delta: float = 1e-5,
    confidence: float = 0.95,
    timeout: float = 600.0,
    seed: int = 0,
    progress=None,
    scores_path: Path | None = None,
    prepared: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The results dict of one language-model audit (schema_version 2). Bad input → AuditInputError.
    `prepared`: what `prepare_language_model_audit(inputs)` returned (else it runs here)."""
    from audit.machinery.progress import as_progress

    progress = as_progress(progress)
    if prepared is None:
        prepared = prepare_language_model_audit(inputs)
    members, nonmembers, hf_model, lm_module = inputs.members, inputs.nonmembers, inputs.hf_model, inputs.lm_module
    max_length, batch_size, device = inputs.max_length, inputs.batch_size, inputs.device
    member_texts, nonmember_texts = prepared["member_texts"], prepared["nonmember_texts"]
    source, record, reference_source = prepared["source"], prepared["record"], prepared["reference_source"]
    names = prepared["names"]
    texts = member_texts + nonmember_texts
    membership = np.array([True] * len(member_texts) + [False] * len(nonmember_texts))
    flag = "--hf-model" if hf_model is not None else f"--lm-module {lm_module}"
    with WorkerPool(1, name=flag, timeout=timeout, threads=None, what="model") as pool:
        stats = _score(pool, source, texts, max_length, batch_size, device, progress, "scoring texts with the model")
    reference_stats = None
    if reference_source is not None:
        with WorkerPool(1, name="--reference-model", timeout=timeout, threads=None, what="model") as pool:
            reference_stats = _score(
                pool,
                reference_source,
                texts,
                max_length,
                batch_size,
                device,
                progress,
                "scoring texts with the reference model",
            )
    context = TextAttackContext(texts, reference=reference_stats)
    claim = claimed_epsilon if claimed_epsilon is not None and math.isfinite(claimed_epsilon) else None
    attacks, columns = [], {}
    for name in names:
        scores = np.asarray(get_text_attack(name).scores(stats, context), dtype=np.float64)
        if not np.all(np.isfinite(scores)):
            raise AuditInputError(
                flag, f"attack {name}: the model's outputs give non-finite scores (NaN / inf logits?)"
            )
        columns[name] = scores
        attacks.append(
            evaluate_attack(
                name,
                scores,
                membership,
                np.zeros(len(texts), dtype=int),
                delta=delta,
                confidence=confidence,
                threshold_seed=seed,
                accountant_epsilon=claim,
                membership_randomized=False,
            )
        )
    with progress.step("blind baseline (text alone, permutation test)"):
        blind_scores, blind_auc, blind_p = BlindBaseline().test(texts, membership, seed=seed)
    shift = blind_p <= 1 - confidence
    notes = [
        f"blind baseline (text alone, no model; Das et al. 2024): AUC {blind_auc:.3f}, permutation p = {blind_p:.3f}"
    ]
    if shift:
        notes.append(
            "distribution shift: the member and non-member texts are distinguishable without the model, so "
            "the attacks' AUCs on them measure that shift, not leakage; use non-members from the same "
            "source and period as the members"
        )
    if scores_path is not None:
        scores_path.parent.mkdir(parents=True, exist_ok=True)
        pd.DataFrame({"member": membership.astype(int), **columns, "blind_baseline": blind_scores}).to_csv(
            scores_path, index=False
        )
    blind = {
        "name": "blind_baseline",
        "auc": blind_auc,
        "p_value_above_chance": blind_p,
        "p_value_method": "label permutation of the cross-fitted classifier",
        "distribution_shift": bool(shift),
        "separates": bool(shift),
    }
    target = {
        "kind": "text",
        "blind_baseline": blind,  # read by the leakage statement (audit.machinery.leakage)
        "epsilon_target": claim,
        "delta": delta,
        **NOT_TRAINED_HERE,
        "accountant": None,
        "epsilon": {"claimed": claim} if claim is not None else {},
        "epsilon_accountant": claim,
        "test_accuracy": None,
        "attacks": attacks,
        "epsilon_lb_best": None,
        "epsilon_lb_best_method": None,
        "epsilon_lb_ratio": None,
        "violation": False,
    }
    results = {
        "schema_version": SCHEMA_VERSION,
        "kind": "text",
        "config": {"attacks": {"confidence": confidence}, "privacy": {"delta": delta}},
        "environment": describe_environment(device, seed),
        "data": {
            "description": f"{Path(members).name} (members), {Path(nonmembers).name} (non-members)",
            "n_rows": len(texts),
            "n_train": len(member_texts),
            "n_candidates": len(texts),
            "n_members": len(member_texts),
            "n_nonmembers": len(nonmember_texts),
            "membership": "given by the user's files (members = the model's training texts); not randomized",
            "files_sha256": {"members": _sha256(Path(members)), "nonmembers": _sha256(Path(nonmembers))},
            "model": record,
        },
        "attacks_run": names,
        "targets": [target],
        "synthetic": [],
        "text": {"blind_baseline": blind},
        "notes": notes,
        "verdict": None,
    }
    return verdict_for_results(results)[0]
