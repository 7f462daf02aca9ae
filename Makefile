# arena-gym: `make run` (main job on built-in defaults), `make test` (whole test suite) and
# `make lint` (ruff, mypy on arena_gym and estimator, import layering).
# Both create .venv with pip and install what they need; nothing else is required.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
OUT ?= results/compare
export OMP_NUM_THREADS := 1
export WANDB_ERROR_REPORTING := false

.PHONY: run test test-slow lint bench regenerate clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

# Core install: numpy, pandas, gymnasium, scipy, highspy, matplotlib, tqdm (no torch).
$(VENV)/.core-installed: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e .
	touch $@

# Everything: torch==2.13.0 (CPU build), stable-baselines3, sb3-contrib, wandb, pytest, hypothesis, ray.
$(VENV)/.all-installed: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e ".[all,ray]"
	touch $@ $(VENV)/.core-installed

# The policies are compare's default list (arena_gym/harness/cli/compare.py); POLICIES=a,b,... overrides it.
run: $(VENV)/.core-installed
	$(BIN)/arena-gym compare $(if $(POLICIES),--policies $(POLICIES) )--cluster testbed-64 --out $(OUT) --replace

# Every committed table that follows from a policy run, at the current code (needs ../shared/data; hours on two
# cores): the make-run leaderboard, every committed evaluation (frozen suites excepted), the three reproduction
# modes, then the generated blocks of the README and docs.
regenerate: $(VENV)/.all-installed
	$(MAKE) run
	$(BIN)/python scripts/regenerate_results.py --workers $(TEST_WORKERS)
	$(BIN)/python benchmarks/reproduce_arena.py --workers $(TEST_WORKERS)
	$(BIN)/python benchmarks/reproduce_arena.py --workers $(TEST_WORKERS) --measured
	$(BIN)/python benchmarks/reproduce_arena.py --workers $(TEST_WORKERS) --event-driven
	$(BIN)/python scripts/update_docs_tables.py

# TEST_WORKERS processes (pytest-xdist); every test that spawns processes runs in one of them.
TEST_WORKERS ?= 2

test: $(VENV)/.all-installed
	WANDB_MODE=disabled $(BIN)/python -m pytest -q -m "not gpu and not slow" -p no:cacheprovider -n $(TEST_WORKERS) --dist loadgroup

# Tests marked slow (an install of the package into a fresh virtual environment).
test-slow: $(VENV)/.all-installed
	WANDB_MODE=disabled $(BIN)/python -m pytest -q -m "slow and not gpu" -p no:cacheprovider

# ruff check and ruff format --check (settings in pyproject.toml), mypy (arena_gym, estimator),
# lint-imports (the layering contracts in pyproject.toml).
lint: $(VENV)/.all-installed
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/lint-imports

bench: $(VENV)/.all-installed
	for b in benchmarks/bench_*.py; do echo "== $$b"; $(BIN)/python $$b || exit 1; done

clean:
	rm -rf $(VENV) results .pytest_cache
