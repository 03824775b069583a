#!/usr/bin/env bash
# Measure built-in step-time curves on an H200 (issue 3, item 4): an 8B dense shape and the
# small MoE shape, eager and CUDA-graph modes, tokens 1..512, KV context 1024 per request.
# One prepared script of at most 8 minutes (each run is capped at 110 s).
#   usage: benchmarks/profile_h200.sh [OUT_DIR]     (default hwprofiles/data)
# Then commit OUT_DIR/h200-*-measured.csv as built-ins (their provenance names the GPU,
# driver, CUDA and torch versions, date, repeats and statistic).
set -euo pipefail
OUT=${1:-hwprofiles/data}
PY=${PYTHON:-python}
mkdir -p "$OUT"
"$PY" -c "import torch; assert torch.cuda.is_available(), 'no CUDA device'; print(torch.cuda.get_device_name(0), torch.__version__)"
run() {  # NAME MODEL MODE
  timeout 110 "$PY" -m simulator.cli profile --model "$2" --device cuda --dtype bfloat16 --mode "$3" \
    --tokens 1:512 --context 1024 --repeats 20 --warmup 3 --quiet --out "$OUT/$1.csv" \
    && echo "ok   $1" || echo "FAIL $1 (status $?)"
}
run h200-llama3-8b-eager-measured     llama3-8b eager
run h200-llama3-8b-cudagraph-measured llama3-8b cudagraph
run h200-moe-small-eager-measured     moe-small eager
run h200-moe-small-cudagraph-measured moe-small cudagraph
