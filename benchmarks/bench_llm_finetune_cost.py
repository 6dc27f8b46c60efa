"""CPU cost of one epoch of the llm preset's fine-tunings, per document (docs/language-models.md).

What sizes the `llm` preset: each canary adds documents to every fine-tuning. This times one epoch of
each fine-tuning the preset runs — full (Opacus functorch per-sample gradients) and LoRA (hooks), with
DP and without — over random documents of the preset's model (GPT-2 architecture, 2 layers, width 64,
a vocabulary of 864) at person level, and prints CPU seconds per document and epoch
(`time.process_time`: the machine may be shared, and wall time then says little; the load average is
printed beside). Training is single-threaded on the CPU, as in the job.

    python benchmarks/bench_llm_finetune_cost.py                  # 1,200 documents of 48 positions
    python benchmarks/bench_llm_finetune_cost.py --documents 300  # a quick look
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402
import torch  # noqa: E402

from targets.hf_causal_lm import HFLMSpec, build_hf_lm, finetune  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--documents", type=int, default=1200)
    parser.add_argument("--length", type=int, default=48, help="positions per document (the preset's max_length)")
    parser.add_argument("--vocab", type=int, default=864, help="the preset's 800 BPE tokens + 64 new tokens")
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    spec = HFLMSpec(epochs=1, max_length=args.length)
    state = {k: v.detach().clone() for k, v in build_hf_lm(args.vocab, spec, seed=0).state_dict().items()}
    rows = np.random.default_rng(0).integers(4, args.vocab, size=(args.documents, args.length))
    print(f"load average {os.getloadavg()[0]:.1f}; {args.documents} documents of {args.length} positions, 1 epoch")
    print("| fine-tuning | DP | CPU s | CPU ms per document and epoch | wall s |")
    print("|---|---|---|---|---|")
    for mode in ("full", "lora"):
        for epsilon in (8.0, math.inf):
            cpu, wall = time.process_time(), time.perf_counter()
            finetune(
                state,
                args.vocab,
                rows,
                spec,
                mode=mode,
                epsilon=epsilon,
                delta=1e-5,
                accountant="prv",
                seed=1,
                device=torch.device("cpu"),
                owners=np.arange(args.documents),
            )
            cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
            dp = "ε 8 (person level)" if math.isfinite(epsilon) else "none"
            print(f"| {mode} | {dp} | {cpu:.1f} | {1000 * cpu / args.documents:.1f} | {wall:.1f} |")


if __name__ == "__main__":
    main()
