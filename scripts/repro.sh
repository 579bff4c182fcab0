#!/usr/bin/env bash
# Set up the environment (once) and run the whole pipeline with DVC (arguments go to `dvc repro`).
# Without internet, point FEDFORGET_DATA_MIRROR at a dataset mirror; beside ../shared/datasets one is
# built on first use (scripts/mirror.sh).
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
source scripts/mirror.sh
dvc repro "$@"
