//! Policy components are untrusted code (DESIGN.md, host invariants): a
//! misbehaving component is a structured `POLICY_FAILED` error for that run
//! — never a crash, a hang, or a command run unconfined — and the host
//! serves a normal run right after. Each case touches a marker file if
//! the command ever runs; it must stay absent.

use crate::common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::{bwrap_usable, component, workspace};
use cordon::policy::Limits;
use cordon::{Deployment, ExecRequest, Host, PolicySource, RunError};

/// A host running the hostile fixture, with a short call deadline.
fn hostile_host(dir: &Path) -> Host {
    Host::builder()
        .policy(PolicySource::File(component("hostile-policy.wasm")))
        .deployment(Deployment::in_dir(dir))
        .limits(Limits {
            call_deadline: Duration::from_millis(300),
            ..Limits::default()
        })
        .build()
        .unwrap()
}

/// Run `word; touch MARKER` and expect a policy failure in `phase` whose
/// reason contains `says`; then prove the host still serves a normal run.
async fn contained(word: &str, phase: &str, says: &str) {
    let ws = workspace();
    let host = hostile_host(ws.path());
    let marker = ws.path().join("ran");
    let started = Instant::now();
    let err = host
        .run(ExecRequest::new(format!(
            "{word}; touch {}",
            marker.display()
        )))
        .await
        .expect_err(word);
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{word} took too long"
    );
    match &err {
        RunError::PolicyFailed { phase: p, reason } => {
            assert_eq!(*p, phase, "{word}: {err}");
            assert!(reason.contains(says), "{word}: {reason}");
        }
        other => panic!("{word}: expected POLICY_FAILED, got {other}"),
    }
    assert_eq!(err.code(), "POLICY_FAILED");
    assert!(!marker.exists(), "{word}: the command ran");

    let after = host
        .run(ExecRequest::new("echo still-serving"))
        .await
        .expect("the host serves a normal run after a hostile one");
    assert_eq!(after.stdout.text, "still-serving\n");
}

macro_rules! confined_case {
    ($name:ident, $word:literal, $phase:literal, $says:literal) => {
        #[tokio::test]
        async fn $name() {
            if !bwrap_usable(stringify!($name)) {
                return;
            }
            contained($word, $phase, $says).await;
        }
    };
}

confined_case!(
    an_infinite_loop_in_resolve,
    "loop-resolve",
    "resolve",
    "deadline"
);
confined_case!(
    an_infinite_loop_in_settle,
    "loop-settle",
    "settle",
    "deadline"
);
confined_case!(a_memory_bomb, "memory-bomb", "resolve", "trapped");
confined_case!(a_panic, "panic", "resolve", "trapped");
confined_case!(a_100_mib_string, "huge-string", "resolve", "trapped");
confined_case!(an_8_mib_string, "big-string", "resolve", "the limits are");
confined_case!(
    an_unconfined_launch_for_read_only,
    "unconfined",
    "plan",
    "refusing to run it unconfined"
);
confined_case!(
    a_forged_argv,
    "forged-argv",
    "plan",
    "refusing to run it unconfined"
);
confined_case!(
    a_confinement_of_another_policy,
    "other-policy",
    "plan",
    "but the spec is mode"
);
confined_case!(
    a_spec_wider_than_the_ceiling,
    "wider-spec",
    "resolve",
    "wider than the deployment ceiling"
);
confined_case!(
    a_spec_that_widens_the_handed_mode,
    "widen-mode",
    "resolve",
    "widened the mode from \"read-only\" to \"workspace-write\""
);
confined_case!(
    a_spec_that_moves_the_workspace_root,
    "move-root",
    "resolve",
    "moved the workspace root"
);
confined_case!(
    a_timeout_no_run_can_have,
    "zero-timeout",
    "resolve",
    "returned timeout-ms 0 outside 1..=600000"
);
confined_case!(
    a_thousand_confines_in_one_plan,
    "many-confines",
    "plan",
    "more than 8 sandbox.confine calls"
);
confined_case!(
    facts_for_another_mode,
    "wrong-mode",
    "settle",
    "stamped mode"
);
confined_case!(
    no_facts_for_a_confined_run,
    "no-facts",
    "settle",
    "no sandbox facts"
);
confined_case!(
    a_confined_run_stamped_unconfined,
    "fake-unconfined",
    "settle",
    "enforcement"
);

/// A run's `resolve` and `plan` share one instance (so `plan` sees what
/// `resolve` left in it), and nothing survives into the next run: the
/// fixture counts the calls its instance served.
#[tokio::test]
async fn resolve_and_plan_share_an_instance_and_no_run_sees_another_runs() {
    if !bwrap_usable("resolve_and_plan_share_an_instance_and_no_run_sees_another_runs") {
        return;
    }
    let ws = workspace();
    let host = hostile_host(ws.path());
    for run in 1..=3 {
        let result = host
            .run(ExecRequest::new("count-calls"))
            .await
            .expect("runs");
        assert_eq!(
            result.stdout.text, "calls=2\n",
            "run {run}: plan is the second call of the instance that resolved, and the first \
             run's calls are gone"
        );
    }
}

#[test]
fn the_cli_reports_a_policy_failure_with_its_own_exit_code() {
    let ws = workspace();
    let marker = ws.path().join("ran");
    let output = common::cordon()
        .current_dir(ws.path())
        .args(["run", "--policy"])
        .arg(component("hostile-policy.wasm"))
        .arg("--")
        .arg(format!("panic; touch {}", marker.display()))
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(70));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.starts_with("cordon: POLICY_FAILED: policy component failed in resolve: trapped"),
        "{stderr}"
    );
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(!marker.exists());
}

/// A hand-written component that imports `import` and exports nothing.
fn importing(import: &str) -> Vec<u8> {
    wat::parse_str(format!("(component (import \"{import}\" (instance)))")).unwrap()
}

fn load_error(bytes: Vec<u8>) -> String {
    let ws = workspace();
    let err = Host::builder()
        .policy(PolicySource::Bytes(bytes))
        .deployment(Deployment::in_dir(ws.path()))
        .build()
        .err()
        .expect("refused at load");
    err.to_string()
}

#[test]
fn a_filesystem_import_is_refused_at_load() {
    let err = load_error(importing("wasi:filesystem/preopens@0.2.6"));
    assert!(
        err.contains("imports wasi:filesystem/preopens@0.2.6"),
        "{err}"
    );
    assert!(
        err.contains("cordon:sandbox/executor-policy@0.3.0"),
        "{err}"
    );
}

#[test]
fn an_unknown_interface_is_refused_at_load() {
    let err = load_error(importing("evil:net/raw@1.0.0"));
    assert!(err.contains("imports evil:net/raw@1.0.0"), "{err}");
}

#[test]
fn another_package_version_is_refused_at_load() {
    let err = load_error(importing("cordon:sandbox/sandbox@0.9.0"));
    assert!(
        err.contains("imports cordon:sandbox/sandbox@0.9.0"),
        "{err}"
    );
    assert!(
        err.contains(
            "this host supports cordon:sandbox/executor-policy@0.3.0, \
             cordon:sandbox/executor-policy@0.2.0, cordon:sandbox/executor-policy@0.1.0"
        ),
        "{err}"
    );
}

#[test]
fn a_component_without_the_executor_export_is_refused_at_load() {
    let err = load_error(wat::parse_str("(component)").unwrap());
    assert!(
        err.contains("does not export cordon:sandbox/executor@0.2.0"),
        "{err}"
    );
}

#[test]
fn policy_check_runs_the_same_checks() {
    let ws = workspace();
    let good = common::cordon()
        .args(["policy", "check"])
        .arg(component("bash-sandbox.wasm"))
        .output()
        .unwrap();
    assert_eq!(good.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&good.stdout).starts_with("ok: bash-sandbox "));
    let bad = ws.path().join("bad.wasm");
    std::fs::write(&bad, importing("wasi:sockets/tcp@0.2.6")).unwrap();
    let output = common::cordon()
        .args(["policy", "check"])
        .arg(&bad)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(70));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("imports wasi:sockets/tcp@0.2.6"),
        "{stderr}"
    );
}

#[tokio::test]
async fn reload_swaps_the_policy_and_keeps_the_old_one_on_failure() {
    if !bwrap_usable("reload_swaps_the_policy_and_keeps_the_old_one_on_failure") {
        return;
    }
    let ws = workspace();
    let host = Host::builder()
        .deployment(Deployment::in_dir(ws.path()))
        .build()
        .unwrap();
    // A task planned by the default policy ...
    let task = host
        .start(ExecRequest::new("sleep 0.5; exit 3"))
        .await
        .unwrap();
    let info = host
        .reload(PolicySource::File(component("strict-policy.wasm")))
        .unwrap();
    assert_eq!(info.name, "strict-policy");
    // ... settles with the default policy's facts (not strict's denial).
    let done = task.wait(Some(Duration::from_secs(10))).await;
    assert_eq!(done.exit_code, Some(3));
    assert!(
        !done.sandbox.unwrap().denied,
        "settled by the policy that planned it"
    );
    // New runs use the new policy.
    let after = host.run(ExecRequest::new("exit 3")).await.unwrap();
    assert!(
        after.sandbox.unwrap().denied,
        "strict-policy stamps a denial"
    );

    // A broken component is refused and the previous one stays active.
    let err = host
        .reload(PolicySource::Bytes(importing("evil:net/raw@1.0.0")))
        .unwrap_err();
    assert!(err.to_string().contains("evil:net/raw@1.0.0"), "{err}");
    assert_eq!(host.policy_info().name, "strict-policy");
}

#[test]
fn a_connect_that_traps_or_loops_refuses_that_connection_and_the_host_decides_the_next() {
    use cordon::policy::Phase;
    let (_engine, policy, spec) = hostile_connecting();
    for (host, says) in [("trap", "trapped"), ("loop", "deadline")] {
        match policy.connect(&spec, host, 443) {
            Err(cordon::RunError::PolicyFailed { phase, reason }) => {
                assert_eq!(phase, Phase::Connect);
                assert!(reason.contains(says), "{host}: {reason}");
            }
            other => panic!("{host}: {other:?}"),
        }
    }
    assert_eq!(policy.connect(&spec, "ok.example", 443).unwrap(), Ok(()));
    assert_eq!(
        policy.connect(&spec, "other.example", 443).unwrap(),
        Err("other.example:443 is not in this run's network grant".to_owned())
    );
}

#[test]
fn a_world_0_1_0_components_connections_are_decided_by_the_host_from_the_grant() {
    use cordon::model::{Decision, Deployment, ExecRequest, Network};
    use cordon::policy::{Limits, Policy, PolicyEngine};
    let engine = PolicyEngine::new().unwrap();
    let bytes = std::fs::read(common::component("legacy-policy.wasm")).unwrap();
    let policy = Policy::load(&engine, &bytes, Limits::default()).unwrap();
    let mut grant = cordon::SandboxPolicy::new(cordon::SandboxMode::ReadOnly, "/ws");
    grant.network = Network::Allow(vec!["github.com:22".parse().unwrap()]);
    let request = ExecRequest::new("true").with_policy(grant);
    let Ok(Decision::Allow(spec)) = policy.resolve(&request, &Deployment::in_dir("/ws")) else {
        panic!("resolve");
    };
    assert_eq!(policy.connect(&spec, "github.com", 22).unwrap(), Ok(()));
    assert!(policy.connect(&spec, "github.com", 443).unwrap().is_err());
}

#[test]
fn a_runs_connector_survives_a_trapping_or_looping_connect_and_decides_the_next() {
    use cordon::policy::Phase;
    let (_engine, policy, spec) = hostile_connecting();
    let connector = policy.connector(&spec, "{}");
    for _ in 0..3 {
        assert_eq!(connector.connect("ok.example", 443).unwrap(), Ok(()));
    }
    for (host, says) in [("trap", "trapped"), ("loop", "deadline")] {
        match connector.connect(host, 443) {
            Err(cordon::RunError::PolicyFailed { phase, reason }) => {
                assert_eq!(phase, Phase::Connect);
                assert!(reason.contains(says), "{host}: {reason}");
            }
            other => panic!("{host}: {other:?}"),
        }
        // The instance is gone; the next call gets a fresh one.
        assert_eq!(connector.connect("ok.example", 443).unwrap(), Ok(()));
    }
    assert!(connector.connect("other.example", 443).unwrap().is_err());
}

/// hostile-policy with a 200 ms deadline, and the spec of a run whose
/// network allows `ok.example:443`.
fn hostile_connecting() -> (
    cordon::policy::PolicyEngine,
    cordon::policy::Policy,
    cordon::model::ExecSpec,
) {
    use cordon::model::{Decision, Deployment, ExecRequest, Network};
    use cordon::policy::{Limits, Policy, PolicyEngine};
    let engine = PolicyEngine::new().unwrap();
    let bytes = std::fs::read(common::component("hostile-policy.wasm")).unwrap();
    let limits = Limits {
        call_deadline: std::time::Duration::from_millis(200),
        ..Limits::default()
    };
    let policy = Policy::load(&engine, &bytes, limits).unwrap();
    let mut grant = cordon::SandboxPolicy::new(cordon::SandboxMode::ReadOnly, "/ws");
    grant.network = Network::Allow(vec!["ok.example:443".parse().unwrap()]);
    let request = ExecRequest::new("true").with_policy(grant);
    let Ok(Decision::Allow(spec)) = policy.resolve(&request, &Deployment::in_dir("/ws")) else {
        panic!("resolve");
    };
    (engine, policy, spec)
}

/// A component's words reach a terminal bounded and inert: an 8 MiB
/// refusal that opens with OSC 52 (set the clipboard), OSC 8 (a link) and
/// a colour is printed by `cordon run` as one short line with every escape
/// shown, not sent — on stderr and in `--json` alike — and a rule file's
/// escape-laden deny reason the same way.
#[test]
fn a_components_reasons_reach_the_terminal_bounded_and_escaped() {
    let ws = workspace();
    let hostile = component("hostile-policy.wasm");
    let run = |args: &[&str], command: &str| {
        common::cordon()
            .current_dir(ws.path())
            .args(["run"])
            .args(args)
            .args(["--", command])
            .output()
            .unwrap()
    };
    let policy = ["--policy", hostile.to_str().unwrap()];
    let output = run(&policy, "loud-reason");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(64), "{stderr:.300}");
    assert!(stderr.len() < 8 << 10, "{} bytes printed", stderr.len());
    assert!(
        !stderr.contains('\x1b') && !stderr.contains('\x07'),
        "{stderr:.300}"
    );
    assert!(stderr.contains("\\x1b]52;c;ZXZpbA==\\x07"), "{stderr:.300}");
    assert!(stderr.contains("more bytes cut]"), "{stderr:.300}");
    let json = run(
        &["--json", "--policy", hostile.to_str().unwrap()],
        "loud-reason",
    );
    let message = common::parse(&json)["error"]["message"].clone();
    let message = message.as_str().unwrap();
    assert!(
        message.len() < 8 << 10 && !message.contains('\x1b'),
        "{message:.300}"
    );

    let rules = ws.path().join("rules.toml");
    std::fs::write(
        &rules,
        "default = \"allow\"\n[[rules]]\nprogram = \"curl\"\ndecision = \"deny\"\n\
         reason = \"no\\u001b]52;c;ZXZpbA==\\u0007 downloads\\u202e\"\n",
    )
    .unwrap();
    let rules_policy = component("rules-policy.wasm");
    let args = [
        "--policy",
        rules_policy.to_str().unwrap(),
        "--settings",
        rules.to_str().unwrap(),
    ];
    let output = run(&args, "curl https://example.com");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(77), "{stderr}");
    assert!(
        stderr.contains("no\\x1b]52;c;ZXZpbA==\\x07 downloads\\u{202e}"),
        "{stderr}"
    );
    assert!(
        !stderr.contains('\x1b') && !stderr.contains('\u{202e}'),
        "{stderr}"
    );
}

/// A command's own output is data in a pipe (passed byte for byte) and
/// text on a terminal (its escape sequences shown, not sent): the
/// clipboard-setting OSC 52 a command prints reaches a pty escaped.
#[test]
fn a_commands_escapes_reach_a_terminal_shown_not_sent() {
    if !common::python_usable("a_commands_escapes_reach_a_terminal") {
        return;
    }
    let ws = workspace();
    let printf = "printf 'a\\033]52;c;ZXZpbA==\\007b\\n'";
    let piped = common::cordon()
        .current_dir(ws.path())
        .args(["run", "--", printf])
        .output()
        .unwrap();
    assert_eq!(
        piped.stdout, b"a\x1b]52;c;ZXZpbA==\x07b\n",
        "a pipe gets the bytes"
    );
    let on_a_pty = "import os, pty, sys\n\
        pid, fd = pty.fork()\n\
        if pid == 0:\n    os.execv(sys.argv[1], sys.argv[1:])\n\
        out = b''\n\
        while True:\n    try:\n        data = os.read(fd, 65536)\n    except OSError:\n        break\n    if not data:\n        break\n    out += data\n\
        os.waitpid(pid, 0)\n\
        sys.stdout.buffer.write(out)\n";
    let output = std::process::Command::new("python3")
        .current_dir(ws.path())
        .args([
            "-c",
            on_a_pty,
            env!("CARGO_BIN_EXE_cordon"),
            "run",
            "--",
            printf,
        ])
        .output()
        .unwrap();
    let seen = String::from_utf8_lossy(&output.stdout);
    assert!(seen.contains("a\\x1b]52;c;ZXZpbA==\\x07b"), "{seen:?}");
    assert!(!seen.contains('\x1b') && !seen.contains('\x07'), "{seen:?}");
}
