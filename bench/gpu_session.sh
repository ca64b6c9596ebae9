#!/usr/bin/env bash
# Everything a session lent a GPU should run, as one prepared command for the device tool:
#   run(command="bash bench/gpu_session.sh", timeout_s=600)
# The device image has python3 with torch, transformers, pytest and hypothesis but not this
# package: it runs from src/ on PYTHONPATH (nothing to install). Results land in $OUT:
#   versions.txt, cuda_tests.log, gpu_codegen.log, gpu_codegen.json, gpu_codegen_training.{log,json},
#   calibrate.log, calibrated_<gpu>.json, gpu_validate.log, gpu_validate.json, measured_<gpu>.json
# gpu_validate predicts with the profile `streamplan calibrate --on cuda` measured first
# (CALIBRATE=0 skips it and predicts with the built-in profile of the GPU found).
# gpu_validate.log ends with the budget schedules run for real: measured max_memory_allocated
# against each budget (1.0x and 1.5x the sequential peak, inputs and params counted).
# Then: put the tables from gpu_validate.log in BENCHMARKS.md (date, GPU, this command) and
# `streamplan memory MODEL --device h100 --measured measured_h100.json` uses the table.
set -uo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
# The budget rows need OR-Tools (CP-SAT), which the device image lacks: carry its wheels in .whl/
# (see the device notes: `pip download --no-deps --only-binary=:all: --python-version 3.12 ...
# -d .whl ortools==9.15.6755 immutabledict`, then name .whl in the run's carry). Without them
# those rows are reported as skipped and everything else runs.
if ! python3 -c "import ortools" 2>/dev/null && ls .whl/*.whl >/dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/site .whl/*.whl && export PYTHONPATH="$PYTHONPATH:/tmp/site"
fi
OUT="${OUT:-/tmp/streamplan_gpu}"
mkdir -p "$OUT"
BUDGET_S="${BUDGET_S:-240}"

python3 - <<'PY' 2>&1 | tee "$OUT/versions.txt"
import sys, torch
print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda)
print("gpu", torch.cuda.get_device_name() if torch.cuda.is_available() else "NONE")
import importlib.util
print("scipy (calibrate's fit needs it)", "yes" if importlib.util.find_spec("scipy") else "NO")
PY

# the CUDA-only tests (real streams, events, CUDA graphs) and the CUDA host-loop checks
timeout 120 python3 -m pytest -q -p no:cacheprovider \
    tests/runtime/test_cuda_host.py tests/runtime/test_launch_log.py -k "real_cuda or sound" \
    2>&1 | tee "$OUT/cuda_tests.log"

# generated modules (streamplan codegen) on CUDA streams: outputs vs eager, max_memory_allocated
# vs the prediction in their header
timeout 150 python3 bench/gpu_codegen.py --budget-s 100 --out "$OUT/gpu_codegen.json" \
    2>&1 | tee "$OUT/gpu_codegen.log"
# generated training steps (codegen --train) on CUDA streams: one step vs eager's
# loss.backward() + torch.optim on the GPU, step time, max_memory_allocated
timeout 90 python3 bench/gpu_codegen_training.py --budget-s 60 --out "$OUT/gpu_codegen_training.json" \
    2>&1 | tee "$OUT/gpu_codegen_training.log"

gpu=$(python3 -c "from streamplan.app.run import profile_for as p; print(p(\"cuda\"))")
profile=()
if [ "${CALIBRATE:-1}" = 1 ]; then
    # the device measured: op kinds by size, launches, events, CUDA graphs, co-running streams
    timeout 240 python3 -m streamplan.cli calibrate --on cuda -o "$OUT/calibrated_${gpu}.json" --force \
        2>&1 | tee "$OUT/calibrate.log"
    [ -s "$OUT/calibrated_${gpu}.json" ] && profile=(--profile "$OUT/calibrated_${gpu}.json")
fi
timeout $((BUDGET_S + 120)) python3 bench/gpu_validate.py --budget-s "$BUDGET_S" "${profile[@]}" \
    --out "$OUT/gpu_validate.json" --measured-out "$OUT/measured_${gpu}.json" \
    2>&1 | tee "$OUT/gpu_validate.log"
