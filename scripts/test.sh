#!/usr/bin/env bash
# Set up the environment (once) and run the test suite.
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
python -m pytest -q "$@"
