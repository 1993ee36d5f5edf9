#!/usr/bin/env bash
# Packages the host crate the way it would be published, and generates the
# shell completions and manual pages from the CLI definition:
#   * the shipped policy components (components/bash-sandbox, the default,
#     and rules-policy, pwsh-sandbox, bash-local: `--policy builtin:NAME`)
#     are built for wasm32-wasip2 twice, in two target directories, and the
#     two builds must be byte-identical (reproducible); that build goes into
#     the package as host/embedded/NAME.wasm with its digest, which the
#     packaged build script checks;
#   * `cargo package -p cordon-launcher -p cordon` builds the packaged crates
#     on their own (no workspace around them; cordon against the packaged
#     launcher) — the check that they install from the registry;
#   * target/dist/ gets cordon.bash, _cordon (zsh), cordon.fish and man/.
set -euo pipefail
cd "$(dirname "$0")/.."
guests=target/package-guests
embedded=host/embedded
trap 'rm -rf "$embedded"' EXIT

shipped=(bash-sandbox rules-policy pwsh-sandbox bash-local)
build_guest() {
    # The inner build gets none of an outer build's target settings.
    local packages=()
    for name in "${shipped[@]}"; do packages+=(-p "cordon-$name"); done
    env -u RUSTFLAGS -u CARGO_ENCODED_RUSTFLAGS -u CARGO_BUILD_TARGET \
        cargo build --quiet --locked --target wasm32-wasip2 --profile guest \
        "${packages[@]}" --target-dir "$1"
}
build_guest "$guests/a"
build_guest "$guests/b"
mkdir -p "$embedded"
for name in "${shipped[@]}"; do
    stem=cordon_${name//-/_}
    a="$guests/a/wasm32-wasip2/guest/$stem.wasm"
    b="$guests/b/wasm32-wasip2/guest/$stem.wasm"
    if ! cmp -s "$a" "$b"; then
        echo "package: two builds of $name differ; it is not reproducible" >&2
        exit 1
    fi
    cp "$a" "$embedded/$name.wasm"
    echo "sha256:$(sha256sum "$a" | cut -d' ' -f1)" >"$embedded/$name.wasm.sha256"
    echo "package: $name $(cat "$embedded/$name.wasm.sha256") (reproduced)"
done

# Cargo verifies cordon against the packaged launcher through a local registry
# it unpacks under $CARGO_HOME/registry/src, and takes what it finds there as
# immutable, like any registry crate: an unpacked copy of the same version from
# an earlier packaging is not unpacked again, and a launcher built from such a
# copy is not rebuilt (its files keep the tarball's fixed old times). Either
# would check this source against a stale launcher: both go first.
rm -rf "${CARGO_HOME:-$HOME/.cargo}"/registry/src/*/cordon-launcher-*
for depinfo in target/debug/deps/cordon_launcher-*.d; do
    [ -e "$depinfo" ] && grep -q '/registry/src/' "$depinfo" || continue
    hash=${depinfo##*/cordon_launcher-}
    hash=${hash%.d}
    rm -rf target/debug/.fingerprint/cordon-launcher-"$hash" \
        target/debug/deps/*cordon_launcher-"$hash".*
done
cargo package --locked -p cordon-launcher -p cordon --allow-dirty

dist=target/dist
mkdir -p "$dist"
cordon=target/debug/cordon
# The binary the test suite builds (the same feature set: nothing rebuilt
# after `cargo test --workspace`).
cargo test --quiet --locked --workspace --no-run
"$cordon" completions bash >"$dist/cordon.bash"
"$cordon" completions zsh >"$dist/_cordon"
"$cordon" completions fish >"$dist/cordon.fish"
"$cordon" man --out-dir "$dist/man" >/dev/null
bash -n "$dist/cordon.bash"
test -s "$dist/man/cordon.1" && test -s "$dist/man/cordon-run.1"
echo "package: completions and $(ls "$dist/man" | wc -l) manual pages in $dist"
