#!/usr/bin/env bash
# The whole loop on a fresh CPU-only machine, no model hub needed (docs/training.md):
#   a tiny random model built here -> held-out baseline -> a few GRPO steps with eval -> the report.
# Each step starts its own embedded env server (--env_url local: CPU device, the shipped small tasks).
#   bash scripts/demo.sh                 # RUN=runs/demo STEPS=4 PYTHON=python by default
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python}
RUN=${RUN:-runs/demo}
STEPS=${STEPS:-4}
LEVELS=(1 2 3)
ENV_ARGS="--max-turns 2 --stats-interval-s 0"

rm -rf "$RUN/baseline" "$RUN/grpo"  # this demo's own folders: start clean (no resume, no appended rollouts)
"$PY" scripts/make_tiny_model.py "$RUN/tiny-model"

# the untrained model on the held-out tasks: same prompts, feedback, turns and sampling as training's eval
"$PY" baseline_eval.py --env_url local --local_env_args "$ENV_ARGS" --levels "${LEVELS[@]}" \
  --policy transformers --model "$RUN/tiny-model" --device cpu --dtype float32 --max_tokens 64 \
  --samples 2 --out "$RUN/baseline" --no_progress

"$PY" grpo_kernel.py --model_name_or_path "$RUN/tiny-model" --env_url local --local_env_args "$ENV_ARGS" \
  --levels "${LEVELS[@]}" --output_dir "$RUN/grpo" --max_steps "$STEPS" --num_generations 2 \
  --per_device_train_batch_size 2 --per_device_eval_batch_size 2 --max_completion_length 64 \
  --eval_strategy steps --eval_steps 2 --logging_steps 1 --save_steps 2 --report_to none \
  --use_cpu --dtype float32

"$PY" report.py "$RUN/grpo" --baseline "$RUN/baseline/summary.json"
echo "open $RUN/grpo/report.html"
