# The two set-up commands of the README: `make bench` and `make test`.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: bench bench-cpu test install clean

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --disable-pip-version-check -q -e '.[xla,test,bench]'
	touch $(STAMP)

install: $(STAMP)

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

clean:
	rm -rf $(VENV) *.egg-info .pytest_cache
