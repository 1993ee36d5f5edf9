#!/usr/bin/env bash
# Runs every fuzz target in fuzz/ (cargo-fuzz, libFuzzer) for a bounded
# time each: `scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]` (default 30 s,
# every target). Needs a nightly toolchain and cargo-fuzz; it installs both
# when it can, and otherwise skips loudly (exit 0) — unless
# CORDON_FUZZ_REQUIRE=1, where that is a failure. The seed corpora in
# fuzz/corpus/ are read, never written: new inputs go to target/fuzz-corpus/.
# A crash fails the script and names the input; make it a regression test.
#
# CORDON_FUZZ_RUNS=N (the suite's way) runs each target for N inputs from a
# fixed seed and a fresh corpus instead: the same inputs every time for the
# same build. A checkout at another path builds another binary (its paths
# are in it, and libFuzzer's comparison tables follow the code's
# addresses), and so makes other inputs: CI's clone found a shell-reader
# input that this machine's checkout never made.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-30}
shift || true
targets=("$@")
[ "${#targets[@]}" -gt 0 ] || targets=(protocol config spec confine settle shell tail)

skip() {
    if [ "${CORDON_FUZZ_REQUIRE:-}" = 1 ]; then
        echo "fuzz: $1 (CORDON_FUZZ_REQUIRE=1)" >&2
        exit 1
    fi
    echo "SKIPPED fuzz: $1" >&2
    exit 0
}

if ! rustup run nightly rustc --version >/dev/null 2>&1; then
    rustup toolchain install nightly --profile minimal >/dev/null 2>&1 ||
        skip "no nightly toolchain, and none could be installed"
fi
if ! cargo fuzz --version >/dev/null 2>&1; then
    cargo install cargo-fuzz --locked >/dev/null 2>&1 ||
        skip "cargo-fuzz is not installed, and could not be"
fi

cd fuzz
# No sanitizer: the targets drive safe Rust, where a bug is a panic or a
# broken assertion libFuzzer catches by itself, and an AddressSanitizer
# build of wasmtime would cost CI most of an hour. Built once, then run.
flags=(--sanitizer none)
cargo +nightly fuzz build "${flags[@]}" 2>&1 | tail -3
log=$(mktemp)
trap 'rm -f "$log"' EXIT
for target in "${targets[@]}"; do
    if [ -n "${CORDON_FUZZ_RUNS:-}" ]; then
        corpus=$(mktemp -d)
        bound=(-runs="$CORDON_FUZZ_RUNS" -seed=1)
        echo "fuzz: $target for $CORDON_FUZZ_RUNS inputs (seed 1)"
    else
        corpus="../target/fuzz-corpus/$target"
        mkdir -p "$corpus"
        bound=(-max_total_time="$seconds")
        echo "fuzz: $target for ${seconds}s"
    fi
    status=0
    cargo +nightly fuzz run "${flags[@]}" "$target" "$corpus" "corpus/$target" -- \
        "${bound[@]}" -rss_limit_mb=4096 -timeout=20 -print_final_stats=1 \
        >"$log" 2>&1 || status=$?
    [ -z "${CORDON_FUZZ_RUNS:-}" ] || rm -rf "$corpus"
    grep -E "stat::number_of_executed_units|Done [0-9]+ runs|SUMMARY|Test unit written|panicked" "$log" || true
    if [ "$status" -ne 0 ]; then
        tail -40 "$log" >&2
        echo "fuzz: $target FAILED (exit $status); the crashing input is in fuzz/artifacts/$target/" >&2
        exit 1
    fi
done
echo "fuzz: every target ran without a crash"
