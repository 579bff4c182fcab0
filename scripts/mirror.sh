# Sourced by repro.sh and .ci/run: without internet the download stage reads the dataset mirror named by
# FEDFORGET_DATA_MIRROR; where none is set and ../shared/datasets is beside the clone, build one in .mirror
# on first use (python ../shared/datasets/make_mirror.py) and point there.
if [ -z "${FEDFORGET_DATA_MIRROR:-}" ] && [ -f ../shared/datasets/make_mirror.py ]; then
    export FEDFORGET_DATA_MIRROR="$PWD/.mirror"
    if [ ! -f "$FEDFORGET_DATA_MIRROR/cifar10.npz" ]; then
        echo "building the dataset mirror in $FEDFORGET_DATA_MIRROR from ../shared/datasets"
        python ../shared/datasets/make_mirror.py "$FEDFORGET_DATA_MIRROR" >/dev/null
    fi
fi
