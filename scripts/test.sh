#!/usr/bin/env bash
# Set up the environment (once), lint (ruff), type-check (mypy) and run the test suite.
#   bash scripts/test.sh          the whole suite (what CI runs)
#   bash scripts/test.sh --fast   without the end-to-end tests (marker e2e: real dvc repro, training
#                                 subprocesses), for the edit loop
# Any other argument goes to pytest: bash scripts/test.sh --fast tests/test_claims.py -k rule
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
pytest_args=()
for arg in "$@"; do
    if [ "$arg" = "--fast" ]; then
        pytest_args+=(-m "not e2e")
    else
        pytest_args+=("$arg")
    fi
done
ruff check .
mypy
python -m pytest -q ${pytest_args[@]+"${pytest_args[@]}"}
