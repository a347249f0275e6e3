# The two set-up commands of the README: `make bench` and `make test`.
# `make test-newest`: the library's tests on the newest torch pip offers here (no torch_xla for it).
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
NEWEST_TORCH ?= 2.13.0
VENV_NEWEST  ?= .venv-newest
PY_NEWEST    := $(VENV_NEWEST)/bin/python
STAMP_NEWEST := $(VENV_NEWEST)/.installed-torch-$(NEWEST_TORCH)

.PHONY: bench bench-cpu test test-newest install clean

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --disable-pip-version-check -q -e '.[xla,test,bench]'
	touch $(STAMP)

install: $(STAMP)

# A second environment: torch $(NEWEST_TORCH) (CPU wheel), the test and bench extras, no torch_xla.
$(STAMP_NEWEST): pyproject.toml
	test -x $(PY_NEWEST) || $(PYTHON) -m venv $(VENV_NEWEST)
	$(PY_NEWEST) -m pip install --disable-pip-version-check -q -e '.[test,bench]' 'torch==$(NEWEST_TORCH)'
	touch $(STAMP_NEWEST)

# The memory benchmark on XLA:CPU with its defaults (memory: one process per variant; step times:
# one interleaved process), then the depth sweep (2-16 layers of a small GPT). TPU: see README.
bench: $(STAMP)
	PJRT_DEVICE=$${PJRT_DEVICE:-CPU} $(PY) bench/memory.py --device xla --json bench/results/memory.json --plot bench/results/memory.png
	PJRT_DEVICE=$${PJRT_DEVICE:-CPU} $(PY) bench/depth.py --json bench/results/depth.json --plot bench/results/depth.png

# The same memory benchmark on CPU eager (torch SAC runs there: the eager step-time targets).
bench-cpu: $(STAMP)
	$(PY) bench/memory.py --device cpu --json bench/results/memory_cpu.json --plot bench/results/memory_cpu.png

# The whole test suite; XLA tests run on XLA:CPU.
test: $(STAMP)
	PJRT_DEVICE=$${PJRT_DEVICE:-CPU} $(PY) -m pytest -q -ra tests

# The library's tests on the newest torch: XLA-only tests are deselected (torch_xla exists only
# for torch 2.9), the XLA cases of device-parametrised tests skip.
test-newest: $(STAMP_NEWEST)
	$(PY_NEWEST) -m pytest -q -ra -m "not xla" tests

clean:
	rm -rf $(VENV) $(VENV_NEWEST) *.egg-info .pytest_cache
