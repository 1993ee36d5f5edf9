#!/usr/bin/env bash
# Builds cordon's static release binaries:
#
#   scripts/release.sh [--sign-key KEY.pem] [--reproduce] [TARGET...]
#
# TARGET defaults to x86_64-unknown-linux-musl and aarch64-unknown-linux-musl:
# static executables (musl, no dynamic loader, no glibc version floor) that
# run on any current Linux of the architecture. Built with the pinned
# toolchain (rust-toolchain.toml) and zig as the C compiler and linker
# (cargo-zigbuild from crates.io, ziglang from PyPI, both pinned and
# installed into target/tools/ the first time).
#
# Into target/release-dist/: cordon-VERSION-TARGET and
# cordon-launcher-VERSION-TARGET (installed beside cordon as
# cordon-launcher) for each target,
# SHA256SUMS, and with --sign-key SHA256SUMS.sig — an ECDSA P-256 signature
# (the key scheme of cordon's registry and audit signatures) that
# `openssl dgst -sha256 -verify cordon.pub -signature SHA256SUMS.sig
# SHA256SUMS` checks; the script checks it that way, and the sums with
# `sha256sum -c`. Each binary is then run: natively where it is this
# machine's architecture (a confined run included), under qemu-user
# (Debian's qemu-user) elsewhere.
#
# Reproducible: the paths of this checkout, of cargo's home and of the
# target directory are remapped out of the binaries, and nothing else of
# the build machine goes in. --reproduce builds the first target a second
# time from a copy of the tracked sources in another directory, with its
# own target directory, and fails unless the bytes are the same.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

sign_key=""
reproduce=false
targets=()
while [ $# -gt 0 ]; do
    case "$1" in
    --sign-key) sign_key=$(realpath "$2"); shift 2 ;;
    --reproduce) reproduce=true; shift ;;
    -*) echo "release: unknown option $1" >&2; exit 64 ;;
    *) targets+=("$1"); shift ;;
    esac
done
[ "${#targets[@]}" -gt 0 ] || targets=(x86_64-unknown-linux-musl aarch64-unknown-linux-musl)

zig_version=0.15.2
zigbuild_version=0.24.1
tools=$root/target/tools
if ! [ -x "$tools/zig/bin/python" ] || ! grep -qxF "$zig_version" <<<"$("$tools/zig/bin/python" -m ziglang version 2>/dev/null)"; then
    python3 -m venv "$tools/zig"
    "$tools/zig/bin/pip" install --quiet --disable-pip-version-check "ziglang==$zig_version"
fi
# cargo-zigbuild runs `zig`: the one the ziglang package ships.
zig_bin=$("$tools/zig/bin/python" -c 'import ziglang, os; print(os.path.dirname(ziglang.__file__))')
export PATH="$zig_bin:$tools/cargo-zigbuild/bin:$PATH"
if ! grep -qF "$zigbuild_version" <<<"$(cargo-zigbuild --version 2>/dev/null)"; then
    cargo install --quiet --locked "cargo-zigbuild@$zigbuild_version" --root "$tools/cargo-zigbuild"
fi
rustup target add "${targets[@]}" >/dev/null

version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)
dist=$root/target/release-dist
mkdir -p "$dist"

# build SOURCE_DIR TARGET_DIR TARGET: the directory holding both binaries
# (cordon and the launcher's own executable, cordon-launcher).
build() {
    local source=$1 target_dir=$2 target=$3
    local cargo_home=${CARGO_HOME:-$HOME/.cargo}
    # Only for the target's code (with --target, build scripts get none).
    local flags="--remap-path-prefix=$source=/cordon --remap-path-prefix=$cargo_home=/cargo"
    flags+=" --remap-path-prefix=$target_dir=/target -C strip=symbols"
    # Position independent, so the kernel loads each at a random base
    # (ASLR): rustc asks for `-static-pie`, which zig's linker ignores,
    # leaving a fixed-address executable; `-pie` it honours.
    flags+=" -C link-arg=-pie"
    (cd "$source" && RUSTFLAGS="$flags" CARGO_TARGET_DIR="$target_dir" \
        cargo zigbuild --quiet --locked --release -p cordon --bin cordon \
        -p cordon-launcher --bin cordon-launcher --target "$target" >&2)
    echo "$target_dir/$target/release"
}

# Each target ships cordon and cordon-launcher, installed side by side
# under those names (cordon starts the launcher beside it: README.md).
for target in "${targets[@]}"; do
    started=$SECONDS
    built=$(build "$root" "$root/target/release-build" "$target")
    for program in cordon cordon-launcher; do
        cp "$built/$program" "$dist/$program-$version-$target"
    done
    echo "release: cordon-$version-$target ($(stat -c %s "$built/cordon") bytes) and" \
        "cordon-launcher-$version-$target ($(stat -c %s "$built/cordon-launcher") bytes), $((SECONDS - started)) s"
done

if $reproduce; then
    started=$SECONDS
    other=$(mktemp -d)
    trap 'rm -rf "$other"' EXIT
    mkdir "$other/cordon"
    git ls-files -z | xargs -0 cp --no-dereference --parents -t "$other/cordon"
    first=${targets[0]}
    again=$(build "$other/cordon" "$other/target" "$first")
    for program in cordon cordon-launcher; do
        if ! cmp -s "$again/$program" "$dist/$program-$version-$first"; then
            echo "release: a second build of $program for $first in $other differs: not reproducible" >&2
            exit 1
        fi
    done
    echo "release: $first reproduced byte for byte from another directory ($((SECONDS - started)) s)"
fi

(cd "$dist" && sha256sum "${targets[@]/#/cordon-$version-}" "${targets[@]/#/cordon-launcher-$version-}" \
    >SHA256SUMS && sha256sum -c --quiet SHA256SUMS)
if [ -n "$sign_key" ]; then
    openssl dgst -sha256 -sign "$sign_key" -out "$dist/SHA256SUMS.sig" "$dist/SHA256SUMS"
    openssl pkey -in "$sign_key" -pubout -out "$dist/cordon.pub"
    openssl dgst -sha256 -verify "$dist/cordon.pub" -signature "$dist/SHA256SUMS.sig" \
        "$dist/SHA256SUMS" >/dev/null
    echo "release: SHA256SUMS signed; openssl verifies it under $dist/cordon.pub"
fi

# Each binary runs: its version, its shipped policies, a command under the
# policy component (wasmtime compiles it for that architecture).
# smoke_cgroup_v2 BINARY TARGET WORKSPACE: on a cgroup v2 hierarchy (where
# this machine has one: a hybrid host's unified one), a confined run's
# command starts inside its run's cgroup — the musl build's spawn once left
# it in the host's own. Skipped loudly without one; under CI=true that fails.
smoke_cgroup_v2() {
    local binary=$1 target=$2 ws=$3 unified out
    unified=$(awk '{for (i = 7; i < NF; i++) if ($i == "-") { if ($(i + 1) == "cgroup2") { print $5; exit } break }}' /proc/self/mountinfo)
    if [ -z "$unified" ] || ! mkdir -p "$unified/cordon-release-smoke" 2>/dev/null; then
        echo "release: $target: SKIPPED the run on cgroup v2: no writable cgroup2 hierarchy here" >&2
        [ "${CI:-}" != true ] || return 1
        return 0
    fi
    printf '[limits]\ncgroup_parent = "%s"\n' "$unified/cordon-release-smoke" >"$ws/v2.toml"
    out=$(cd "$ws" && "$binary" run --no-component-cache --config "$ws/v2.toml" -- \
        'grep "^0::" /proc/self/cgroup')
    rmdir "$unified/cordon-release-smoke"
    case "$out" in
    "0::/"*cordon-release-smoke/*) ;;
    *) echo "release: $target: a run on cgroup v2 started outside its cgroup: $out" >&2; return 1 ;;
    esac
}

smoke() {
    local binary=$1 target=$2
    local arch=${target%%-*} runner=()
    if [ "$arch" != "$(uname -m)" ]; then
        if ! command -v "qemu-$arch" >/dev/null; then
            apt-get install -y -qq qemu-user >/dev/null 2>&1 || {
                echo "release: qemu-$arch is not installed (Debian's qemu-user)" >&2
                return 1
            }
        fi
        runner=("qemu-$arch")
    fi
    # Each output is read whole before grep looks: `cmd | grep -q` under
    # pipefail fails with SIGPIPE (141) when grep stops reading first.
    grep -q "^cordon $version" <<<"$("${runner[@]}" "$binary" --version)"
    grep -q "^builtin:rules-policy" <<<"$("${runner[@]}" "$binary" policy export)"
    local ws
    ws=$(mktemp -d -p /var/tmp)
    local out
    out=$(cd "$ws" && "${runner[@]}" "$binary" run --no-component-cache --max-mode danger-full-access \
        --mode danger-full-access -- 'echo smoke-$((6*7))')
    [ "$out" = smoke-42 ] || { echo "release: $target ran the command wrong: $out" >&2; return 1; }
    if [ ${#runner[@]} -eq 0 ]; then
        # Natively, a confined run: the write to /etc is refused, nothing lands.
        (cd "$ws" && "$binary" run --no-component-cache -- 'touch /etc/cordon-release-smoke') && {
            echo "release: $target: a read-only run wrote /etc" >&2
            return 1
        }
        [ ! -e /etc/cordon-release-smoke ] || { echo "release: /etc was written" >&2; return 1; }
        # Installed side by side, cordon starts its launcher beside it.
        local bin=$ws/bin
        mkdir "$bin" && chmod 0755 "$bin"
        cp "$binary" "$bin/cordon"
        cp "$dist/cordon-launcher-$version-$target" "$bin/cordon-launcher"
        "$bin/cordon" probe >"$ws/probe.txt"
        grep -q "$bin/cordon-launcher" "$ws/probe.txt" || {
            echo "release: $target: cordon does not use the cordon-launcher beside it" >&2
            return 1
        }
        (cd "$ws" && "$bin/cordon" run --no-component-cache -- 'touch /etc/cordon-release-smoke') && {
            echo "release: $target: a read-only run through cordon-launcher wrote /etc" >&2
            return 1
        }
        [ ! -e /etc/cordon-release-smoke ] || { echo "release: /etc was written" >&2; return 1; }
        smoke_cgroup_v2 "$bin/cordon" "$target" "$ws"
    fi
    rm -rf "$ws"
    echo "release: cordon-$version-$target runs${runner[*]:+ under ${runner[*]}}"
}
# position_independent FILE: an ELF executable of type ET_DYN (a static PIE),
# which the kernel loads at a random base; a fixed-address one (ET_EXEC)
# gives an attacker every code address in advance.
position_independent() {
    local kind
    kind=$(od -An -tu2 -j16 -N2 "$1" | tr -d ' ')
    [ "$kind" = 3 ] || {
        echo "release: $1 is not position independent (ELF type $kind, not 3: ET_DYN): no ASLR for it" >&2
        return 1
    }
}
for target in "${targets[@]}"; do
    position_independent "$dist/cordon-$version-$target"
    position_independent "$dist/cordon-launcher-$version-$target"
    smoke "$dist/cordon-$version-$target" "$target"
done
