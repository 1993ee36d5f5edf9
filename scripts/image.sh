#!/usr/bin/env bash
# Builds cordon's container image from a static release binary and tries it
# as a platform would run it:
#
#   scripts/image.sh [BINARY]     (default: target/release-dist/cordon-VERSION-$(uname -m)-unknown-linux-musl)
#
#   * the image is written as an OCI image layout (scripts/oci-image.py: no
#     daemon) into target/image/, twice, and the two must be the same bytes;
#   * it is pushed to a registry started on loopback (Debian's
#     docker-registry) with skopeo, pulled back and run by podman (Debian's
#     packages) as a non-root user with every capability dropped,
#     no-new-privileges, no network and the runtime's default seccomp
#     profile — the restricted pod's conditions;
#   * inside it: `cordon doctor` says which rung enforces; a command in
#     workspace-write writes the mounted workspace (on the host after), and
#     its write to another mounted host directory is refused — the host
#     directory stays empty.
# Needs root (podman, the registry) and the static binary scripts/release.sh builds.
set -euo pipefail
cd "$(dirname "$0")/.."
version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)
arch=$(uname -m)
binary=${1:-target/release-dist/cordon-$version-$arch-unknown-linux-musl}
[ -x "$binary" ] || { echo "image: no static binary at $binary (scripts/release.sh builds it)" >&2; exit 1; }
# The launcher's own executable, beside the binary as release.sh names it.
launcher=$(dirname "$binary")/$(basename "$binary" | sed 's/^cordon-/cordon-launcher-/')
[ -x "$launcher" ] || { echo "image: no cordon-launcher at $launcher (scripts/release.sh builds it)" >&2; exit 1; }
case "$arch" in x86_64) oci_arch=amd64 ;; aarch64) oci_arch=arm64 ;; *) oci_arch=$arch ;; esac
bash_static=/bin/bash-static
certs=/etc/ssl/certs/ca-certificates.crt
for need in "$bash_static" "$certs"; do
    [ -e "$need" ] || apt-get install -y -qq bash-static ca-certificates >/dev/null
done
for tool in podman skopeo docker-registry runc; do
    command -v "$tool" >/dev/null || apt-get install -y -qq podman skopeo docker-registry runc >/dev/null
done

out=target/image
rm -rf "$out" "$out.again"
python3 scripts/oci-image.py "$binary" "$launcher" "$bash_static" "$certs" "$oci_arch" "$version" "$out/layout" >"$out.tags"
python3 scripts/oci-image.py "$binary" "$launcher" "$bash_static" "$certs" "$oci_arch" "$version" "$out.again" >/dev/null
if ! diff -r "$out/layout" "$out.again" >/dev/null; then
    echo "image: two builds of the layout differ: not reproducible" >&2
    exit 1
fi
rm -rf "$out.again"
echo "image: built twice, the same bytes: $(tr '\n' ' ' <"$out.tags")"

scratch=$(mktemp -d -p /var/tmp)
registry_pid=""
cleanup() {
    [ -n "$registry_pid" ] && kill "$registry_pid" 2>/dev/null
    rm -rf "$scratch"
}
trap cleanup EXIT
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
cat >"$scratch/registry.yml" <<YAML
version: 0.1
log: { level: warn }
storage: { filesystem: { rootdirectory: $scratch/registry } }
http: { addr: 127.0.0.1:$port }
YAML
docker-registry serve "$scratch/registry.yml" >/dev/null 2>&1 &
registry_pid=$!
for _ in $(seq 100); do
    (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
    sleep 0.05
done
image=127.0.0.1:$port/cordon:$version
skopeo copy --quiet --dest-tls-verify=false "oci:$out/layout:$version" "docker://$image"
skopeo copy --quiet --dest-tls-verify=false "oci:$out/layout:$version-mcp" "docker://$image-mcp"
podman rmi -f "$image" >/dev/null 2>&1 || true
podman pull --quiet --tls-verify=false "$image" >/dev/null
echo "image: pushed to and pulled from the loopback registry as $image (and $image-mcp)"

seccomp=$(podman info --format json | python3 -c 'import json, sys; s = json.load(sys.stdin)["host"]["security"]; print(s["seccompEnabled"], s["seccompProfilePath"])')
case "$seccomp" in True*) ;; *) echo "image: podman runs without seccomp here: $seccomp" >&2; exit 1 ;; esac
ws=$scratch/workspace
outside=$scratch/outside
mkdir -p "$ws" "$outside"
chown 65532:65532 "$ws" "$outside"
# runc: crun refuses a host whose cgroup v2 hierarchy holds a controller
# beside v1's (this lab's hybrid layout). The rlimits: podman's defaults
# raise them, which needs CAP_SYS_RESOURCE a container host may not give.
restricted=(podman --runtime runc run --rm --user 65532:65532 --cap-drop=all
    --security-opt=no-new-privileges --network=none --ulimit nofile=1024:1024
    --ulimit nproc=1024:1024 -v "$ws:/workspace" -v "$outside:/outside" "$image")
echo "image: running as podman does by default: seccomp $seccomp; no capabilities; user 65532"

"${restricted[@]}" probe >"$scratch/probe.txt" || true
grep -q "/usr/local/bin/cordon-launcher" "$scratch/probe.txt" || {
    echo "image: cordon inside does not use /usr/local/bin/cordon-launcher" >&2
    exit 1
}
"${restricted[@]}" doctor --json >"$scratch/doctor.json" || true
python3 - "$scratch/doctor.json" <<'PY'
import json, sys
checks = {c["name"]: c for c in json.load(open(sys.argv[1]))["checks"]}
sandbox = checks["sandbox"]
print(f"image: doctor inside: sandbox {sandbox['status']}: {sandbox['detail']}")
assert sandbox["status"] == "ok" and "landlock" in sandbox["detail"], sandbox
PY
"${restricted[@]}" run --json --mode workspace-write -- \
    'echo inside > /workspace/made; echo escape > /outside/escaped' >"$scratch/run.json" || true
python3 - "$scratch/run.json" <<'PY'
import json, sys
result = json.load(open(sys.argv[1]))
sandbox = result["sandbox"]
print(f"image: a run inside: exit {result['exitCode']}, sandbox {sandbox}")
assert result["exitCode"] != 0 and sandbox["denied"] and sandbox["enforcement"], result
PY
[ "$(cat "$ws/made")" = inside ] || { echo "image: the workspace write did not land" >&2; exit 1; }
[ -z "$(ls -A "$outside")" ] || { echo "image: a write outside the workspace landed: $(ls "$outside")" >&2; exit 1; }
echo "image: under podman (non-root, no capabilities, default seccomp) the workspace write landed, the one outside was refused"
