#!/usr/bin/env bash
# Type-checks the host for macOS (aarch64-apple-darwin) on a Linux machine:
# the Seatbelt backend and every cfg(target_os = "macos") path compile, and
# nothing Linux-only leaks into a macOS build. A type-check never links, but
# build scripts of dependencies (wasmtime's, ring's) compile small C helpers
# with the target's C compiler; a stand-in answers their compiler detection
# (`-E`, cc-rs's
# family detection) with the host's preprocessor and only creates each `-o` output.
set -euo pipefail
cd "$(dirname "$0")/.."
target=aarch64-apple-darwin
if ! grep -qx "$target" <<<"$(rustup target list --installed)"; then
    if [ "${CI:-}" = true ]; then
        echo "check-macos: the $target target is not installed (scripts/setup.sh adds it)" >&2
        exit 1
    fi
    echo "SKIPPED check-macos: rustup target add $target first" >&2
    exit 0
fi
stand_in=$(mktemp -d)
trap 'rm -rf "$stand_in"' EXIT
cat >"$stand_in/cc" <<'SH'
#!/usr/bin/env bash
# A C compiler stand-in for a type-check: preprocess with the host's cc,
# otherwise only create the output file.
args=() out=""
# cc-rs takes a compiler that accepts `-?` for MSVC: this one does not.
[ "${1:-}" = "-?" ] && exit 1
while [ $# -gt 0 ]; do
    case "$1" in
        -arch|-isysroot|-target|--target) shift ;;
        -arch=*|-mmacosx-version-min=*|--target=*|-mcpu=*) ;;
        -o) out="$2"; shift ;;
        -o*) out="${1#-o}" ;;
        -E) preprocess=1; args+=("$1") ;;
        # cc-rs asks which family the compiler is by having it preprocess
        # this file: answer as the host's gcc would.
        *detect_compiler_family.c) preprocess=1; args+=(-E "$1") ;;
        *) args+=("$1") ;;
    esac
    shift
done
if [ -n "${preprocess:-}" ]; then
    exec cc "${args[@]}"
fi
[ -n "$out" ] && : >"$out"
exit 0
SH
chmod +x "$stand_in/cc"
export CC_aarch64_apple_darwin="$stand_in/cc" AR_aarch64_apple_darwin=ar
# The library and the binary with their unit tests, in one pass (the
# end-to-end suites drive Linux runners and stay Linux's).
cargo check --locked -p cordon -p cordon-launcher --target "$target" --lib --bins --profile test
echo "check-macos: cordon type-checks for $target"
