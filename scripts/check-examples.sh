#!/usr/bin/env bash
# Checks the deployment examples in examples/ as an operator would use them:
#   * examples/kubernetes/*.yaml validate against the Kubernetes API schema
#     (kubernetes-validate from PyPI, --strict: an unknown field fails), a
#     copy with a misspelt field is refused (the check checks), and each
#     ConfigMap's cordon.toml loads in cordon (`cordon doctor --config`: a
#     config cordon cannot use exits 78) with its policy and settings;
#   * examples/systemd/ verifies (`systemd-analyze verify`, every warning
#     a failure), and the service's ExecStart, started on the socket unit's
#     socket by systemd-socket-activate, answers a run over it.
# Needs target/debug/cordon (the suite's build) or CORDON=PATH. The
# validator is installed by scripts/setup.sh into target/tools/; where it
# or systemd's tools are missing this skips loudly, and fails under CI=true.
set -euo pipefail
cd "$(dirname "$0")/.."
cordon=$(realpath "${CORDON:-target/debug/cordon}")
validate=target/tools/kubernetes/bin/kubernetes-validate
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

missing() {
    if [ "${CI:-}" = true ]; then
        echo "check-examples: $1 (required under CI=true)" >&2
        exit 1
    fi
    echo "SKIPPED check-examples: $1" >&2
}

if [ -x "$validate" ]; then
    "$validate" --strict --quiet examples/kubernetes/*.yaml
    sed 's/readOnlyRootFilesystem:/readOnlyRootFilesytem:/' examples/kubernetes/sidecar.yaml \
        >"$scratch/misspelt.yaml"
    if "$validate" --strict --quiet "$scratch/misspelt.yaml" >/dev/null 2>&1; then
        echo "check-examples: a misspelt field passed the validator; it checks nothing" >&2
        exit 1
    fi
    for manifest in examples/kubernetes/*.yaml; do
        name=$(basename "$manifest" .yaml)
        mkdir -p "$scratch/$name"
        # Every key of each ConfigMap's data, as the files the pod mounts.
        "${validate%/*}/python" - "$manifest" "$scratch/$name" <<'PY'
import sys, yaml
for doc in yaml.safe_load_all(open(sys.argv[1])):
    if doc and doc.get("kind") == "ConfigMap":
        for key, text in doc["data"].items():
            open(f"{sys.argv[2]}/{key}", "w").write(text)
PY
        status=0
        (cd "$scratch" && "$cordon" doctor --json --config "$scratch/$name/cordon.toml" \
            >"$scratch/$name.doctor" 2>&1) || status=$?
        # 1 is a failed check of this machine (a rung it lacks); the policy
        # and its settings must load whatever the machine.
        if { [ "$status" -ne 0 ] && [ "$status" -ne 1 ]; } ||
            ! "${validate%/*}/python" -c '
import json, sys
checks = json.load(open(sys.argv[1]))["checks"]
sys.exit(0 if any(c["name"] == "policy" and c["status"] == "ok" for c in checks) else 1)
' "$scratch/$name.doctor" 2>/dev/null; then
            echo "check-examples: $manifest: its cordon.toml does not load (exit $status):" >&2
            cat "$scratch/$name.doctor" >&2
            exit 1
        fi
    done
    echo "check-examples: $(ls examples/kubernetes/*.yaml | wc -l) Kubernetes manifests valid; their cordon.toml load"
else
    missing "kubernetes-validate is not installed in target/tools (scripts/setup.sh)"
fi

if command -v systemd-analyze >/dev/null && command -v systemd-socket-activate >/dev/null; then
    units="$scratch/units"
    mkdir -p "$units"
    cp examples/systemd/cordon.socket "$units/"
    # verify needs the binary the unit names to exist: this build's, in its place.
    sed "s|/usr/local/bin/cordon|$cordon|" examples/systemd/cordon.service >"$units/cordon.service"
    report=$(systemd-analyze verify --man=no "$units/cordon.socket" "$units/cordon.service" 2>&1) || {
        echo "check-examples: systemd-analyze verify failed: $report" >&2
        exit 1
    }
    if [ -n "$report" ]; then
        echo "check-examples: systemd-analyze verify warns: $report" >&2
        exit 1
    fi
    # The service's command on the socket unit's socket (a scratch path and
    # config: this is not the machine's /run).
    exec_start=$(sed -n 's/^ExecStart=//p' "$units/cordon.service")
    socket="$scratch/cordon.sock"
    printf 'max_mode = "workspace-write"\n' >"$scratch/cordon.toml"
    read -ra argv <<<"${exec_start/\/etc\/cordon\/cordon.toml/$scratch/cordon.toml}"
    (cd "$scratch" && exec systemd-socket-activate -l "$socket" "${argv[@]}") 2>"$scratch/serve.log" &
    server=$!
    answer=$(python3 - "$socket" <<'PY'
import json, socket, sys, time
for _ in range(300):
    try:
        s = socket.socket(socket.AF_UNIX)
        s.connect(sys.argv[1])
        break
    except OSError:
        time.sleep(0.05)
request = {"jsonrpc": "2.0", "id": 1, "method": "run", "params": {"command": "echo activated"}}
s.sendall((json.dumps(request) + "\n").encode())
line = s.makefile().readline()
print(json.loads(line)["result"]["stdout"]["text"].strip())
PY
) || true
    kill "$server" 2>/dev/null || true
    wait "$server" 2>/dev/null || true
    if [ "$answer" != activated ]; then
        echo "check-examples: cordon.service on cordon.socket did not answer a run:" >&2
        cat "$scratch/serve.log" >&2
        exit 1
    fi
    echo "check-examples: systemd units verify; the service answers on its activated socket"
else
    missing "systemd-analyze or systemd-socket-activate is not installed"
fi
