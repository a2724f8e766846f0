# The two commands a newcomer needs: `make demo` and `make test`. Both set up
# their own virtual environment in .venv on first use. `make test-all` (CI) adds the
# slow tests; PYTEST_ARGS passes options through (e.g. PYTEST_ARGS="-x -k keys").
# Both test targets first install the database servers the tests need when they are
# missing (test-servers: as root with apt-get; otherwise their tests skip, named at the end).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test test-all test-servers lint generate check-generated bench bench-stores bench-growth bench-search bench-inspector bench-encryption setup clean

setup: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/agentsession demo

# PostgreSQL, MariaDB and Redis for the store tests (scripts/install-test-servers.sh):
# installed from Debian packages when missing, as root with apt-get; else it says how.
test-servers:
	@bash scripts/install-test-servers.sh

# Durations measured on the project's 2-core machine (README, Development). Both run on
# two pytest-xdist workers (each starts its own database servers).
test: $(STAMP) test-servers
	@echo "running the fast suite in 2 processes (about 7-8 minutes on 2 cores; make test-all adds the slow tests, 16-35 minutes)"
	$(BIN)/python -m pytest -q -n 2 -m "not slow" $(PYTEST_ARGS)

# Two pytest-xdist workers (each starts its own database servers): the slow tests are
# long single processes (the fuzz run, kill -9 cycles), so two of them keep both cores busy.
test-all: $(STAMP) test-servers
	@echo "running every test, the slow ones too, in 2 processes (16-35 minutes on 2 cores, by the machine)"
	$(BIN)/python -m pytest -q -n 2 --durations=20 $(PYTEST_ARGS)

# Its own environment (benchmarks/.venv: agentsession + the peers), not $(STAMP)'s.
# Runs (h) and (f) on slower disks too, with benchmarks/fsyncdelay.c built by the C
# compiler found into benchmarks/.build/ (skipped, saying why, without one; run.py
# --disks). Ends with the cost-versus-size section (g), the workloads of bench-growth.
bench:
	PYTHON=$(PYTHON) sh benchmarks/bench.sh $(BENCH_ARGS)

# Every store side by side, then serve on PostgreSQL and MariaDB: new server connections
# per 1,000 appends, and 2 workers against 1 (benchmarks/pools.py).
bench-stores: $(STAMP)
	mkdir -p benchmarks/results
	$(BIN)/python benchmarks/stores.py --json benchmarks/results/stores.json

# Cost versus size alone (benchmarks/growth.py: run steps, get_run, restore, tool lookups,
# listings at 10 / 1,000 / 20,000 rows; the sweep before/after): per-call time at each
# size, factor largest vs smallest; exits 1 when a factor is over the 2x goal.
bench-growth: $(STAMP)
	mkdir -p benchmarks/results
	$(BIN)/python benchmarks/growth.py --json benchmarks/results/growth.json $(BENCH_ARGS)

# Search (benchmarks/search.py): a search over a user's 10,000 and 100,000 messages vs a
# last-20 read, and an append with vs without the search index, on SQLite and
# PostgreSQL; exits 1 when a goal (10x, 2x growth, 1.3x) is missed. Then metadata
# filters (benchmarks/metafilter.py): count_sessions with a metadata filter at 1,000 and
# 100,000 sessions vs a session read; exits 1 when a count grows more than 2x.
bench-search: $(STAMP)
	mkdir -p benchmarks/results
	$(BIN)/python benchmarks/search.py --json benchmarks/results/search.json $(BENCH_ARGS)
	$(BIN)/python benchmarks/metafilter.py --json benchmarks/results/metafilter.json

# The inspector and the change feed (benchmarks/inspector.py, also workload (i) of make
# bench): its pages against their JSON calls at two history sizes, append p50 with 100
# SSE subscribers against none, an event's delay; exits 1 when a goal is missed.
bench-inspector: $(STAMP)
	mkdir -p benchmarks/results
	$(BIN)/python benchmarks/inspector.py --json benchmarks/results/inspector.json $(BENCH_ARGS)

# Encryption at rest (benchmarks/encryption.py): append, last-20 read and restore on
# SQLite with a keyring vs without, in one run; exits 1 when a ratio is over its goal
# (1.2x, 1.3x, 1.3x).
bench-encryption: $(STAMP)
	mkdir -p benchmarks/results
	$(BIN)/python benchmarks/encryption.py --json benchmarks/results/encryption.json $(BENCH_ARGS)

# ruff check and ruff format --check over every Python file of the repository; mypy
# --strict over src/agentsession (its settings are [tool.mypy] in pyproject.toml).
lint: $(STAMP) check-generated
	$(BIN)/ruff check src tests scripts benchmarks examples
	$(BIN)/ruff format --check src tests scripts benchmarks examples
	$(BIN)/mypy

# src/agentsession/clientgen.py, the plain client flows and both clients' methods, is written from
# the table of operations (agentsession/operations.py) by scripts/generate_client.py.
generate: $(STAMP)
	$(BIN)/python scripts/generate_client.py

check-generated: $(STAMP)
	$(BIN)/python scripts/generate_client.py --check

clean:
	rm -rf $(VENV) .demo .pytest_cache
