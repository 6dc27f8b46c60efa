"""Scoring texts with the user's language model inside an isolated worker (audit/machinery/workers.py).

Each task scores one chunk of texts and returns plain arrays (per-token statistics,
`attacks.text_outputs.TokenStatistics`); the model is loaded once per worker process and kept for
the following chunks, so the parent can show progress chunk by chunk. Nothing of the user's
objects crosses back to the audit's process.
"""

from __future__ import annotations

from typing import Any

import numpy as np

_LOADED: dict[tuple, Any] = {}


def _device(requested: str) -> str:
    import torch

    if requested == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    return requested


def _load(source: dict[str, Any], device: str):
    key = (tuple(sorted(source.items())), device)
    if key not in _LOADED:
        _LOADED.clear()  # one model per worker at a time
        if source["kind"] == "hf":
            from targets.language_model_sources import load_hf_causal_lm

            _LOADED[key] = load_hf_causal_lm(source["path"], device)
        else:
            from tokenizers import Tokenizer

            from audit.machinery.user_code import load_user_function
            from audit.machinery.workers import user_code

            name = f"--lm-module {source['factory']}"
            with user_code(name, "module"):
                factory = load_user_function(source["factory"], "--lm-module")
            with user_code(name):
                model = factory()
            if not callable(getattr(model, "logits", None)):
                from audit.errors import AuditInputError

                raise AuditInputError(
                    "--lm-module", f"'{source['factory']}' returned an object without a logits(token_ids) method"
                )
            _LOADED[key] = (model, Tokenizer.from_file(source["tokenizer"]))
    return _LOADED[key]


def score_texts_task(
    source: dict[str, Any], texts: list[str], max_length: int, batch_size: int, device: str
) -> dict[str, np.ndarray]:
    """Per-token statistics of `texts` (truncated to `max_length` tokens) under the source's model."""
    import torch

    from attacks.text_outputs import TokenStatistics, statistics_from_logits
    from audit.machinery.workers import user_code

    device = _device(device)
    model, tokenizer = _load(source, device)
    encoded = [e.ids[:max_length] for e in tokenizer.encode_batch(list(texts))]
    parts = []
    name = "--hf-model" if source["kind"] == "hf" else f"--lm-module {source.get('factory')}"
    for start in range(0, len(encoded), batch_size):
        chunk = encoded[start : start + batch_size]
        width = max(2, max(len(ids) for ids in chunk))
        ids = torch.zeros((len(chunk), width), dtype=torch.long)
        mask = torch.zeros((len(chunk), width), dtype=torch.long)
        for row, tokens in enumerate(chunk):
            ids[row, : len(tokens)] = torch.as_tensor(tokens, dtype=torch.long)
            mask[row, : len(tokens)] = 1
        ids, mask = ids.to(device), mask.to(device)
        with torch.no_grad(), user_code(name, "model"):
            logits = model.logits(ids, attention_mask=mask) if source["kind"] == "hf" else model.logits(ids)
        logits = torch.as_tensor(logits)
        if logits.shape[:2] != ids.shape:
            from audit.errors import AuditInputError

            raise AuditInputError(
                name,
                f"logits have shape {tuple(logits.shape)}; expected (batch, length, vocab) "
                f"= ({ids.shape[0]}, {ids.shape[1]}, V)",
            )
        parts.append(statistics_from_logits(logits.float(), ids, mask=mask))
    width = max_length - 1
    pad = lambda a: np.pad(a, ((0, 0), (0, max(0, width - a.shape[1]))), constant_values=np.nan)[:, :width]  # noqa: E731
    stats = TokenStatistics.concat(parts)
    return {k: pad(v) for k, v in stats.as_arrays().items()}
