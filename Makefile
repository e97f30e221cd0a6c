# Each target creates the virtual environment first if it is missing (needs only Python 3.10+ and make).
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
INSTALLED := $(VENV)/.installed

.PHONY: demo test lint bench fuzz realcode

$(INSTALLED): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[dev]"
	touch $(INSTALLED)

demo: $(INSTALLED)
	$(PY) -m examples.demo

lint: $(INSTALLED)
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .

test: lint
	$(PY) -m pytest

# A long differential fuzz run, with how many kernels exercised each feature: make fuzz SEED=7 COUNT=5000
SEED ?= 0
COUNT ?= 2000
fuzz: $(INSTALLED)
	$(PY) -m tests.fuzz --seed $(SEED) --count $(COUNT)

bench: $(INSTALLED)
	$(PY) -m pip install --quiet -e ".[bench]"
	$(PY) -m bench.run

# The real-code suite (tests/realcode): Newton (pinned by the realcode extra), warp/examples and warp/tests through
# --check, wp_rewrite and wp-rewrite, and Newton's soft contacts end to end. See docs/realcode.md.
realcode: $(INSTALLED)
	$(PY) -m pip install --quiet -e ".[dev,realcode]"
	$(PY) -m pytest tests/realcode --durations=5
