# The two set-up commands of the README: `make bench` and `make test` (minutes each).
# The full tiers: `make bench-all` (every variant, budgets, offload, the depth sweep) and `make test-all`
# (every test, the big fuzz, on both torch versions: what .ci/run calls).
# `make test-newest`: the library's tests on the newest torch pip offers here (no torch_xla for it).
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
NEWEST_TORCH ?= 2.13.0
VENV_NEWEST  ?= .venv-newest
PY_NEWEST    := $(VENV_NEWEST)/bin/python
STAMP_NEWEST := $(VENV_NEWEST)/.installed-torch-$(NEWEST_TORCH)

.PHONY: bench bench-all bench-cpu test test-all test-newest test-newest-all install clean

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --disable-pip-version-check -q -e '.[xla,test,bench,vision]'
	touch $(STAMP)

install: $(STAMP)

# A second environment: torch $(NEWEST_TORCH) (CPU wheel), the test and bench extras, no torch_xla, no
# vision extra (timm's torchvision from PyPI does not load beside torch+cpu: tests/test_vision.py skips).
$(STAMP_NEWEST): pyproject.toml
	test -x $(PY_NEWEST) || $(PYTHON) -m venv $(VENV_NEWEST)
	$(PY_NEWEST) -m pip install --disable-pip-version-check -q -e '.[test,bench]' 'torch==$(NEWEST_TORCH)'
	touch $(STAMP_NEWEST)

# The headline: the default GPT on XLA:CPU, no checkpointing against torch_xla's checkpoint, torch SAC,
# three presets and one memory budget, then the same GPT under torch.compile(backend="openxla") (none,
# megatron_selective, full, budget 0.3; bench/compiled.py). Memory: one process per variant; step times:
# one interleaved process for all. 4 min 43 s at load 1.5 on the 2 cores here (11-15 min at load 5-10).
# TPU: see docs/benchmarks.md.
bench: $(STAMP)
	PJRT_DEVICE=$${PJRT_DEVICE:-CPU} $(PY) bench/memory.py --headline --device xla --json bench/results/headline.json --plot bench/results/headline.png

# The full sweep: every preset, memory_budget 0.1-0.9, offload, 15 rounds; then the depth sweep
# (2-16 layers of a small GPT), the compiled-XLA rows (torch.compile(backend="openxla"), fenced) and
# the Llama-3-70B-shaped estimate. About 35 minutes here.
bench-all: $(STAMP)
	PJRT_DEVICE=$${PJRT_DEVICE:-CPU} $(PY) bench/memory.py --device xla --json bench/results/memory.json --plot bench/results/memory.png
	PJRT_DEVICE=$${PJRT_DEVICE:-CPU} $(PY) bench/depth.py --json bench/results/depth.json --plot bench/results/depth.png
	PJRT_DEVICE=$${PJRT_DEVICE:-CPU} $(PY) bench/openxla.py --json bench/results/openxla.json
	$(PY) bench/estimate_70b.py --json bench/results/estimate_70b.json

# The same memory benchmark on CPU eager (torch SAC runs there: the eager step-time targets).
bench-cpu: $(STAMP)
	$(PY) bench/memory.py --device cpu --json bench/results/memory_cpu.json --plot bench/results/memory_cpu.png

# Extra pytest arguments, e.g. PYTEST_ARGS="--durations=30". pytest exit 5 (nothing collected) fails
# make like any other non-zero exit: a tier that selects nothing proves nothing.
PYTEST_ARGS ?=
# Inductor's on-disk cache, private to this checkout: the default /tmp/torchinductor_$USER is shared by
# every run on the machine, and two runs writing it at once left truncated .so files ("file too short").
export TORCHINDUCTOR_CACHE_DIR ?= $(CURDIR)/.inductor-cache

# The fast tier (`-m "not slow"`, fuzz profile `fast`): every feature once, at most 6 minutes here.
# XLA tests run on XLA:CPU.
test: $(STAMP)
	PJRT_DEVICE=$${PJRT_DEVICE:-CPU} XLA_CKPT_FUZZ=$${XLA_CKPT_FUZZ:-fast} $(PY) -m pytest -q -ra -m "not slow" $(PYTEST_ARGS) tests

# Everything (slow tier included, fuzz profile `full`) on torch 2.9 + torch_xla, then on the newest torch.
# One after the other: run at once they took 64.6 min from a fresh clone here (the XLA tier compiles on
# both cores and took 58.6 min of it, against 29.5 min alone in the last CI run).
test-all: $(STAMP)
	PJRT_DEVICE=$${PJRT_DEVICE:-CPU} XLA_CKPT_FUZZ=full $(PY) -m pytest -q -ra $(PYTEST_ARGS) tests
	$(MAKE) test-newest-all

# The library's tests on the newest torch: XLA-only tests are deselected (torch_xla exists only
# for torch 2.9), and so is the XLA case of the `device` fixture. test-newest: the fast tier;
# test-newest-all: every tier.
test-newest: $(STAMP_NEWEST)
	TORCHINDUCTOR_CACHE_DIR=$(CURDIR)/.inductor-cache-newest XLA_CKPT_FUZZ=$${XLA_CKPT_FUZZ:-fast} $(PY_NEWEST) -m pytest -q -ra -m "not xla and not slow" $(PYTEST_ARGS) tests

# Its own inductor cache: two torch versions' compiled kernels do not share one cache.
test-newest-all: $(STAMP_NEWEST)
	TORCHINDUCTOR_CACHE_DIR=$(CURDIR)/.inductor-cache-newest XLA_CKPT_FUZZ=full $(PY_NEWEST) -m pytest -q -ra -m "not xla" $(PYTEST_ARGS) tests

clean:
	rm -rf $(VENV) $(VENV_NEWEST) *.egg-info .pytest_cache
