#!/usr/bin/env bash
# Installs what cordon needs to build and test, idempotently:
#   * the Rust toolchain pinned in rust-toolchain.toml, with the wasm32-wasip2
#     target the policy components are built for;
#   * bubblewrap, the Linux sandbox runner, python3 for the Python client's
#     tests, and node/npm for the JavaScript policy component (needs root or
#     sudo for apt-get);
#   * podman, skopeo, runc and a static bash for the container image's
#     test;
#   * the official MCP Python SDK (`mcp`, pinned), the client `cordon mcp`'s
#     end-to-end test drives;
#   * two real agent programs from npm, pinned, into target/agents: the Codex
#     CLI and Claude Code, which tests/agents drives against a stub model (a
#     failed install is said loudly and their test then skips loudly).
set -euo pipefail
cd "$(dirname "$0")/.."

pinned=$(sed -n 's/^channel *= *"\(.*\)"/\1/p' rust-toolchain.toml)
host_triple=$(rustc +stable -vV 2>/dev/null | sed -n 's/^host: //p' || true)

if ! grep -q "^${pinned}" <<<"$(rustup toolchain list)"; then
    stable_version=$(rustc +stable --version 2>/dev/null | awk '{print $2}' || true)
    toolchains="${RUSTUP_HOME:-$HOME/.rustup}/toolchains"
    if [ "$stable_version" = "$pinned" ] && [ -n "$host_triple" ]; then
        # This machine's stable toolchain is the pinned version: use it under
        # the pinned name instead of downloading it again.
        ln -s "stable-${host_triple}" "${toolchains}/${pinned}-${host_triple}"
    else
        rustup toolchain install "$pinned" --profile minimal --component rustfmt,clippy
    fi
fi
rustup target add --toolchain "$pinned" wasm32-wasip2 >/dev/null
# The macOS type-check (scripts/check-macos.sh) needs the target's std.
if [ "$(uname -s)" = Linux ]; then
    rustup target add --toolchain "$pinned" aarch64-apple-darwin >/dev/null
fi
rustup component add --toolchain "$pinned" rustfmt clippy >/dev/null

missing=()
if [ "$(uname -s)" = Linux ] && ! command -v bwrap >/dev/null 2>&1; then
    missing+=(bubblewrap)
fi
if ! command -v python3 >/dev/null 2>&1; then
    missing+=(python3)
fi
if ! command -v npm >/dev/null 2>&1; then
    missing+=(nodejs npm)
fi
# The OCI registry (CNCF distribution) the registry suite starts on loopback.
if [ "$(uname -s)" = Linux ] && ! command -v docker-registry >/dev/null 2>&1; then
    missing+=(docker-registry)
fi
# The restricted-pod profile's seccomp helper (tests/profiles/restricted-pod.py)
# runs on the system's python3 with libseccomp's binding.
if [ "$(uname -s)" = Linux ] && [ -x /usr/bin/python3 ] &&
    ! /usr/bin/python3 -c 'import seccomp' >/dev/null 2>&1; then
    missing+=(python3-seccomp)
fi
# The container image's test (scripts/image.sh): a static bash for the
# image, and Debian's container runtime and registry client to run it.
if [ "$(uname -s)" = Linux ]; then
    for tool in podman skopeo runc; do
        command -v "$tool" >/dev/null 2>&1 || missing+=("$tool")
    done
    [ -x /bin/bash-static ] || missing+=(bash-static)
    # The embedder test traces every exec of a program's process tree.
    command -v strace >/dev/null 2>&1 || missing+=(strace)
fi
if [ "${#missing[@]}" -gt 0 ]; then
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    $sudo apt-get update -qq
    $sudo apt-get install -y -qq "${missing[@]}"
fi

# The MCP client cordon did not write: the official Python SDK.
if ! python3 -c 'import mcp' >/dev/null 2>&1; then
    python3 -m pip install --quiet --disable-pip-version-check "mcp==2.3.0" 2>/dev/null ||
        python3 -m pip install --quiet --disable-pip-version-check --break-system-packages "mcp==2.3.0"
fi
# The Python client's wheel is built by the suite without a network
# (--no-build-isolation): the interpreter's setuptools needs `wheel`.
if ! python3 -c 'import wheel' >/dev/null 2>&1; then
    python3 -m pip install --quiet --disable-pip-version-check "wheel==0.45.1" 2>/dev/null ||
        python3 -m pip install --quiet --disable-pip-version-check --break-system-packages "wheel==0.45.1"
fi
# The profiles' users (scripts/profiles.sh) cannot reach a python3 under
# root's home: the system's python3 gets the SDK too.
if [ "$(uname -s)" = Linux ] && [ "$(id -u)" -eq 0 ] && [ -x /usr/bin/python3 ] &&
    ! /usr/bin/python3 -c 'import mcp' >/dev/null 2>&1; then
    /usr/bin/python3 -m pip install --quiet --disable-pip-version-check --root-user-action=ignore \
        --break-system-packages "mcp==2.3.0"
fi
if [ "$(uname -s)" = Linux ] && [ "$(id -u)" -eq 0 ] && [ -x /usr/bin/python3 ] &&
    ! /usr/bin/python3 -c 'import wheel' >/dev/null 2>&1; then
    /usr/bin/python3 -m pip install --quiet --disable-pip-version-check --root-user-action=ignore \
        --break-system-packages "wheel==0.45.1"
fi

# The Kubernetes API schema validator the examples are checked with
# (scripts/check-examples.sh), in a virtual environment of its own.
validator=target/tools/kubernetes
if ! [ -x "$validator/bin/kubernetes-validate" ]; then
    if ! { python3 -m venv "$validator" &&
        "$validator/bin/pip" install --quiet --disable-pip-version-check \
            "kubernetes-validate==1.37.0"; }; then
        rm -rf "$validator"
        echo "setup.sh: WARNING: could not install kubernetes-validate from PyPI;" \
            "the Kubernetes examples will not be checked" >&2
    fi
fi

# The TypeScript client's compiler and Node's types (clients/typescript,
# pinned by its package-lock.json): tests/all/typescript.rs runs its suite.
if ! [ -x clients/typescript/node_modules/.bin/tsc ]; then
    if ! (cd clients/typescript && npm ci --silent --no-audit --no-fund >/dev/null); then
        echo "setup.sh: WARNING: could not install the TypeScript client's packages from npm;" \
            "its suite will be SKIPPED" >&2
    fi
fi

# Real agents that mount `cordon mcp` (tests/agents): pinned, installed once.
agents=target/agents
codex_version=0.171.0
claude_version=2.1.197
if ! [ -x "$agents/node_modules/.bin/codex" ] ||
    ! grep -qF "$codex_version" <<<"$("$agents/node_modules/.bin/codex" --version 2>/dev/null)" ||
    ! [ -x "$agents/node_modules/.bin/claude" ] ||
    ! grep -qF "$claude_version" <<<"$("$agents/node_modules/.bin/claude" --version 2>/dev/null)"; then
    mkdir -p "$agents"
    [ -f "$agents/package.json" ] || echo '{"private": true}' >"$agents/package.json"
    if ! (cd "$agents" && npm install --silent --no-audit --no-fund --save-exact \
        "@openai/codex@$codex_version" "@anthropic-ai/claude-code@$claude_version" >/dev/null); then
        echo "setup.sh: WARNING: could not install the Codex CLI and Claude Code from npm;" \
            "the real-agent test (tests/agents) will be SKIPPED" >&2
    fi
fi
