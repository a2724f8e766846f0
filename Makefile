# The two commands a newcomer needs: `make demo` and `make test`. Both set up
# their own virtual environment in .venv on first use.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test lint bench bench-stores setup clean

setup: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/agentsession demo

test: $(STAMP)
	$(BIN)/python -m pytest -q

# Its own environment (benchmarks/.venv: agentsession + the peers), not $(STAMP)'s.
bench:
	PYTHON=$(PYTHON) sh benchmarks/bench.sh $(BENCH_ARGS)

bench-stores: $(STAMP)
	mkdir -p benchmarks/results
	$(BIN)/python benchmarks/stores.py --json benchmarks/results/stores.json

# mypy --strict over src/agentsession; its settings are [tool.mypy] in pyproject.toml.
lint: $(STAMP)
	$(BIN)/ruff check src tests
	$(BIN)/mypy

clean:
	rm -rf $(VENV) .demo .pytest_cache
