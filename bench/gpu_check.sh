#!/usr/bin/env bash
# The GPU check of issue 18 (item 6), for a machine with a CUDA GPU (nothing here has run on one yet).
#
#   bench/gpu_check.sh [devices|suite|bench|all]      results in $OUT (default: gpu-results/)
#
#   devices  the device-parametrised tests on cpu and cuda:0 (tests/runtime/test_on_devices.py: exact gradients that
#            follow the order the atomics took under contention, the float64 ticket lock and 128-bit
#            compare-and-swap under contention, streams, forward+backward captured in a CUDA graph and replayed
#            with the uncaptured gradients, no host round trip), and the other device-level tests (a few minutes)
#   suite    the whole suite with every device-parametrised test also on cuda:0 (as CI, plus the GPU)
#   bench    the benchmark on CUDA (1e4 to 1e6 threads; bench/RESULTS.md keeps the CPU numbers)
#   all      devices, then bench, then suite (default)
#
# Each stage writes its output to files under $OUT as it goes, so that a stage stopped by a time limit still
# leaves what it did. Run from the repository root after `make .venv/.installed`.
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-gpu-results}
PY=${PY:-.venv/bin/python}
STAGE=${1:-all}
mkdir -p "$OUT"
export WP_REWRITE_DEVICES=cpu,cuda:0

{ nvidia-smi; "$PY" -c "import warp as wp; wp.init(); print(wp.get_cuda_devices())"; } > "$OUT/machine.txt" 2>&1

run_devices() {
    "$PY" -m pytest tests/runtime/test_on_devices.py tests/runtime/test_checks.py tests/runtime/test_exact_atomics.py -p no:cacheprovider \
        -q -rs --junitxml="$OUT/devices.xml" > "$OUT/devices.txt" 2>&1
    echo "devices: exit $?" >> "$OUT/summary.txt"
}

run_suite() {
    "$PY" -m pytest tests -p no:cacheprovider -q -rs --durations=20 --junitxml="$OUT/suite.xml" \
        > "$OUT/suite.txt" 2>&1
    echo "suite: exit $?" >> "$OUT/summary.txt"
}

run_bench() {
    "$PY" -m bench.run --device cuda --sizes 1e4 1e5 1e6 --repeats 21 --out "$OUT/results-cuda.json" \
        --plot "$OUT/bench-cuda.png" > "$OUT/bench.txt" 2>&1
    echo "bench: exit $?" >> "$OUT/summary.txt"
}

case "$STAGE" in
    devices) run_devices ;;
    suite) run_suite ;;
    bench) run_bench ;;
    all) run_devices; run_bench; run_suite ;;
    *) echo "usage: $0 [devices|suite|bench|all]" >&2; exit 2 ;;
esac
cat "$OUT/summary.txt"
