#!/usr/bin/env bash
# The judge on a CUDA box: hand-written CUDA and Triton kernels through `kernel-env eval`,
# then one kernel evaluated 10 times (speedup spread). Usage: scripts/h200_judge_check.sh KB_DIR OUT_DIR
set -u
KB=${1:?kernelbench dir}; OUT=${2:?out dir}
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1 KERNEL_ENV_CACHE=${KERNEL_ENV_CACHE:-/tmp/kernel_env_cache}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv | tee "$OUT/gpu.txt"
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" | tee -a "$OUT/gpu.txt"
ev() {  # task file label
  local t0=$(date +%s.%N)
  python3 -m kernel_env.cli eval --device cuda --kernelbench-dir "$KB" --task-id "$1" --code "$2" --json > "$OUT/$3.json" 2> "$OUT/$3.log"
  local rc=$?
  python3 - "$OUT/$3.json" "$3" "$rc" "$t0" <<'PY'
import json, sys, time
p, label, rc, t0 = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
try:
    v = json.load(open(p))
except Exception:
    print(f"{label:34s} rc={rc} NO VERDICT"); sys.exit()
f = lambda x, s="{:.4f}": "-" if x is None else s.format(x)
print(f"{label:34s} {v['stage']:11s} correct={v['correct']!s:5s} speedup={f(v['speedup'], '{:.3f}')} "
      f"t_new={f(v['t_new_ms'])} t_ref={f(v['t_ref_ms'])} t_min={f(v['t_min_ms'])} roof={f(v['roofline_frac'], '{:.2f}')} "
      f"{v['bound']} wall={time.time() - t0:.1f}s timings={v['timings']} | {v['feedback'][:160]!r}")
PY
}
# the precompiled header first, as a server has it (a one-shot `kernel-env eval` builds none of its
# own); then each CUDA submission is built by its first evaluation (build_s = a cold build through
# the judge, precompiled header and light prelude included: candidate/fast_build.py)
python3 -m kernel_env.judge.prebuild "$KERNEL_ENV_CACHE" cuda > "$OUT/prebuild.log" 2>&1 || echo "no precompiled header (see $OUT/prebuild.log)"
for pair in "level1/19_ReLU:19_ReLU" "level1/23_Softmax:23_Softmax" \
            "level1/1_Square_matrix_multiplication_:1_Square_matrix_multiplication_" "level1/40_LayerNorm:40_LayerNorm"; do
  tid=${pair%%:*}; stem=${pair##*:}
  for kind in cuda triton; do ev "$tid" "examples/submissions/${stem}_${kind}.py" "${stem}_${kind}"; done
done
for i in $(seq 1 ${REPEATS:-10}); do ev level1/23_Softmax examples/submissions/23_Softmax_cuda.py "repeat_softmax_cuda_$i"; done
for i in $(seq 1 ${REPEATS:-10}); do ev level1/19_ReLU examples/submissions/19_ReLU_triton.py "repeat_relu_triton_$i"; done
python3 - "$OUT" <<'PY'
import glob, json, sys
for name in ("repeat_softmax_cuda", "repeat_relu_triton"):
    s = [json.load(open(p))["speedup"] for p in sorted(glob.glob(f"{sys.argv[1]}/{name}_*.json"))]
    s = [x for x in s if x]
    if s:
        print(f"{name}: n={len(s)} min={min(s):.4f} max={max(s):.4f} max/min={max(s)/min(s):.4f}")
PY
