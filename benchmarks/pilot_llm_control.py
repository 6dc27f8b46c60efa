"""Pilot for the llm preset's positive controls: what a fine-tuning setting does to the ε = ∞
control's grip on its canaries, and so to the power of the ε 1 / ε 8 claim rows — on seeds other than
the preset's (seed 0 is the evaluation: never choose a setting on it).

    nice -n 19 python benchmarks/pilot_llm_control.py --seed 1 --mode lora --lora-rank 16
    nice -n 10 python benchmarks/pilot_llm_control.py --seed 2 --mode full lora --epsilon inf 8 \
        --llm new_tokens=1500 --llm panda_secret_length=1 --llm canary_loss=secret

Builds exactly what `privacy-audit run --preset llm` builds (audit/text/llm_setup.py: corpus,
tokenizer, canaries, pretraining; targets/hf_causal_lm.py `finetune`), fine-tunes each `--mode` at
each `--epsilon` (default: the ε = ∞ control alone), scores both canary designs black-box — raw and
against the public pretrained model (`reference`) — and, for the ε = ∞ control, puts the Panda
scores through the claim rows' own tests (audit/text/llm_one_run.py `control_p_value`) against the
DP-SGD curves the same fine-tuning would have at ε 1 and ε 8 (σ from the accountant for its q and
T), next to a perfect attack's p-value and the verdict's first Holm level α/4. `--llm KEY=VALUE`
sets any `llm:` field on top of the preset. Prints one JSON line per fine-tuning.
"""

from __future__ import annotations

import argparse
import ast
import json
import math
import time
from dataclasses import replace

import numpy as np
import torch

from audit.machinery.config import resolve_config
from audit.statistics.attack_evaluation import evaluate_attack
from audit.statistics.one_run_power import fdp_perfect_p_value
from audit.statistics.tradeoff_curves import dpsgd_privacy_profile
from audit.text.llm_one_run import canary_claim_row, control_p_value
from audit.text.llm_runner import llm_spec
from audit.text.llm_setup import derived_seed, finetune_target, prepare_llm
from targets.hf_causal_lm import build_hf_lm
from targets.llm_canaries import secret_scores
from targets.opacus_setups import calibrated_noise_multiplier
from targets.text_models import mean_token_loss


def _value(text: str):
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


def _design_rows(scores: dict[str, np.ndarray], setup, config, seed: int) -> dict:
    out = {}
    for design, canaries in setup.canaries.items():
        row = evaluate_attack(
            design,
            scores[design],
            canaries.inserted,
            np.zeros(canaries.m, dtype=int),
            delta=config.privacy.delta,
            confidence=config.attacks.confidence,
            threshold_seed=seed,
            accountant_epsilon=None,
        )
        out[design] = {
            "auc": round(row["auc"], 4),
            "tpr_at_1pct": round(row["tpr_at_fpr"]["0.01"], 3),
            "one_run_lb": round((row["epsilon_lb"] or {}).get("one_run") or 0.0, 2),
        }
    return out


def _control_power(panda: np.ndarray, coins: np.ndarray, setup, spec, config, mode: str) -> dict:
    """The ε = ∞ control's Panda scores through the claim rows' tests against ε 1 and ε 8's curves."""
    persons = len(setup.private_rows)  # the DP runs of this mode: persons Poisson-sampled at q = 1 / batches
    batches = math.ceil(persons / spec.batch_size)
    epochs = spec.lora_epochs if mode == "lora" and spec.lora_epochs else spec.epochs
    q, steps = 1.0 / batches, batches * epochs
    out = {}
    for claim in (1.0, 8.0):
        sigma = calibrated_noise_multiplier(claim, config.privacy.delta, q, epochs, config.privacy.accountant)
        row = canary_claim_row(
            panda,
            coins,
            design="panda",
            mode=mode,
            unit="person",
            claim=claim,
            delta=config.privacy.delta,
            noise_multiplier=sigma,
            sample_rate=q,
            steps=steps,
            confidence=config.attacks.confidence,
        )
        out[f"eps{claim:g}"] = {
            "sigma": round(sigma, 3),
            "control_p": float(f"{control_p_value(panda, coins, row, config.attacks.confidence):.3g}"),
            "perfect_p": float(f"{fdp_perfect_p_value(dpsgd_privacy_profile(sigma, q, steps), len(coins)):.3g}"),
        }
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--mode", choices=["full", "lora"], nargs="+", default=["lora"])
    parser.add_argument("--epsilon", type=float, nargs="+", default=[math.inf], help="target ε of each fine-tuning")
    parser.add_argument("--llm", action="append", default=[], metavar="KEY=VALUE", help="an llm: field")
    parser.add_argument("--canaries", type=int, help="llm.canaries_per_design (default: the preset's)")
    parser.add_argument("--epochs", type=int, help="fine-tuning epochs (default: the preset's)")
    parser.add_argument("--lora-rank", type=int)
    parser.add_argument("--lora-alpha", type=int)
    parser.add_argument("--lora-lr", type=float)
    parser.add_argument("--lora-saved", help="modules trained in full beside the adapters, comma-separated")
    parser.add_argument("--holm-rows", type=int, default=4, help="K of the verdict's first Holm level α/K")
    args = parser.parse_args()
    if args.seed == 0:
        parser.error("seed 0 is the preset's evaluation seed: pilot on another")
    llm: dict = {k: _value(v) for k, v in (item.split("=", 1) for item in args.llm)}
    if args.canaries:
        llm["canaries_per_design"] = args.canaries
    config = resolve_config("llm", overrides={"seed": args.seed, "llm": llm})
    spec = llm_spec(config)
    changes: dict = {}
    if args.lora_rank:
        changes.update(lora_rank=args.lora_rank, lora_alpha=2 * args.lora_rank)
    if args.lora_alpha:
        changes["lora_alpha"] = args.lora_alpha
    if args.lora_lr:
        changes["lora_lr"] = args.lora_lr
    if args.lora_saved:
        changes["lora_saved"] = tuple(args.lora_saved.split(","))
    if args.epochs:
        changes["epochs"] = args.epochs  # both modes (LoRA's lora_epochs is None: the same)
    spec = replace(spec, **changes)
    device = torch.device("cpu")
    torch.set_num_threads(1)
    setup = prepare_llm(config, spec, device)
    base = build_hf_lm(setup.vocab, spec, seed=0)
    base.load_state_dict(setup.pretrained_state)
    reference = {d: secret_scores(base, c) for d, c in setup.canaries.items()}
    order = sorted(config.privacy.epsilons, key=lambda e: -math.inf if math.isinf(e) else e)
    for mode in args.mode:
        for epsilon in args.epsilon:
            # the preset's seed for this fine-tuning where the preset has this ε, else one of its own
            index = order.index(epsilon) if epsilon in order else 100 + int(epsilon * 10)
            seed = derived_seed(config.seed, 10, ["full", "lora"].index(mode), index)
            cpu = time.process_time()
            trained, model = finetune_target(setup, config, spec, mode=mode, epsilon=epsilon, seed=seed, device=device)
            cpu = time.process_time() - cpu
            out: dict = {"seed": args.seed, "mode": mode, "epsilon": epsilon, "llm": llm}
            out["spec"] = {k: str(v) for k, v in changes.items()}
            out["cpu_finetune_s"] = round(cpu, 1)
            out["sigma"] = trained.noise_multiplier
            out["test_perplexity"] = round(math.exp(mean_token_loss(model, setup.test_rows)), 1)
            raw = {d: secret_scores(model, c) for d, c in setup.canaries.items()}
            calibrated = {d: raw[d] - reference[d] for d in raw}
            out["raw"] = _design_rows(raw, setup, config, seed)
            out["reference"] = _design_rows(calibrated, setup, config, seed)
            if math.isinf(epsilon):
                coins = setup.canaries["panda"].inserted
                out["control_raw"] = _control_power(raw["panda"], coins, setup, spec, config, mode)
                out["control_reference"] = _control_power(calibrated["panda"], coins, setup, spec, config, mode)
            out["holm_level"] = (1 - config.attacks.confidence) / args.holm_rows
            print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
