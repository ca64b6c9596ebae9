# The two quick-start commands: `make demo` and `make test`. Both create .venv on first use.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: demo test fuzz lint bench clean

$(STAMP): pyproject.toml requirements-dev.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -r requirements-dev.txt
	$(PY) -m pip install -q -e '.[dev]'
	touch $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/streamplan demo

# Everything, slow tests included: the packaging test builds the wheel and installs it into a
# fresh virtual environment (needs the package index), the fuzz tests run a few hundred inputs.
# -rs prints why each skipped test was skipped (e.g. no browser for the report's tests).
test: $(STAMP)
	OMP_NUM_THREADS=1 HF_HUB_OFFLINE=1 $(PY) -m pytest -n 2 --dist loadfile -rs

# Thousands of fuzzed inputs and random graphs, for hunting bugs rather than for CI.
fuzz: $(STAMP)
	OMP_NUM_THREADS=1 HF_HUB_OFFLINE=1 STREAMPLAN_HYPOTHESIS=stress $(PY) -m pytest -n 2 tests/fuzz

# The figures in BENCHMARKS.md (several minutes on 2 cores; GPU validation is separate:
# bench/gpu_validate.py on a machine with CUDA).
bench: $(STAMP)
	OMP_NUM_THREADS=1 HF_HUB_OFFLINE=1 $(PY) bench/capture_time.py
	OMP_NUM_THREADS=1 HF_HUB_OFFLINE=1 $(PY) bench/calibrate_ios.py
	$(PY) bench/schedule_scale.py
	$(PY) bench/simulate_scale.py
	$(PY) bench/memory_scale.py
	OMP_NUM_THREADS=1 $(PY) bench/capture_cache.py
	$(PY) bench/allocator_scale.py
	OMP_NUM_THREADS=1 HF_HUB_OFFLINE=1 $(PY) bench/memory_quality.py
	OMP_NUM_THREADS=1 $(PY) bench/zoo_peaks.py
	OMP_NUM_THREADS=1 HF_HUB_OFFLINE=1 $(PY) bench/comm_peaks.py --model bench/models/llama.py:llama_8b_short
	OMP_NUM_THREADS=1 HF_HUB_OFFLINE=1 $(PY) bench/knob_plans.py --model bench/models/llama.py:llama_8b_short
	OMP_NUM_THREADS=1 HF_HUB_OFFLINE=1 PYTHONPATH=tests $(PY) bench/gloo_ranks.py
	OMP_NUM_THREADS=1 $(PY) bench/cpu_runtime.py --models squeezenet inception_v3 randwire nasnet_a --repeat 5
	OMP_NUM_THREADS=1 HF_HUB_OFFLINE=1 $(PY) bench/cpu_allocations.py
	OMP_NUM_THREADS=1 HF_HUB_OFFLINE=1 $(PY) bench/training_capture.py
	OMP_NUM_THREADS=1 HF_HUB_OFFLINE=1 $(PY) bench/training_peaks.py --check
	OMP_NUM_THREADS=1 HF_HUB_OFFLINE=1 $(PY) bench/fusion_orders.py
	OMP_NUM_THREADS=1 HF_HUB_OFFLINE=1 $(PY) bench/calibrate_ios.py --fusion first
	OMP_NUM_THREADS=1 HF_HUB_OFFLINE=1 $(PY) bench/fusion_vs_inductor.py
	OMP_NUM_THREADS=1 HF_HUB_OFFLINE=1 $(PY) bench/fit_llama.py --batches 1 4 --devices h100 h200 --memtracker
	OMP_NUM_THREADS=1 HF_HUB_OFFLINE=1 $(PY) bench/fit_table.py --devices h100 h200 l4

lint: $(STAMP)
	$(VENV)/bin/ruff check src tests bench
	$(VENV)/bin/ruff format --check src tests bench

clean:
	rm -rf $(VENV) build *.egg-info src/*.egg-info
