# Each target creates the virtual environment first if it is missing (needs only Python 3.10+ and make).
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
INSTALLED := $(VENV)/.installed

.PHONY: demo test lint typecheck fix bench fuzz realcode

$(INSTALLED): pyproject.toml setup.py
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[dev]"
	touch $(INSTALLED)

demo: $(INSTALLED)
	$(PY) -m examples.demo

lint: $(INSTALLED)
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .

# mypy on the host modules ([tool.mypy] in pyproject.toml). rewrite/ and passes/ are installed as warp_rewrite and
# warp_rewrite.passes through an import hook that mypy cannot follow, so it reads them through a tree of links,
# rebuilt on each run; the report names the repository's own paths.
TYPECHECK := $(VENV)/typecheck
typecheck: $(INSTALLED)
	@rm -rf $(TYPECHECK) && mkdir -p $(TYPECHECK)/warp_rewrite
	@ln -s $(CURDIR)/rewrite/*.py $(CURDIR)/rewrite/cli $(CURDIR)/rewrite/runtime $(TYPECHECK)/warp_rewrite/
	@ln -s $(CURDIR)/passes $(TYPECHECK)/warp_rewrite/passes
	@$(PY) -m mypy -p warp_rewrite -p bench > $(TYPECHECK)/report; status=$$?; \
	sed -e 's|^$(TYPECHECK)/warp_rewrite/passes/|passes/|' -e 's|^$(TYPECHECK)/warp_rewrite/|rewrite/|' \
	$(TYPECHECK)/report; exit $$status

# Fixes what ruff can fix, then formats.
fix: $(INSTALLED)
	$(PY) -m ruff check --fix .
	$(PY) -m ruff format .

# Two pytest processes, one a core (CI has two): the fuzz slice, with the CUDA compile of the modules it generates,
# beside the rest of the suite; its report follows the other's, and the status fails if either fails.
FUZZ_LOG := $(VENV)/fuzz-tests.log
test: lint typecheck
	@$(PY) -m pytest tests/fuzz tests/runtime/test_cuda_compile.py > $(FUZZ_LOG) 2>&1 & fuzz=$$!; \
	$(PY) -m pytest --ignore=tests/fuzz; rest=$$?; \
	wait $$fuzz; fuzzed=$$?; echo "--- the fuzz slice (tests/fuzz):"; cat $(FUZZ_LOG); \
	test $$rest -eq 0 && test $$fuzzed -eq 0

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
