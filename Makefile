# The two set-up commands of the README: `make bench` and `make test` (minutes each).
# The full tiers: `make bench-all` (every variant, budgets, offload, the depth sweep) and `make test-all`
# (every test and the big fuzz on torch 2.9 + torch_xla, then the fast and compiled tests on the newest
# torch: what .ci/run calls).
# `make test-newest`: the library's tests on the newest torch pip offers here (no torch_xla for it).
# `make lint`: ruff and mypy (rules in pyproject.toml), the first step of CI.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
# The newest torch CI tests: torch 2.15.0, the newest release, on PyPI only as a CUDA build (2.15.0+cu132
# with nvidia-* and triton: 5.4 GB in a venv; no CPU wheel there; its CUDA libraries load lazily, the
# tests run on the CPU). In CI from a fresh clone here its environment installs in about 3 min and its
# tier (`test-newest-all`) takes 5.0 + 2.8 min. `make test-newest NEWEST_TORCH=2.13.0` runs the CPU
# wheel (1.3 GB), 2.14.1 is on this disk (also a CUDA build).
# pip on these machines is capped at torch<=2.14.1 by a constraints file in its configuration:
# PIP_CONSTRAINT=/dev/null lifts the cap for this one install (the local wheel folders stay in use).
NEWEST_TORCH ?= 2.15.0
VENV_NEWEST  ?= .venv-newest
PY_NEWEST    := $(VENV_NEWEST)/bin/python
STAMP_NEWEST := $(VENV_NEWEST)/.installed-torch-$(NEWEST_TORCH)

.PHONY: bench bench-all bench-cpu bench-publish lint test test-all test-newest test-newest-all install clean

$(STAMP): pyproject.toml xla_ckpt/_base/version.py
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --disable-pip-version-check -q -e '.[xla,test,bench,vision,lint]'
	touch $(STAMP)

install: $(STAMP)

# torch_xla 2.9's scan under SPMD shards each gradient like its input with JAX's shard_as (its `pallas` extra:
# jax and jaxlib 0.7.1; and torchax). A small environment layered on $(VENV) (whose site-packages a .pth adds)
# holds them: test-all runs the FSDPv2 scan test there, while $(VENV), like a user without them, checks the
# refusal. Measured: 21-33 s to install here (jax 0.7.1, jaxlib 0.7.1, torchax 0.0.13; nothing else downloaded).
VENV_JAX  ?= .venv-jax
PY_JAX    := $(VENV_JAX)/bin/python
STAMP_JAX := $(VENV_JAX)/.installed
$(STAMP_JAX): $(STAMP)
	test -x $(PY_JAX) || $(PY) -m venv $(VENV_JAX)
	$(PY) -c "import os, sysconfig; p = sysconfig.get_paths(); rel = os.path.relpath(p['purelib'], p['data']); \
	open(os.path.join('$(VENV_JAX)', rel, 'xla_ckpt_base.pth'), 'w').write('import site; site.addsitedir(%r)\n' % p['purelib'])"
	$(PY_JAX) -m pip install --disable-pip-version-check -q 'jax==0.7.1' 'jaxlib==0.7.1' 'torchax==0.0.13'
	touch $(STAMP_JAX)

# A second environment: torch $(NEWEST_TORCH), the test, bench and ao (torchao) extras, no torch_xla, no
# vision extra (torchvision pins one torch release each; tests/integration/hf/test_vision.py skips), and
# the newest transformers (with the kernels package it requires): an older one already in the venv is upgraded.
$(STAMP_NEWEST): pyproject.toml xla_ckpt/_base/version.py
	test -x $(PY_NEWEST) || $(PYTHON) -m venv $(VENV_NEWEST)
	PIP_CONSTRAINT=/dev/null $(PY_NEWEST) -m pip install --disable-pip-version-check -q -e '.[test,bench,ao]' 'torch==$(NEWEST_TORCH)'
	PIP_CONSTRAINT=/dev/null $(PY_NEWEST) -m pip install --disable-pip-version-check -q --upgrade transformers 'torch==$(NEWEST_TORCH)'
	touch $(STAMP_NEWEST)

# Benchmarks write to bench/out/ (ignored by git): `git status` stays clean after them. The README's and
# docs' figures come from the committed copies in bench/results/; `make bench-publish` copies the latest
# outputs there, on purpose, when a run should become the published figures.
BENCH_OUT ?= bench/out

# The headline (the README's table): the default GPT on XLA:CPU, no checkpointing against torch_xla's
# checkpoint, torch SAC, three presets and one memory budget; the same GPT under
# torch.compile(backend="openxla"); the GPT with dropout 0.1. One process per variant for memory, one
# interleaved process for all step times. TPU: see docs/benchmarks.md.
bench: $(STAMP)
	PJRT_DEVICE=$${PJRT_DEVICE:-CPU} $(PY) bench/memory.py --headline --device xla --json $(BENCH_OUT)/headline.json --plot $(BENCH_OUT)/headline.png

# The full sweep: every preset, memory_budget 0.1-0.9, offload, 15 rounds; then the depth sweep
# (2-16 layers of a small GPT), the compiled-XLA rows (torch.compile(backend="openxla"), fenced),
# HF Llama scanned vs unrolled at 4/16/32 layers and the Llama-3-70B-shaped estimate.
bench-all: $(STAMP)
	PJRT_DEVICE=$${PJRT_DEVICE:-CPU} $(PY) bench/memory.py --device xla --json $(BENCH_OUT)/memory.json --plot $(BENCH_OUT)/memory.png
	PJRT_DEVICE=$${PJRT_DEVICE:-CPU} $(PY) bench/depth.py --json $(BENCH_OUT)/depth.json --plot $(BENCH_OUT)/depth.png
	PJRT_DEVICE=$${PJRT_DEVICE:-CPU} $(PY) bench/openxla.py --json $(BENCH_OUT)/openxla.json
	PJRT_DEVICE=$${PJRT_DEVICE:-CPU} $(PY) bench/scan_hf.py --d-model 64 --seq 64 --batch 2 --vocab 256 --json $(BENCH_OUT)/scan_hf.json
	$(PY) bench/estimate_70b.py --json $(BENCH_OUT)/estimate_70b.json

# The same memory benchmark on CPU eager (torch SAC runs there: the eager step-time targets).
bench-cpu: $(STAMP)
	$(PY) bench/memory.py --device cpu --json $(BENCH_OUT)/memory_cpu.json --plot $(BENCH_OUT)/memory_cpu.png

# Publish: copy what the benchmarks wrote to bench/out/ over the committed results (then commit them).
bench-publish:
	test -d $(BENCH_OUT) || { echo "nothing in $(BENCH_OUT)/: run make bench (or bench-all, bench-cpu) first"; exit 1; }
	find $(BENCH_OUT) -maxdepth 1 \( -name '*.json' -o -name '*.png' \) -exec cp -v {} bench/results/ \;

# The linter and the type checker (rules in pyproject.toml): ruff on the library, tests and benchmarks;
# mypy on the library, reading torch's and torch_xla's types from this venv. CI runs it first.
lint: $(STAMP)
	$(PY) -m ruff check xla_ckpt tests bench
	$(PY) -m mypy

# Extra pytest arguments, e.g. PYTEST_ARGS="--durations=30". pytest exit 5 (nothing collected) fails
# make like any other non-zero exit: a tier that selects nothing proves nothing.
PYTEST_ARGS ?=
# Inductor's on-disk cache, private to this checkout: the default /tmp/torchinductor_$USER is shared by
# every run on the machine, and two runs writing it at once left truncated .so files ("file too short").
export TORCHINDUCTOR_CACHE_DIR ?= $(CURDIR)/.inductor-cache

# Test processes: pytest-xdist workers, one per core, at most 4 (each imports torch_xla and compiles its
# own XLA graphs; conftest.py gives each its own inductor cache). `make test TEST_WORKERS=0`: one process.
TEST_WORKERS ?= $(shell $(PYTHON) -c "import os; n = min(4, len(os.sched_getaffinity(0)) if hasattr(os, 'sched_getaffinity') else os.cpu_count() or 1); print(n if n > 1 else 0)")
XDIST = -n $(TEST_WORKERS)

# The fast tier (`-m "not slow"`, fuzz profile `fast`): every feature once. From a fresh clone here (2 cores, two
# workers), nothing else running: 214 s of tests (398 s at a time the machine ran about 1.7x slower).
test: $(STAMP)
	PJRT_DEVICE=$${PJRT_DEVICE:-CPU} XLA_CKPT_FUZZ=$${XLA_CKPT_FUZZ:-fast} $(PY) -m pytest -q -ra $(XDIST) -m "not slow" $(PYTEST_ARGS) tests

# Everything (slow tier included, fuzz profile `full`) on torch 2.9 + torch_xla but the `newest_only`
# cases, then the newest-torch tier (test-newest-all).
# One after the other: the XLA tier compiles on both cores, and run at once the two took 64.6 min from a
# fresh clone here (58.6 of it the XLA tier's), longer than in turn.
# CI time, from a fresh clone here (`.ci/run`, installs included, two xdist workers): 35-45 min in all over four
# runs; the latest: unit 5.5 min, integration 18.0, fuzz + peers + regressions 4.1, the torch 2.15 tiers 3.2 + 2.5.
# The torch 2.9 tier runs as three pytest processes (unit; integration; fuzz, peers and regressions):
# one process for all of it segfaults inside torch_xla.sync() after about 1,400 tests and 35 minutes
# (in a plain 2-layer block's reference step in tests/unit/_policy/test_budget.py, which passes alone and
# after the XLA scan and compile tests), so no process carries XLA's runtime state that long.
# The three cost about 20 s more (torch_xla's import and the first compile per process).
TEST_ALL_ENV = PJRT_DEVICE=$${PJRT_DEVICE:-CPU} XLA_CKPT_FUZZ=full
TEST_ALL_ARGS = -q -ra $(XDIST) -m "not newest_only" $(PYTEST_ARGS)
test-all: $(STAMP) $(STAMP_JAX)
	$(TEST_ALL_ENV) $(PY) -m pytest $(TEST_ALL_ARGS) tests/unit
	$(TEST_ALL_ENV) XLA_CKPT_JAX_PYTHON=$(abspath $(PY_JAX)) $(PY) -m pytest $(TEST_ALL_ARGS) tests/integration
	$(TEST_ALL_ENV) $(PY) -m pytest $(TEST_ALL_ARGS) tests/fuzz tests/peers tests/regressions
	$(MAKE) test-newest-all

# The library's tests on the newest torch: XLA-only tests are deselected (torch_xla exists only
# for torch 2.9), and so is the XLA case of the `device` fixture. Its own inductor cache: two torch
# versions' compiled kernels do not share one cache.
NEWEST_ENV = TORCHINDUCTOR_CACHE_DIR=$(CURDIR)/.inductor-cache-newest
test-newest: $(STAMP_NEWEST)
	$(NEWEST_ENV) XLA_CKPT_FUZZ=$${XLA_CKPT_FUZZ:-fast} $(PY_NEWEST) -m pytest -q -ra $(XDIST) -m "not xla and not slow" $(PYTEST_ARGS) tests

# CI's newest-torch tier: the fast tier with the full fuzz profile (CPU programs are cheap: the whole
# fuzz file costs about a minute of CPU), then the slow tests marked `newest` (tests/integration/compile/test_compiled.py's:
# inductor codegen, the partitioner comparisons) and `newest_only` (the compiled HF table's cases CI runs
# here instead of on torch 2.9: each architecture once, the presets in turn; torch 2.9 compiles each
# architecture under the next preset), the part of the library that changes most between torch versions. The
# rest of the slow tier (the eager HF table, the estimate matrix, budget sweeps, the end-to-end
# benchmarks, long runs, the wheel) runs in test-all on torch 2.9 only; every feature is covered on both
# versions by the fast tier.
test-newest-all: $(STAMP_NEWEST)
	$(NEWEST_ENV) XLA_CKPT_FUZZ=full $(PY_NEWEST) -m pytest -q -ra $(XDIST) -m "not xla and not slow" $(PYTEST_ARGS) tests
	$(NEWEST_ENV) XLA_CKPT_FUZZ=full $(PY_NEWEST) -m pytest -q -ra $(XDIST) -m "not xla and slow and (newest or newest_only)" $(PYTEST_ARGS) tests

clean:
	rm -rf $(VENV) $(VENV_NEWEST) $(VENV_JAX) *.egg-info .pytest_cache
