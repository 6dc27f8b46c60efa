#!/usr/bin/env bash
# One prepared GPU check (docs/benchmarks.md "On a GPU"): run it first when a GPU machine is lent.
#
#   make gpu-check                                   # = bash benchmarks/gpu_check.sh
#   GPU_CHECK_OUT=out GPU_CHECK_BUDGET=480 bash benchmarks/gpu_check.sh
#   GPU_CHECK_QUICK=1 GPU_CHECK_DEVICE=cpu bash benchmarks/gpu_check.sh   # a rehearsal on a CPU machine
#   GPU_CHECK_STEPS=whitebox-one-run,text-gpu bash benchmarks/gpu_check.sh  # only the named steps (a rerun)
#
# Steps, each under its own time cap and all under one budget (GPU_CHECK_BUDGET seconds; a step that
# cannot fit is skipped and says so), each writing its log and numbers under GPU_CHECK_OUT as it ends,
# so a run cut short still leaves what was done:
#   0. header (nvidia-smi, torch, CUDA, git commit) and an import check of every module the steps use;
#   1. `run --preset smoke --no-tracking` on the GPU: targets and their white-box one-run twins train
#      on cuda (results.json's environment.device says so; train seconds target vs twin);
#   2. `bench --models 256` on cuda, then on the CPU of the same machine (one thread, as the CPU table);
#   3. `whitebox-audit --mode one-run --builtin`: one run with canaries and one plain run (it trains on
#      the CPU whatever the machine has: the built-in Opacus MLP has no device option);
#   4. `run --preset text --no-tracking` on the GPU: wall time, peak RSS of the process, peak GPU memory
#      (nvidia-smi sampled every 0.5 s: the whole card's memory.used, CUDA context included);
#   5. `run --preset smoke --no-tracking --device cpu` on the same machine (the GPU run's baseline);
#   6. if time is left, `bench` on the CPU with all its cores.
# Summary: GPU_CHECK_OUT/summary.md (also printed at the end). Exit 0 when every step that ran ended
# 0 (or 1 = a finding, which is a result), 3 when a step failed or the import check did.
set -u
OUT_DIR=${GPU_CHECK_OUT:-${OUT:-gpu-check-out}}
BUDGET=${GPU_CHECK_BUDGET:-480}
DEVICE=${GPU_CHECK_DEVICE:-auto}
QUICK=${GPU_CHECK_QUICK:-0}
PY=${PYTHON:-python3}
SCRIPT_DIR=$(cd "$(dirname "$0")" && pwd)
HERE=${GPU_CHECK_ROOT:-$(cd "$SCRIPT_DIR/.." && pwd)}  # the checkout whose code runs
cd "$HERE" || exit 3
export PYTHONPATH="$HERE${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 MPLBACKEND=Agg
mkdir -p "$OUT_DIR/logs" || exit 3
WORK=$(mktemp -d "${TMPDIR:-/tmp}/gpu-check-XXXXXX")
START=$(date +%s)
SUMMARY="$OUT_DIR/summary.md"
STATUS=0

left() { echo $(( BUDGET - ($(date +%s) - START) )); }
note() { echo "$*" | tee -a "$SUMMARY"; }

# step NAME CAP MIN -- command...: runs under min(CAP, time left - 5 s); skipped when under MIN seconds
# would be left. Records wall seconds, children's peak RSS and exit code in logs/NAME.json.
step() {
  local name=$1 cap=$2 min=$3; shift 4
  if [[ -n ${GPU_CHECK_STEPS:-} && ",$GPU_CHECK_STEPS," != *",$name,"* ]]; then
    return 0  # not asked for in this rerun
  fi
  local avail=$(( $(left) - 5 ))
  if (( avail < min )); then
    note "- **$name**: skipped, ${avail}s of the ${BUDGET}s budget left (needs ≥ ${min}s)"
    return 0
  fi
  (( cap > avail )) && cap=$avail
  echo "== $name (cap ${cap}s): $*"
  "$PY" "$SCRIPT_DIR/gpu_check_time.py" --name "$name" --cap "$cap" --json "$OUT_DIR/logs/$name.json" \
      --log "$OUT_DIR/logs/$name.log" -- "$@"
  local rc=$?
  local line
  line=$("$PY" -c "import json,sys; r=json.load(open(sys.argv[1])); print(f\"rc {r['rc']}, wall {r['wall_s']:.1f} s, peak RSS {r['max_rss_mib']:.0f} MiB\" + (', TIMED OUT' if r['timed_out'] else ''))" "$OUT_DIR/logs/$name.json" 2>/dev/null)
  note "- **$name**: ${line:-rc $rc} — \`$*\`"
  if (( rc != 0 && rc != 1 )); then STATUS=3; fi
  return 0
}

: > "$SUMMARY"
note "# gpu-check $(date -u +%Y-%m-%dT%H:%M:%SZ)"
note ""
COMMIT=${GPU_CHECK_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}
note "commit $COMMIT, device $DEVICE, budget ${BUDGET}s, quick=$QUICK"
{ nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null || echo "no nvidia-smi"; } | sed 's/^/GPU: /' | tee -a "$SUMMARY"
nvidia-smi > "$OUT_DIR/logs/nvidia-smi.txt" 2>&1 || true
"$PY" - <<'PY' 2>&1 | tee -a "$SUMMARY"
import os, platform, sys
import torch
print(f"python {platform.python_version()}, torch {torch.__version__}, CUDA {torch.version.cuda}, "
      f"cuda available {torch.cuda.is_available()}"
      + (f" ({torch.cuda.get_device_name(0)})" if torch.cuda.is_available() else "") + f", {os.cpu_count()} CPUs")
PY
note ""

# 0. Every module the steps import, and an MLflow store round trip (whitebox-audit logs to MLflow):
#    a broken install fails here in seconds, not after minutes of training.
"$PY" - "$WORK" <<'PY' 2>&1 | tee "$OUT_DIR/logs/imports.log"
import importlib, sys, time
t = time.perf_counter()
mods = ["opacus", "dp_accounting", "pydantic", "jsonschema", "faker", "skops.io", "sqlalchemy", "alembic",
        "tokenizers", "transformers", "sklearn", "scipy", "pandas", "matplotlib", "typer", "rich", "yaml",
        "pyarrow", "safetensors", "onnxruntime",
        "audit.cli", "audit.sweep.runner", "audit.text.runner", "audit.dp_validation.one_run_whitebox",
        "targets.training_benchmark", "targets.text_models", "reports.html_report"]
bad = []
for m in mods:
    try:
        importlib.import_module(m)
    except Exception as exc:  # report every failure, not just the first
        bad.append(f"{m}: {type(exc).__name__}: {exc}")
try:
    from pathlib import Path
    from audit.machinery.tracking import AuditTracker, experiment_name
    tracker = AuditTracker(f"sqlite:///{sys.argv[1]}/probe.db", experiment_name("gpu-check"), command="gpu-check")
    run_id = tracker.start_run("probe", tags={"probe": "1"})
    tracker.log_metrics(run_id, {"x": 1.0})
    tracker.finish(run_id)
except Exception as exc:
    bad.append(f"mlflow store: {type(exc).__name__}: {exc}")
print("import check:", "OK" if not bad else "FAILED", f"({time.perf_counter() - t:.1f} s)")
for b in bad:
    print("  ", b)
sys.exit(1 if bad else 0)
PY
if (( ${PIPESTATUS[0]} != 0 )); then
  note "- **imports**: FAILED (logs/imports.log); nothing else run"
  cat "$SUMMARY"; exit 3
fi
note "- **imports**: OK"

if [[ $QUICK == 1 ]]; then  # a rehearsal: tiny sizes, same code paths
  SMOKE_CFG="$WORK/smoke.yaml"; printf 'training:\n  epochs: 2\nattacks:\n  names: [loss, lira]\n  n_reference_models: 2\n' > "$SMOKE_CFG"
  TEXT_CFG="$WORK/text.yaml"; printf 'privacy:\n  epsilons: [8.0, inf]\ntext:\n  n_candidates: 80\n  n_pool: 60\n  n_test: 20\n  repetitions: [1, 4]\n  control_canaries: 2\n  secret_digits: 3\n  epochs: 1\n  extraction_records: 10\n' > "$TEXT_CFG"
  BENCH_MODELS=8; WB_ARGS=(--steps 5 --canaries 200)
else
  SMOKE_CFG=""; TEXT_CFG=""; BENCH_MODELS=${GPU_CHECK_BENCH_MODELS:-256}; WB_ARGS=(--steps 20 --canaries 1000)
fi
CLI=("$PY" -m audit.cli)
RUNS="$WORK/runs"

# 1. the GPU training path
step smoke-gpu 120 30 -- "${CLI[@]}" run --preset smoke ${SMOKE_CFG:+--config "$SMOKE_CFG"} --no-tracking --device "$DEVICE" --out "$RUNS/smoke-gpu" --quiet
# 2. bench: the GPU, then this machine's CPU (one thread, as the CPU table in docs/benchmarks.md), same sizes
step bench-gpu 90 20 -- "${CLI[@]}" bench --models "$BENCH_MODELS" --device "$DEVICE" --json "$OUT_DIR/logs/bench-gpu-result.json"
step bench-cpu 90 20 -- "${CLI[@]}" bench --models "$BENCH_MODELS" --device cpu --threads 1 --json "$OUT_DIR/logs/bench-cpu-result.json"
# 3. a one-run white-box audit (q = 1, σ 5: claim ε ≈ 4 at T = 20) with its plain run beside it
step whitebox-one-run 120 30 -- "${CLI[@]}" whitebox-audit --mode one-run --builtin --noise-multiplier 5.0 --sample-rate 1 "${WB_ARGS[@]}" --out "$RUNS/whitebox" --tracking-uri "sqlite:///$WORK/mlflow.db" --quiet
# 4. the text preset, with the card's memory sampled beside it
( while :; do nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits 2>/dev/null | head -1; sleep 0.5; done ) > "$OUT_DIR/logs/text-gpu-memory.txt" &
SAMPLER=$!
step text-gpu "${GPU_CHECK_TEXT_CAP:-330}" 60 -- "${CLI[@]}" run --preset text ${TEXT_CFG:+--config "$TEXT_CFG"} --no-tracking --device "$DEVICE" --out "$RUNS/text-gpu" --quiet
kill "$SAMPLER" 2>/dev/null; wait "$SAMPLER" 2>/dev/null
# 5. the smoke run on this machine's CPU (one thread per model, as the preset says)
step smoke-cpu 120 30 -- "${CLI[@]}" run --preset smoke ${SMOKE_CFG:+--config "$SMOKE_CFG"} --no-tracking --device cpu --out "$RUNS/smoke-cpu" --quiet

# 6. if time is left: the vectorized trainer on all of this machine's cores
step bench-cpu-all 90 30 -- "${CLI[@]}" bench --models "$BENCH_MODELS" --device cpu --threads "$(nproc)" --json "$OUT_DIR/logs/bench-cpu-all-result.json"

"$PY" "$SCRIPT_DIR/gpu_check_time.py" --summarize "$RUNS" "$OUT_DIR/logs" 2>&1 | tee -a "$SUMMARY"
note ""
note "total $(( $(date +%s) - START )) s; exit $STATUS"
rm -rf "$WORK"
exit $STATUS
