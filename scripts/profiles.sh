#!/usr/bin/env bash
# The end-to-end suites where agents really run, beside the root run of
# scripts/test.sh: the same compiled suites, run again
#
#   * unprivileged:   as a non-root user (its own home and runtime dir);
#   * restricted-pod: as that user under tests/profiles/restricted-pod.py, the
#                     rules a restricted Kubernetes pod's runtime-default
#                     seccomp profile applies (no namespaces, no mounts,
#                     clone3 -> ENOSYS, no-new-privs), no runtime dir.
#
# Each profile's user owns everything the suites make (CORDON_E2E_TMPDIR);
# CORDON_E2E_PROFILE tells the suites which profile they are in. Under
# CI=true the rungs that profile should have are required
# (CORDON_E2E_REQUIRE_*): a rung that should be usable and is not fails;
# every other skip says SKIPPED.
#
# Usage: scripts/profiles.sh [PROFILE...] [-- TEST_FILTER...]
#   (default: both profiles, the suites below)
set -euo pipefail
cd "$(dirname "$0")/.."

# The suites whose claims must hold where users run.
suites=(containment:: trees:: limits:: network:: inspection:: requests:: grant:: mcp:: python:: escapes:: landlock:: probe:: doctor:: audit:: hostile::a_components_reasons hostile::a_commands_escapes rules_policy::rules_policy_refuses_every_dodge serve::a_task_with_a_terminal denials:: launcher:: cli::stdout_moves cli::the_command_names ns_runner::a_lent_network_namespace)
user=cordon-ci

skip() {
    echo "SKIPPED the unprivileged and restricted-pod profiles: $*" >&2
    exit 0
}
[ "$(uname -s)" = Linux ] || skip "Linux only"
[ "$(id -u)" -eq 0 ] || skip "not root, so this run is itself the unprivileged one"
command -v setpriv >/dev/null || skip "setpriv (util-linux) is not installed"

id -u "$user" >/dev/null 2>&1 ||
    useradd --system --no-create-home --shell /usr/sbin/nologin --user-group "$user"
as_user=(setpriv "--reuid=$user" "--regid=$user" --init-groups)

# The suites' binary, as cargo built it for scripts/test.sh.
tests=$(cargo test -p cordon --test all --no-run --message-format=json 2>/dev/null |
    python3 -c 'import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m["target"]["name"] == "all" and m.get("executable"):
        print(m["executable"])')

# The user must reach the checkout (the suites name its files by path). A
# CI clone under a 0700 home gets search (not read) permission on its
# parents; elsewhere that is the operator's choice, so the profiles skip.
if ! "${as_user[@]}" test -x "$tests" -a -r Cargo.toml; then
    [ "${CI:-}" = true ] || skip "$user cannot reach $PWD (give its parents o+x)"
    dir=$PWD
    while [ "$dir" != / ]; do
        if ! "${as_user[@]}" test -x "$dir"; then
            echo "profiles: giving others search permission on $dir so $user reaches the checkout" >&2
            chmod o+x "$dir"
        fi
        dir=$(dirname "$dir")
    done
fi

run_profile() {
    local profile=$1 base=/var/tmp/cordon-profiles/$1
    rm -rf "$base"
    mkdir -p "$base"/{home,scratch}
    local env=(
        PATH=/usr/local/bin:/usr/bin:/bin HOME="$base/home" USER="$user" LOGNAME="$user"
        CORDON_E2E_PROFILE="$profile" CORDON_E2E_TMPDIR="$base/scratch" RUST_BACKTRACE=1
    )
    local wrap=()
    case $profile in
    unprivileged)
        # A login's runtime directory, as pam_systemd makes it.
        mkdir -p "$base/run" && chmod 0700 "$base/run"
        env+=(XDG_RUNTIME_DIR="$base/run")
        [ "${CI:-}" = true ] && env+=(CI=true CORDON_E2E_REQUIRE_NAMESPACES=1
            CORDON_E2E_REQUIRE_BWRAP=1 CORDON_E2E_REQUIRE_LANDLOCK=1
            CORDON_E2E_REQUIRE_PYTHON=1 CORDON_E2E_REQUIRE_MCP=1)
        ;;
    restricted-pod)
        wrap=(/usr/bin/python3 "$PWD/tests/profiles/restricted-pod.py" --)
        [ "${CI:-}" = true ] && env+=(CI=true CORDON_E2E_REQUIRE_LANDLOCK=1
            CORDON_E2E_REQUIRE_PYTHON=1 CORDON_E2E_REQUIRE_MCP=1)
        ;;
    *)
        echo "profiles: no profile named $profile (unprivileged, restricted-pod)" >&2
        exit 2
        ;;
    esac
    chown -R "$user:$user" "$base"
    echo "== profile $profile: ${suites[*]} as $user" >&2
    # Uncaptured, so every skip's reason is in the log; the log is shown
    # whole when a test fails, else its result and each skip once.
    local log status=0
    log=$(mktemp)
    (cd "$base/home" && "${as_user[@]}" env -i "${env[@]}" "${wrap[@]}" \
        "$tests" --test-threads=2 --nocapture "${suites[@]}") >"$log" 2>&1 || status=$?
    if [ "$status" -ne 0 ]; then
        cat "$log" >&2
        echo "profiles: the $profile profile FAILED (exit $status)" >&2
        rm -f "$log"
        exit 1
    fi
    grep -E '^test result' "$log" >&2
    grep -E '^SKIPPED' "$log" | cut -c1-300 | sort -u >&2 || true
    rm -f "$log"
    rm -rf "$base"
}

profiles=()
while [ $# -gt 0 ]; do
    if [ "$1" = -- ]; then
        shift
        suites=("$@")
        break
    fi
    profiles+=("$1")
    shift
done
[ "${#profiles[@]}" -gt 0 ] || profiles=(unprivileged restricted-pod)
for profile in "${profiles[@]}"; do
    run_profile "$profile"
done
