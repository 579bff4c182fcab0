#!/usr/bin/env bash
# Set up the environment (once), lint and format check (ruff), type-check (mypy) and run the test suite.
#   bash scripts/test.sh          the whole suite (what CI runs)
#   bash scripts/test.sh --fast   without the end-to-end tests (marker e2e: real dvc repro, training
#                                 subprocesses), for the edit loop
# Any other argument goes to pytest: bash scripts/test.sh --fast tests/unit/test_claims.py -k rule
# Two pytest-xdist workers of one thread each (tests/conftest.py), one a core of the 2-core machines,
# unless -n is given (-n 0: one process).
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
pytest_args=()
workers=(-n 2)
for arg in "$@"; do
    case "$arg" in -n|-n*|--numprocesses*) workers=() ;; esac
    if [ "$arg" = "--fast" ]; then
        pytest_args+=(-m "not e2e")
    else
        pytest_args+=("$arg")
    fi
done
ruff check .
ruff format --check .
mypy
python -m pytest -q ${workers[@]+"${workers[@]}"} ${pytest_args[@]+"${pytest_args[@]}"}
