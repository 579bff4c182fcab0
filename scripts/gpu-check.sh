#!/usr/bin/env bash
# The GPU check in one command (issue 40), on a machine with CUDA; sized for at most 8 minutes on one H100:
#   1. the `gpu`-marked tests (tests/test_gpu.py): every algorithm x path for one round on CUDA with the
#      state asserted on the device and no host sync in the training steps, CPU-vs-CUDA agreement in
#      float64, keyed draws independent of the chunking, vmap evaluation of BatchNorm models, the resume
#      of a killed run, two processes on one GPU (gloo; NCCL needs two GPUs, skipped by count) and the
#      one-line error for more NCCL processes than GPUs, deterministic kernels for AdaptiveAvgPool2d models;
#   2. python -m benchmarks.speed --suite device --device cuda: ResNet-18 (GroupNorm, BatchNorm), the
#      shallow ResNet (Adam), DenseNet-121, the dropout CNN, FedAvg's CNN and the MLP, images/s and peak
#      memory on both paths, the vectorized path with the cohort stacked by device memory (the
#      device_chunk lever, FEDFORGET_CHUNK=device) and the faster path with the optimiser's multi-tensor
#      step (foreach_optimizer, FEDFORGET_FOREACH=on), neither yet measured on a GPU;
#   3. the compile levers (FEDFORGET_COMPILE=on, =cudagraphs: not yet measured on a GPU) on the workloads
#      bound by kernel launches, launch-bound first, in the time the 8 minutes leave (written workload by
#      workload to compile/device_speed.json/.md; a workload the limit stops is named, not hidden);
#   4. python -m benchmarks.gpu_reproducibility: what is bit for bit (reruns, paths, 1 vs 2 processes).
# Results (the tests' log, device_speed.json/.md, compile/, reproducibility.json/.md) go to
# benchmarks/results/gpu/ (or the folder given).
#
#   bash scripts/gpu-check.sh [OUT]            the check (exits non-zero if a test failed; the benchmark runs anyway)
#   bash scripts/gpu-check.sh --smoke OUT      without CUDA: the tier collected and skipped, the benchmark on
#                                              the CPU at tiny sizes (tests/test_benchmark.py runs this in CI)
#
# Python: the project's .venv when there is one, else the machine's python3 (a GPU machine's own torch).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
smoke=0
if [ "${1:-}" = "--smoke" ]; then
    smoke=1
    shift
fi
out="${1:-benchmarks/results/gpu}"
if [ -x .venv/bin/python ]; then
    python=.venv/bin/python
else
    python="${PYTHON:-python3}"
fi
mkdir -p "$out"
export PYTHONUNBUFFERED=1
start=$(date +%s)
if [ "$smoke" = 1 ]; then
    "$python" -m pytest -q -p no:cacheprovider -m gpu tests/test_gpu.py 2>&1 | tee "$out/gpu_tests.log"
    tests=${PIPESTATUS[0]}
    "$python" -m benchmarks.speed --suite device --device cpu --quick --repeats 1 --levers device_chunk,foreach_optimizer \
        --out "$out"
    bench=$?
    "$python" -m benchmarks.speed --suite device --device cpu --quick --repeats 1 --device-workloads cnn_fedavg \
        --levers compile --out "$out/compile" || bench=$?
else
    "$python" -m pytest -q -p no:cacheprovider -m gpu -rs tests/test_gpu.py 2>&1 | tee "$out/gpu_tests.log"
    tests=${PIPESTATUS[0]}
    "$python" -m benchmarks.speed --suite device --device cuda --repeats 3 --levers device_chunk,foreach_optimizer \
        --out "$out"
    bench=$?
    # what is left of 8 minutes, less the reproducibility step's (145 s on an H200) and a margin
    left=$(( 480 - ($(date +%s) - start) - 180 ))
    if [ "$left" -ge 60 ]; then
        timeout "$left" "$python" -m benchmarks.speed --suite device --device cuda --repeats 3 \
            --device-workloads cnn_fedavg,dropout_cnn,resnet_shallow_adam,resnet18_gn \
            --levers compile,compile_cudagraphs --out "$out/compile"
        status=$?
        if [ "$status" = 124 ]; then
            echo "gpu-check: the compile levers reached their ${left} s; compile/device_speed.md holds the workloads done"
        elif [ "$status" != 0 ]; then
            bench=$status
        fi
    else
        echo "gpu-check: no time left for the compile levers (${left} s after the benchmark)"
    fi
    "$python" -m benchmarks.gpu_reproducibility --out "$out" || bench=$?
fi
echo "gpu-check: tests exit $tests, benchmark exit $bench, $(( $(date +%s) - start )) s; results in $out"
# pytest's 5 is "no tests ran" (all skipped, as without CUDA): not a failure of the check
if [ "$tests" != 0 ] && [ "$tests" != 5 ]; then
    exit "$tests"
fi
exit "$bench"
