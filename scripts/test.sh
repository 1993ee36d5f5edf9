#!/usr/bin/env bash
# The whole test suite: formatting, lints, unit tests, component tests and
# the end-to-end suites (real bwrap, real wasmtime, real components).
# On Linux CI the bwrap, Landlock, cgroup, Python-client, MCP-SDK and
# JavaScript-component suites must run: a missing or broken runner (or
# python3, the mcp package, or node) fails them instead of skipping.
set -euo pipefail
cd "$(dirname "$0")/.."
# step COMMAND...: runs it and says how long it took (CI's budget is read
# from these lines).
step() {
    local started=$SECONDS
    "$@"
    echo "test.sh: $(( SECONDS - started )) s: $*" >&2
}
step scripts/setup.sh
if [ "${CI:-}" = true ] && [ "$(uname -s)" = Linux ]; then
    export CORDON_E2E_REQUIRE_BWRAP=1 CORDON_E2E_REQUIRE_NAMESPACES=1 CORDON_E2E_REQUIRE_LANDLOCK=1 CORDON_E2E_REQUIRE_PYTHON=1 CORDON_E2E_REQUIRE_JS=1
    # Runs get their own cgroup there (root, cgroup v1): the limits suites must run.
    export CORDON_E2E_REQUIRE_CGROUPS=1
    # setup.sh installs the MCP Python SDK: `cordon mcp`'s e2e must run.
    export CORDON_E2E_REQUIRE_MCP=1
    # setup.sh installs the CNCF registry: the registry suite must run.
    export CORDON_E2E_REQUIRE_REGISTRY=1
    # With the kernel's audit on, root reads Landlock's denial records: a
    # Landlock run's facts must name what the kernel refused.
    if [ "$(id -u)" -eq 0 ] && python3 scripts/audit-on.py; then
        export CORDON_E2E_REQUIRE_KERNEL_DENIALS=1
    else
        echo "test.sh: WARNING: the kernel's audit is not on: denials are inferred from text" >&2
    fi
    # setup.sh installs the Codex CLI and Claude Code from npm: the real-agent
    # test must run, unless the packages could not be installed (said there).
    if [ -x target/agents/node_modules/.bin/codex ] && [ -x target/agents/node_modules/.bin/claude ]; then
        export CORDON_E2E_REQUIRE_AGENTS=1
    else
        echo "test.sh: WARNING: no Codex CLI and Claude Code in target/agents: the real-agent test SKIPS" >&2
    fi
fi
step cargo fmt --all --check
# The policy component written in JavaScript (componentize-js from npm).
step components/js-policy/build.sh
export CORDON_JS_POLICY="$PWD/target/components/js-policy.wasm"
step cargo test --workspace
# A child started inside a cgroup v2 directory from its first instruction
# (the static release build's spawn, and glibc < 2.39's) against a real
# cgroup2 hierarchy: where the machine's is v1, one is mounted for these
# tests alone, in a mount namespace of their own.
if [ "${CI:-}" = true ] && [ "$(uname -s)" = Linux ] && [ "$(id -u)" -eq 0 ]; then
    step unshare --mount --propagation private sh -c 'mkdir -p /tmp/cordon-cgroup2 &&
        mount -t cgroup2 none /tmp/cordon-cgroup2 &&
        CORDON_TEST_REQUIRE_CGROUP2=1 exec cargo test --quiet -p cordon --lib process::spawn::raw'
fi
# The same e2e suites where agents really run: as a non-root user, and in a
# simulated restricted Kubernetes pod (root only: it drops to a user of its
# own; skipped loudly elsewhere).
step scripts/profiles.sh
step cargo clippy --workspace --all-targets -- -D warnings
# macOS is compiled, not assumed: the host type-checks for aarch64-apple-darwin.
if [ "$(uname -s)" = Linux ]; then
    step scripts/check-macos.sh
fi
# The crate packages (the default component reproducibly prebuilt into it), and the
# completions and manual pages generate from the CLI definition.
step scripts/package.sh
# The deployment examples: Kubernetes manifests against the API schema,
# systemd units verified and socket-activated.
step scripts/check-examples.sh
# One static release binary, built the way scripts/release.sh builds
# releases (signed sums verified with openssl, a confined run), and the
# container image made from it, pushed to a loopback registry and run by
# podman as non-root under its default seccomp profile. The aarch64 target
# under qemu-user and the byte-for-byte rebuild from another directory are
# the release script's (`scripts/release.sh --reproduce`): CI's time does not
# hold a second cold release build.
if [ "$(uname -s)" = Linux ] && [ "$(uname -m)" = x86_64 ] && [ "$(id -u)" -eq 0 ]; then
    step scripts/release.sh --sign-key tests/fixtures/keys/signer.pem x86_64-unknown-linux-musl
    step scripts/image.sh
else
    echo "test.sh: SKIPPED the static release build and the container image: they need root on x86_64 Linux" >&2
fi
# Every fuzz target for a fixed number of inputs from a fixed seed (a
# nightly toolchain and cargo-fuzz are installed where they can be; skipped
# loudly where they cannot). Longer, open-ended runs: scripts/fuzz.sh
# SECONDS. The shell reader's target runs 20,000:
# open-ended runs still meet brush-parser shapes that backtrack or allocate
# without bound (CHANGELOG, Known issues) — a component's deadline and
# memory limit end such a run, failing it closed.
CORDON_FUZZ_RUNS=200000 step scripts/fuzz.sh 0 protocol config spec confine settle tail
CORDON_FUZZ_RUNS=20000 step scripts/fuzz.sh 0 shell
