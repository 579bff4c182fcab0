#!/usr/bin/env bash
# Set up the environment (once) and run the whole pipeline with DVC.
# Without internet, point FEDFORGET_DATA_MIRROR at a dataset mirror; beside ../shared/datasets one is
# built on first use (python ../shared/datasets/make_mirror.py).
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
if [ -z "${FEDFORGET_DATA_MIRROR:-}" ] && [ -f ../shared/datasets/make_mirror.py ]; then
    export FEDFORGET_DATA_MIRROR="$PWD/.mirror"
    if [ ! -f "$FEDFORGET_DATA_MIRROR/cifar10.npz" ]; then
        echo "building the dataset mirror in $FEDFORGET_DATA_MIRROR from ../shared/datasets"
        python ../shared/datasets/make_mirror.py "$FEDFORGET_DATA_MIRROR" >/dev/null
    fi
fi
dvc repro "$@"
