#!/usr/bin/env bash
# Builds the JavaScript policy component with componentize-js from npm:
#   components/js-policy/build.sh [OUT.wasm]   (default: target/components/js-policy.wasm)
# Installs the pinned toolchain (package-lock.json) on first use and skips
# the build when the output is newer than every input.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
out="${1:-$root/target/components/js-policy.wasm}"
mkdir -p "$(dirname "$out")"
cd "$here"
if [ ! -d node_modules/@bytecodealliance/componentize-js ] || [ package-lock.json -nt node_modules ]; then
    npm ci --no-audit --no-fund --loglevel=error
    touch node_modules
fi
newest=$(find src build.mjs package-lock.json "$root/wit" -type f -newer "$out" 2>/dev/null | head -1 || true)
if [ -f "$out" ] && [ -z "$newest" ]; then
    echo "js-policy: $out is up to date"
    exit 0
fi
node build.mjs "$out"
