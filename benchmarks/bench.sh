#!/bin/sh
# `make bench`: set up benchmarks/.venv (agentsession from this checkout with its server
# extra, plus the peers of benchmarks/requirements.txt), then run the benchmark.
# Arguments go to run.py (e.g. --quick). The environment is rebuilt only when this file,
# requirements.txt or pyproject.toml changed since the last set-up (a stamp file holds
# their checksum), so a second run starts measuring at once.
set -eu
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
VENV=benchmarks/.venv
STAMP="$VENV/.installed"
WANT="$(cat benchmarks/bench.sh benchmarks/requirements.txt pyproject.toml | cksum)"
if [ ! -x "$VENV/bin/python" ] || [ ! -f "$STAMP" ] || [ "$(cat "$STAMP")" != "$WANT" ]; then
    echo "setting up $VENV (agentsession + peers) ..." >&2
    [ -x "$VENV/bin/python" ] || "$PYTHON" -m venv "$VENV"
    "$VENV/bin/python" -m pip install --quiet --upgrade pip
    "$VENV/bin/python" -m pip install --quiet -e '.[server]' -r benchmarks/requirements.txt
    echo "$WANT" > "$STAMP"
fi
exec "$VENV/bin/python" benchmarks/run.py "$@"
