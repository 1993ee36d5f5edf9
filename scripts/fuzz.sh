#!/usr/bin/env bash
# Runs every fuzz target in fuzz/ (cargo-fuzz, libFuzzer) for a bounded
# time each: `scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]` (default 30 s,
# every target). Needs a nightly toolchain and cargo-fuzz; it installs both
# when it can, and otherwise skips loudly (exit 0) — unless
# CORDON_FUZZ_REQUIRE=1, where that is a failure. The seed corpora in
# fuzz/corpus/ are read, never written: new inputs go to target/fuzz-corpus/.
# A crash fails the script and names the input; make it a regression test.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-30}
shift || true
targets=("$@")
[ "${#targets[@]}" -gt 0 ] || targets=(protocol config spec settle shell tail)

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

# The host's build script builds the policy components it embeds with the
# toolchain that builds it: nightly needs the component target too.
rustup target add --toolchain nightly wasm32-wasip2 >/dev/null 2>&1 ||
    skip "nightly has no wasm32-wasip2 target, and it could not be added"
cd fuzz
log=$(mktemp)
trap 'rm -f "$log"' EXIT
for target in "${targets[@]}"; do
    corpus="../target/fuzz-corpus/$target"
    mkdir -p "$corpus"
    echo "fuzz: $target for ${seconds}s"
    status=0
    cargo +nightly fuzz run "$target" "$corpus" "corpus/$target" -- \
        -max_total_time="$seconds" -rss_limit_mb=4096 -timeout=20 -print_final_stats=1 \
        >"$log" 2>&1 || status=$?
    grep -E "stat::number_of_executed_units|Done [0-9]+ runs|SUMMARY|Test unit written|panicked" "$log" || true
    if [ "$status" -ne 0 ]; then
        tail -40 "$log" >&2
        echo "fuzz: $target FAILED (exit $status); the crashing input is in fuzz/artifacts/$target/" >&2
        exit 1
    fi
done
echo "fuzz: every target ran ${seconds}s without a crash"
