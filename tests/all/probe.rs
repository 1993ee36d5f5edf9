//! `cordon probe` and the deployment config: which backend, why, bounded
//! probes, and precise config errors.

use crate::common;

use std::time::{Duration, Instant};

use common::{cordon, parse, workspace};

#[test]
fn probe_names_the_backend_and_every_rung() {
    let output = cordon().args(["probe", "--json"]).output().unwrap();
    let probe = parse(&output);
    let rungs = probe["rungs"].as_array().unwrap();
    if cfg!(target_os = "linux") {
        assert_eq!(rungs[0]["backend"], "bwrap");
        assert_eq!(rungs[1]["backend"], "landlock");
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
    assert_eq!(probe["rungs"][0]["usable"], false);
    assert!(
        probe["rungs"][0]["reason"]
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

    fn prepare(&self) {
        let name = std::thread::current().name().unwrap_or("").to_owned();
        self.0.lock().unwrap().push(name);
    }
}

#[test]
fn probe_early_prepares_the_confiner_once_on_its_own_thread() {
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
