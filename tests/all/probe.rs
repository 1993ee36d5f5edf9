//! `cordon probe` and the deployment config: which backend, why, bounded
//! probes, and precise config errors.

use crate::common;

use std::time::{Duration, Instant};

use common::{REAL_BWRAP, cordon, logged_script, parse, starts, workspace};

#[test]
fn probe_names_the_backend_and_every_rung() {
    let output = cordon().args(["probe", "--json"]).output().unwrap();
    let probe = parse(&output);
    let rungs = probe["rungs"].as_array().unwrap();
    if cfg!(target_os = "linux") {
        assert_eq!(rungs[0]["backend"], "namespaces");
        assert_eq!(rungs[1]["backend"], "bwrap");
        assert_eq!(rungs[2]["backend"], "landlock");
        assert!(probe["landlockAbi"].is_number());
    }
    for rung in rungs {
        assert!(!rung["reason"].as_str().unwrap().is_empty());
    }
    let human = cordon().arg("probe").output().unwrap();
    let text = String::from_utf8_lossy(&human.stdout);
    assert!(text.starts_with("backend: "), "{text}");
    assert_eq!(human.status.success(), probe["backend"].is_string());
}

#[test]
fn a_hanging_bwrap_is_declared_unusable_within_the_bound() {
    if !cfg!(target_os = "linux") {
        eprintln!("SKIPPED a_hanging_bwrap_is_declared_unusable_within_the_bound: Linux only");
        return;
    }
    let ws = workspace();
    let config = common::fake_bwrap(ws.path(), "#!/bin/sh\nsleep 30\n");
    let started = Instant::now();
    let output = cordon()
        .arg("probe")
        .arg("--config")
        .arg(&config)
        .args(["--json", "--probe-timeout-ms", "200"])
        .output()
        .unwrap();
    assert!(started.elapsed() < Duration::from_secs(10));
    let probe = parse(&output);
    assert_eq!(common::rung(&probe, "bwrap")["usable"], false);
    assert!(
        common::rung(&probe, "bwrap")["reason"]
            .as_str()
            .unwrap()
            .contains("did not answer the probe within 200 ms"),
        "{probe}"
    );
    assert_ne!(probe["backend"], "bwrap");
}

#[test]
fn a_zero_probe_timeout_is_rejected() {
    let output = cordon()
        .args(["probe", "--probe-timeout-ms", "0"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let ws = workspace();
    let config = ws.path().join("cordon.toml");
    std::fs::write(&config, "probe_timeout_ms = 0\n").unwrap();
    let output = cordon()
        .args(["probe", "--config", config.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(78));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("probe_timeout_ms: must be positive"),
        "{stderr}"
    );
}

#[test]
fn config_errors_name_the_key_and_flags_override_the_file() {
    let ws = workspace();
    let config = ws.path().join("cordon.toml");
    std::fs::write(&config, "max_mode = \"everything\"\n").unwrap();
    let output = cordon()
        .current_dir(ws.path())
        .args(["run", "--config", config.to_str().unwrap(), "--", "true"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(78));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("max_mode: unknown sandbox mode"),
        "{stderr}"
    );

    std::fs::write(&config, "max_mode = \"danger-full-access\"\n").unwrap();
    let allowed = cordon()
        .current_dir(ws.path())
        .args(["run", "--config", config.to_str().unwrap()])
        .args(["--mode", "danger-full-access", "--", "true"])
        .output()
        .unwrap();
    assert_eq!(
        allowed.status.code(),
        Some(0),
        "the file raised the ceiling"
    );
    let overridden = cordon()
        .current_dir(ws.path())
        .args([
            "run",
            "--config",
            config.to_str().unwrap(),
            "--max-mode",
            "read-only",
        ])
        .args(["--mode", "danger-full-access", "--", "true"])
        .output()
        .unwrap();
    assert_eq!(
        overridden.status.code(),
        Some(64),
        "the flag lowered it again"
    );
}

#[test]
fn seatbelt_runs_on_macos_only() {
    if !cfg!(target_os = "macos") {
        eprintln!(
            "SKIPPED seatbelt_runs_on_macos_only: Seatbelt (sandbox-exec) exists only on macOS; \
             its profiles are unit-tested on every platform"
        );
        return;
    }
    let ws = workspace();
    let target = ws.path().join("denied.txt");
    let (code, result) = common::run_json(
        ws.path(),
        &["--backend", "seatbelt"],
        &format!("echo x > {}", target.display()),
    );
    assert_ne!(code, 0);
    assert_eq!(result["sandbox"]["denied"], true);
    assert!(!target.exists());
}

/// Records which threads asked it to prepare; confines nothing.
struct PrepareRecorder(std::sync::Mutex<Vec<String>>);

impl cordon::sandbox::Confine for PrepareRecorder {
    fn confine(
        &self,
        _argv: &[String],
        policy: &cordon::SandboxPolicy,
    ) -> Result<cordon::sandbox::Wrap, cordon::sandbox::Unavailable> {
        Err(cordon::sandbox::Unavailable {
            mode: policy.mode,
            detail: None,
        })
    }

    fn verify(&self) {
        let name = std::thread::current().name().unwrap_or("").to_owned();
        self.0.lock().unwrap().push(name);
    }
}

#[test]
fn probe_early_verifies_the_confiner_once_on_its_own_thread() {
    use std::sync::{Arc, Mutex};
    let eager = Arc::new(PrepareRecorder(Mutex::new(vec![])));
    let _host = cordon::Host::builder()
        .confiner(eager.clone())
        .probe_early()
        .build()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while eager.0.lock().unwrap().is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(*eager.0.lock().unwrap(), vec!["cordon-probe".to_owned()]);

    let lazy = Arc::new(PrepareRecorder(Mutex::new(vec![])));
    let _host = cordon::Host::builder()
        .confiner(lazy.clone())
        .build()
        .unwrap();
    std::thread::sleep(Duration::from_millis(50));
    assert!(
        lazy.0.lock().unwrap().is_empty(),
        "probes stay lazy by default"
    );
}

#[test]
fn a_probe_slower_than_a_policy_call_still_serves_the_run() {
    if !common::bwrap_usable("a_probe_slower_than_a_policy_call_still_serves_the_run") {
        return;
    }
    let ws = workspace();
    // The probe (`… -- true`) takes 2 s, longer than a policy call's 1 s
    // deadline; real runs go to the real bwrap.
    let config = common::fake_bwrap(
        ws.path(),
        "#!/bin/sh\ncase \"$*\" in *'--die-with-parent -- true') sleep 2; exit 0;; esac\nexec /usr/bin/bwrap \"$@\"\n",
    );
    let output = cordon()
        .current_dir(ws.path())
        .args(["run", "--json", "--backend", "bwrap", "--config"])
        .arg(&config)
        .args(["--", "echo served"])
        .output()
        .unwrap();
    let result = parse(&output);
    assert_eq!(output.status.code(), Some(0), "{result}");
    assert_eq!(result["stdout"]["text"], "served\n");
    assert_eq!(result["sandbox"]["enforcement"], "full");
}

/// `cordon run` with `config` in `dir/work`, its verdicts kept under
/// `dir/cache` (not the user's) and its component cache in `dir/components`.
fn run_with(
    dir: &std::path::Path,
    config: &std::path::Path,
    extra: &[&str],
    command: &str,
) -> std::process::Output {
    // The run's workspace is `dir/work`; the host's verdicts lie outside
    // it (Landlock refuses a run that could write them).
    let work = dir.join("work");
    std::fs::create_dir_all(&work).unwrap();
    cordon()
        .current_dir(&work)
        .env("XDG_CACHE_HOME", dir.join("cache"))
        .arg("run")
        .arg("--config")
        .arg(config)
        // Outside the workspace and outside /tmp (a checkout in /tmp puts the
        // shared cache there, which a writable Landlock run shares): the
        // embedded default needs no compiling, so a fresh cache costs nothing.
        .arg("--component-cache")
        .arg(dir.join("components"))
        .args(extra)
        .arg("--")
        .arg(command)
        .output()
        .unwrap()
}

#[test]
fn the_first_run_is_the_probe() {
    if !common::bwrap_usable("the_first_run_is_the_probe") {
        return;
    }
    let ws = workspace();
    let log = ws.path().join("bwrap.log");
    let config = common::fake_bwrap(ws.path(), &logged_script(&log, REAL_BWRAP));
    for round in 1..=2 {
        let output = run_with(ws.path(), &config, &[], "echo confined");
        assert!(output.status.success(), "{output:?}");
        assert_eq!(String::from_utf8_lossy(&output.stdout), "confined\n");
        assert_eq!(
            starts(&log),
            round,
            "one bwrap per run, no probe before it: {}",
            std::fs::read_to_string(&log).unwrap()
        );
    }
    // `cordon probe` still runs the probe itself.
    let probe = cordon()
        .env("XDG_CACHE_HOME", ws.path().join("cache"))
        .args(["probe", "--json", "--config"])
        .arg(&config)
        .output()
        .unwrap();
    let probe = parse(&probe);
    assert_eq!(probe["backend"], "bwrap", "{probe}");
    assert!(
        common::rung(&probe, "bwrap")["reason"]
            .as_str()
            .unwrap()
            .contains("ran the probe"),
        "{probe}"
    );
    assert_eq!(starts(&log), 3);
}

#[test]
fn a_runner_that_cannot_start_fails_closed_and_is_remembered_until_it_changes() {
    if !cfg!(target_os = "linux") {
        eprintln!("SKIPPED a_runner_that_cannot_start_…: Linux only");
        return;
    }
    let ws = workspace();
    let log = ws.path().join("bwrap.log");
    let failing = logged_script(
        &log,
        "echo 'bwrap: setting up uid map: Permission denied' >&2\nexit 1",
    );
    let config = common::fake_bwrap(ws.path(), &failing);
    let marker = ws.path().join("work/ran");
    let touch = format!("touch {}", marker.display());
    let pinned = ["--backend", "bwrap", "--mode", "workspace-write"];
    // The first run is the trial; its probe confirms the failure.
    let output = run_with(ws.path(), &config, &pinned, &touch);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(69), "{stderr}");
    assert!(
        stderr.contains("SANDBOX_UNAVAILABLE")
            && stderr.contains("bwrap: setting up uid map: Permission denied"),
        "names the runner's reason: {stderr}"
    );
    assert!(!marker.exists(), "the command ran unconfined");
    assert_eq!(starts(&log), 2, "the run, then the probe");
    // The next host remembers: bwrap is not started again this boot.
    let output = run_with(ws.path(), &config, &pinned, &touch);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(69), "{stderr}");
    assert!(
        stderr.contains("remembered from a probe earlier this boot"),
        "{stderr}"
    );
    assert_eq!(starts(&log), 2, "a remembered verdict starts nothing");
    assert!(!marker.exists());
    // A new runner binary is looked at again.
    let fake = ws.path().join("bin/bwrap");
    std::fs::write(&fake, format!("{failing}# upgraded\n")).unwrap();
    let output = run_with(ws.path(), &config, &pinned, &touch);
    assert_eq!(output.status.code(), Some(69));
    assert_eq!(starts(&log), 4, "tried (and probed) again");
    assert!(!marker.exists());
    // And once it works, runs go through it.
    if common::bwrap_usable("a_runner_that_cannot_start_… (repaired)") {
        std::fs::write(&fake, logged_script(&log, REAL_BWRAP)).unwrap();
        let output = run_with(ws.path(), &config, &pinned, &touch);
        assert!(output.status.success(), "{output:?}");
        assert!(marker.exists(), "the repaired runner runs the command");
        assert_eq!(starts(&log), 5);
    }
}

#[test]
fn the_ladder_moves_down_when_the_first_run_shows_bwrap_unusable() {
    if !common::landlock_usable("the_ladder_moves_down_when_the_first_run_shows_bwrap_unusable") {
        return;
    }
    let ws = workspace();
    let log = ws.path().join("bwrap.log");
    let config = common::fake_bwrap(
        ws.path(),
        &logged_script(
            &log,
            "echo 'bwrap: Creating new namespace failed: Operation not permitted' >&2
exit 1",
        ),
    );
    let other = workspace();
    let outside = other.path().join("outside.txt");
    let inside = ws.path().join("work/inside");
    let command = format!(
        "echo x > {}; echo y > {}; echo done",
        outside.display(),
        inside.display()
    );
    for round in 1..=2 {
        let output = run_with(ws.path(), &config, &["--mode", "workspace-write"], &command);
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(stdout.ends_with("done\n"), "round {round}: {output:?}");
        assert!(
            !outside.exists(),
            "round {round}: Landlock confined the run"
        );
        assert_eq!(std::fs::read_to_string(&inside).unwrap(), "y\n");
        std::fs::remove_file(&inside).unwrap();
    }
    assert_eq!(
        starts(&log),
        2,
        "the first run's trial and probe; then remembered"
    );
}

/// `cordon` started under a seccomp filter that refuses `unshare` — as an
/// unprivileged container's default profile does: no process it starts
/// can make namespaces that way.
fn cordon_without_unshare() -> std::process::Command {
    use seccompiler::{BpfProgram, SeccompAction, SeccompFilter};
    use std::os::unix::process::CommandExt;
    let filter = SeccompFilter::new(
        [(nix::libc::SYS_unshare, vec![])].into_iter().collect(),
        SeccompAction::Allow,
        SeccompAction::Errno(nix::libc::EPERM as u32),
        std::env::consts::ARCH.try_into().unwrap(),
    )
    .unwrap();
    let program: BpfProgram = filter.try_into().unwrap();
    let mut command = cordon();
    // SAFETY: the filter is built before the fork; the child only installs it.
    unsafe {
        command
            .pre_exec(move || seccompiler::apply_filter(&program).map_err(std::io::Error::other));
    }
    command
}

#[test]
fn the_first_run_that_shows_the_namespace_runner_unusable_falls_to_bwrap() {
    if !common::namespaces_usable(
        "the_first_run_that_shows_the_namespace_runner_unusable_falls_to_bwrap",
    ) || !common::bwrap_usable(
        "the_first_run_that_shows_the_namespace_runner_unusable_falls_to_bwrap",
    ) {
        return;
    }
    if !nix::unistd::geteuid().is_root() {
        // Without root bwrap makes its user namespace with `unshare` too,
        // so the filter below leaves it no more usable than cordon's runner.
        eprintln!(
            "SKIPPED the_first_run_that_shows_the_namespace_runner_unusable_falls_to_bwrap: \
             not root, so bwrap needs unshare as well"
        );
        return;
    }
    let ws = workspace();
    let work = ws.path().join("work");
    std::fs::create_dir_all(&work).unwrap();
    let log = work.join("runs");
    let escaped = std::path::Path::new("/etc").join(format!("cordon-fell-{}", std::process::id()));
    let command = format!(
        "echo once >> {}; echo x > {}",
        log.display(),
        escaped.display()
    );
    let run = || {
        cordon_without_unshare()
            .current_dir(&work)
            .env("XDG_CACHE_HOME", ws.path().join("cache"))
            .args([
                "run",
                "--json",
                "--mode",
                "workspace-write",
                "--component-cache",
            ])
            .arg(ws.path().join("components"))
            .arg("--")
            .arg(&command)
            .output()
            .unwrap()
    };
    for round in 1..=2 {
        let output = run();
        let result = parse(&output);
        assert!(!escaped.exists(), "round {round}: the run was not confined");
        assert_eq!(result["sandbox"]["denied"], true, "round {round}: {result}");
        // bwrap's denial (Landlock's reads "Permission denied").
        assert!(
            result["stderr"]["text"]
                .as_str()
                .unwrap()
                .contains("Read-only file system"),
            "round {round}: {result}"
        );
        // The namespace runner's failed first run and probe are kept.
        let kept: Vec<String> = std::fs::read_dir(ws.path().join("cache/cordon/verdicts"))
            .unwrap()
            .filter_map(|entry| std::fs::read_to_string(entry.ok()?.path()).ok())
            .collect();
        assert!(
            kept.iter()
                .any(|verdict| verdict.contains("cannot create the sandbox's namespaces")),
            "round {round}: the namespace runner's verdict is kept: {kept:?}"
        );
        assert_eq!(
            std::fs::read_to_string(&log).unwrap().lines().count(),
            round,
            "round {round}: the command ran exactly once per run: {result}"
        );
    }
    // The verdict is remembered: `cordon probe` (which probes afresh) says
    // why, naming the kernel's refusal.
    let probe = cordon_without_unshare()
        .env("XDG_CACHE_HOME", ws.path().join("cache"))
        .args(["probe", "--json"])
        .output()
        .unwrap();
    let probe = parse(&probe);
    assert_eq!(probe["backend"], "bwrap", "{probe}");
    let reason = common::rung(&probe, "namespaces")["reason"]
        .as_str()
        .unwrap();
    assert!(
        reason.contains("cannot create the sandbox's namespaces"),
        "{reason}"
    );
}
