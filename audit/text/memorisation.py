"""Secret exposure and extraction of one trained text target (the canaries and personal fields).

Exposure: Carlini et al. 2019 (arXiv 1802.08232), exact by enumeration of the 10^digits secrets
when the space is at most `exact_limit`, else their skew-normal estimate from sampled secrets.
Extraction: Carlini et al. 2021 (arXiv 2012.07805), greedy and beam completion of each canary's
prefix, and greedy completion of candidate records up to their phone number and address.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from attacks.extraction import beam_continuation, exact_recoveries, greedy_continuations
from attacks.secret_exposure import all_secret_log_likelihoods, random_secrets, secret_log_likelihoods
from audit.statistics.exposure import RANDOM_EXPOSURE_MEAN, exposure_exact, exposure_extrapolated, exposure_p_value
from targets.text_corpus import TextCorpus
from targets.text_models import encode_prefix


def digit_token_ids(tokenizer) -> list[int]:
    ids = [tokenizer.token_to_id(str(d)) for d in range(10)]
    if any(i is None for i in ids):
        raise ValueError("the tokenizer has no single token for every digit")
    return ids


def canary_exposures(
    model, tokenizer, corpus: TextCorpus, *, exact_limit: int, samples: int, beams: int, seed: int
) -> list[dict[str, Any]]:
    """One row per canary: repetitions, exposure (and how computed), rank, greedy / beam recovery."""
    digits = digit_token_ids(tokenizer)
    rng = np.random.default_rng(np.random.SeedSequence([seed, 31]))
    exact = corpus.secret_space <= exact_limit
    prompts = [encode_prefix(tokenizer, c.prefix) for c in corpus.canaries]
    truths = [[digits[int(ch)] for ch in c.secret] for c in corpus.canaries]
    greedy = exact_recoveries(greedy_continuations(model, prompts, corpus.secret_digits), truths)
    rows = []
    for canary, prompt, truth, greedy_hit in zip(corpus.canaries, prompts, truths, greedy):
        if exact:
            log_likelihoods = all_secret_log_likelihoods(model, prompt, digits, corpus.secret_digits)
            exposure = exposure_exact(log_likelihoods, int(canary.secret))
            rank = int(np.sum(log_likelihoods >= log_likelihoods[int(canary.secret)]))
            method = "exact (enumeration)"
        else:
            own = secret_log_likelihoods(model, prompt, digits, [canary.secret])[0]
            sampled = secret_log_likelihoods(model, prompt, digits, random_secrets(corpus.secret_digits, samples, rng))
            exposure = exposure_extrapolated(own, sampled, corpus.secret_space)
            rank = None
            method = f"estimate (skew-normal fit to {samples} sampled secrets, Carlini et al. 2019 §4.3)"
        beam_hit = bool(exact_recoveries([beam_continuation(model, prompt, corpus.secret_digits, beams)], [truth])[0])
        rows.append(
            {
                "name": canary.name,
                "repetitions": canary.repetitions,
                "exposure": exposure,
                "rank": rank,
                "method": method,
                "p_value_random": exposure_p_value(exposure),
                "greedy_extracted": bool(greedy_hit),
                "beam_extracted": beam_hit,
            }
        )
    return rows


def exposure_summary(rows: list[dict[str, Any]], space_size: int) -> list[dict[str, Any]]:
    """Per repetition count (0 = controls): mean / max exposure and extraction counts."""
    out = []
    for reps in sorted({r["repetitions"] for r in rows}):
        group = [r for r in rows if r["repetitions"] == reps]
        values = np.array([r["exposure"] for r in group])
        out.append(
            {
                "repetitions": reps,
                "n_canaries": len(group),
                "exposure_mean": float(values.mean()),
                "exposure_max": float(values.max()),
                "exposure_ceiling": float(np.log2(space_size)),
                "random_baseline": RANDOM_EXPOSURE_MEAN,
                "greedy_extracted": int(sum(r["greedy_extracted"] for r in group)),
                "beam_extracted": int(sum(r["beam_extracted"] for r in group)),
            }
        )
    return out


def record_extraction(model, tokenizer, corpus: TextCorpus, n_records: int, seed: int) -> dict[str, Any]:
    """Greedy completion of candidate records up to their phone number and their address; exact
    recoveries among members and, as the chance level, among non-members."""
    rng = np.random.default_rng(np.random.SeedSequence([seed, 32]))
    chosen = np.sort(rng.choice(len(corpus.candidates), size=min(n_records, len(corpus.candidates)), replace=False))
    out: dict[str, Any] = {
        "n_prompted": int(len(chosen)),
        "n_members": int(corpus.candidate_member[chosen].sum()),
        "n_nonmembers": int((~corpus.candidate_member[chosen]).sum()),
    }
    for field_name in ("phone", "address"):
        prompts, truths = [], []
        for i in chosen:
            record = corpus.candidates[i]
            prompt = encode_prefix(tokenizer, record.prefix(field_name))
            full = encode_prefix(tokenizer, record.prefix(field_name) + " " + getattr(record, field_name))
            prompts.append(prompt)
            truths.append(full[len(prompt) :])
        longest = max((len(t) for t in truths), default=1)
        hits = exact_recoveries(greedy_continuations(model, prompts, longest), truths)
        members = corpus.candidate_member[chosen]
        out[field_name] = {
            "members_recovered": int(hits[members].sum()),
            "nonmembers_recovered": int(hits[~members].sum()),
        }
    return out
