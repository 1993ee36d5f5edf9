//! Background tasks through the real library host (SPEC.md §4): start,
//! consuming reads, kill, wait, facts stamped per task, spawn failures,
//! shutdown. Real processes; real bwrap where a mode is confined.

use crate::common;

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{bwrap_usable, danger, host_processes_with, request, workspace};
use cordon::model::{Backend, Enforcement, Signatures, WrapFacts};
use cordon::sandbox::{Confine, Unavailable, Wrap};
use cordon::{
    Deployment, Evidence, ExecRequest, Host, SandboxFacts, SandboxMode, SandboxPolicy, TaskHandle,
    TaskStatus,
};

fn host(dir: &Path, tail: usize) -> Host {
    common::test_host(dir, tail)
}

/// Read until the accumulated text satisfies `done` (bounded).
async fn read_until(task: &TaskHandle, done: impl Fn(&str) -> bool) -> String {
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut text = String::new();
    while !done(&text) {
        assert!(Instant::now() < deadline, "gave up reading; got {text:?}");
        text.push_str(&task.read().text);
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    text
}

#[tokio::test]
async fn start_returns_at_once_and_reads_consume() {
    let ws = workspace();
    let host = host(ws.path(), 64_000);
    let gate = ws.path().join("go");
    let command = format!(
        "echo first; while [ ! -e {g} ]; do sleep 0.02; done; echo second",
        g = gate.display()
    );
    let started = Instant::now();
    let task = host.start(danger(ws.path(), &command)).await.unwrap();
    assert!(
        started.elapsed() < Duration::from_millis(150),
        "start blocked"
    );
    assert_eq!(task.snapshot().status, TaskStatus::Running);

    assert_eq!(read_until(&task, |t| !t.is_empty()).await, "first\n");
    std::fs::write(&gate, "").unwrap();
    assert_eq!(read_until(&task, |t| !t.is_empty()).await, "second\n");
    let done = task.wait(Some(Duration::from_secs(10))).await;
    assert_eq!(done.status, TaskStatus::Completed);
    assert_eq!(done.exit_code, Some(0));
    let last = task.read();
    assert_eq!(last.text, "");
    assert!(!last.lossy);
}

#[tokio::test]
async fn reads_put_stderr_in_its_own_section() {
    let ws = workspace();
    let host = host(ws.path(), 64_000);
    let task = host
        .start(danger(ws.path(), "echo out; echo err >&2"))
        .await
        .unwrap();
    task.wait(None).await;
    assert_eq!(task.read().text, "out\n[stderr]\nerr\n");

    let task = host
        .start(danger(ws.path(), "printf out; printf err >&2"))
        .await
        .unwrap();
    task.wait(None).await;
    assert_eq!(task.read().text, "out\n[stderr]\nerr");

    let task = host
        .start(danger(ws.path(), "echo only >&2"))
        .await
        .unwrap();
    task.wait(None).await;
    assert_eq!(task.read().text, "[stderr]\nonly\n");
}

#[tokio::test]
async fn a_reader_that_fell_behind_gets_the_tail_and_the_spill() {
    let ws = workspace();
    let host = host(ws.path(), 100);
    let task = host
        .start(danger(ws.path(), "head -c 500 /dev/zero | tr '\\0' y"))
        .await
        .unwrap();
    task.wait(None).await;
    let read = task.read();
    assert!(read.lossy);
    assert_eq!(read.text, "y".repeat(100));
    assert_eq!(read.spill_paths.len(), 1);
    assert_eq!(std::fs::read(&read.spill_paths[0]).unwrap().len(), 500);
    assert!(host.remove_task(task.id()));
    assert!(
        read.spill_paths[0].exists(),
        "a live handle still references it"
    );
    drop(task);
    assert!(
        !read.spill_paths[0].exists(),
        "removing the task and its last handle frees its spill"
    );
}

#[tokio::test]
async fn kill_is_true_once_while_running() {
    let ws = workspace();
    let host = host(ws.path(), 64_000);
    let task = host.start(danger(ws.path(), "sleep 60")).await.unwrap();
    assert!(task.kill());
    assert!(!task.kill());
    let done = task.wait(Some(Duration::from_secs(10))).await;
    assert_eq!(done.status, TaskStatus::Killed);
    assert!(!task.kill());
    assert!(!host.remove_task("0123456789abcdef0123456789abcdef".parse().unwrap()));
}

#[tokio::test]
async fn wait_is_bounded() {
    let ws = workspace();
    let host = host(ws.path(), 64_000);
    let task = host.start(danger(ws.path(), "sleep 60")).await.unwrap();
    let snapshot = task.wait(Some(Duration::from_millis(50))).await;
    assert_eq!(snapshot.status, TaskStatus::Running);
    assert!(
        !host.remove_task(task.id()),
        "a running task is not removed"
    );
    task.kill();
}

#[tokio::test]
async fn an_explicit_timeout_applies_to_a_task() {
    let ws = workspace();
    let host = host(ws.path(), 64_000);
    let task = host
        .start(danger(ws.path(), "sleep 60").with_timeout_ms(100))
        .await
        .unwrap();
    let done = task.wait(Some(Duration::from_secs(10))).await;
    assert_eq!(done.status, TaskStatus::Killed);
    assert!(done.timed_out);
}

#[tokio::test]
async fn overlapping_tasks_are_stamped_with_their_own_facts() {
    if !bwrap_usable("overlapping_tasks_are_stamped_with_their_own_facts") {
        return;
    }
    let ws = workspace();
    let host = host(ws.path(), 64_000);
    let root = ws.path();
    let denied = host
        .start(request(
            SandboxMode::ReadOnly,
            root,
            &format!("sleep 0.3; echo a > {}/a", root.display()),
        ))
        .await
        .unwrap();
    let allowed = host
        .start(request(
            SandboxMode::WorkspaceWrite,
            root,
            &format!("sleep 0.3; echo b > {}/b", root.display()),
        ))
        .await
        .unwrap();
    let unconfined = host.start(danger(root, "sleep 0.3; exit 1")).await.unwrap();
    // `wait` returns only after the facts are stamped.
    let denied = denied.wait(None).await;
    assert_eq!(
        denied.sandbox,
        Some(SandboxFacts {
            mode: SandboxMode::ReadOnly,
            denied: true,
            enforcement: Some(Enforcement::Full),
            runner_failed: false,
            evidence: Some(Evidence::Text),
            denials: vec![],
        })
    );
    assert_eq!(denied.status, TaskStatus::Completed);
    let allowed = allowed.wait(None).await;
    assert_eq!(
        allowed.sandbox,
        Some(SandboxFacts {
            mode: SandboxMode::WorkspaceWrite,
            denied: false,
            enforcement: Some(Enforcement::Full),
            runner_failed: false,
            evidence: Some(Evidence::Text),
            denials: vec![],
        })
    );
    assert!(root.join("b").exists() && !root.join("a").exists());
    let unconfined = unconfined.wait(None).await;
    assert_eq!(unconfined.sandbox, None, "unconfined tasks carry no facts");
    assert_eq!(unconfined.exit_code, Some(1));
}

/// A confiner whose runner binary does not exist.
struct MissingRunner;

impl Confine for MissingRunner {
    fn confine(&self, argv: &[String], policy: &SandboxPolicy) -> Result<Wrap, Unavailable> {
        RunnerAt("/nonexistent/cordon-test-runner".into()).confine(argv, policy)
    }
}

/// A confiner whose runner is the file at this path, whatever it is.
pub(crate) struct RunnerAt(pub(crate) String);

impl Confine for RunnerAt {
    fn confine(&self, argv: &[String], policy: &SandboxPolicy) -> Result<Wrap, Unavailable> {
        let mut wrapped = vec![self.0.clone()];
        wrapped.extend(argv.iter().cloned());
        let facts = WrapFacts {
            backend: Backend::RunnerCommand,
            enforcement: Enforcement::Full,
            signatures: Signatures::default(),
        };
        Ok(Wrap::new(wrapped, policy.clone(), facts))
    }
}

#[tokio::test]
async fn a_background_runner_failure_is_killed_runner_failed_and_said_once() {
    let ws = workspace();
    let host = Host::builder()
        .deployment(Deployment::in_dir(ws.path()))
        .confiner(Arc::new(MissingRunner))
        .build()
        .unwrap();
    let marker = ws.path().join("ran");
    let task = host
        .start(ExecRequest::new(format!("touch {}", marker.display())))
        .await
        .unwrap();
    let done = task.wait(None).await;
    assert_eq!(done.status, TaskStatus::Killed);
    assert_eq!(
        done.sandbox,
        Some(SandboxFacts {
            mode: SandboxMode::ReadOnly,
            denied: false,
            enforcement: Some(Enforcement::Full),
            runner_failed: true,
            evidence: None,
            denials: vec![],
        })
    );
    let first = task.read().text;
    assert!(first.starts_with("[stderr]\nspawn failed: "), "{first:?}");
    assert!(
        first.contains("spawn failed: /nonexistent/cordon-test-runner: "),
        "the notice names the runner: {first:?}"
    );
    assert_eq!(task.read().text, "", "delivered once");
    assert!(!marker.exists());

    // The same failure in the foreground is SANDBOX_UNAVAILABLE.
    let err = host
        .run(ExecRequest::new(format!("touch {}", marker.display())))
        .await
        .unwrap_err();
    assert_eq!(err.code(), "SANDBOX_UNAVAILABLE");
    assert!(
        err.to_string().contains("/nonexistent/cordon-test-runner"),
        "{err}"
    );
    assert!(!marker.exists());
}

#[tokio::test]
async fn any_spawn_failure_of_a_confined_task_carries_its_sandbox_facts() {
    let ws = workspace();
    // An executable the kernel cannot run (ENOEXEC): not a missing runner.
    let garbage = common::garbage_executable(ws.path());
    let host = Host::builder()
        .deployment(Deployment::in_dir(ws.path()))
        .confiner(Arc::new(RunnerAt(garbage.to_string_lossy().into_owned())))
        .build()
        .unwrap();
    let task = host.start(ExecRequest::new("true")).await.unwrap();
    let done = task.wait(None).await;
    assert_eq!(done.status, TaskStatus::Killed);
    assert_eq!(
        done.sandbox,
        Some(SandboxFacts {
            mode: SandboxMode::ReadOnly,
            denied: false,
            enforcement: Some(Enforcement::Full),
            runner_failed: false,
            evidence: None,
            denials: vec![],
        })
    );
    assert!(
        task.read().text.starts_with("[stderr]\nspawn failed: "),
        "the notice says what failed"
    );
}

#[tokio::test]
async fn shutdown_terminates_every_live_group() {
    let ws = workspace();
    let host = host(ws.path(), 64_000);
    let mark = format!("37.{}", std::process::id());
    let mut tasks: Vec<TaskHandle> = vec![];
    for _ in 0..3 {
        let command = format!("sleep {mark} & sleep {mark}");
        tasks.push(host.start(danger(ws.path(), &command)).await.unwrap());
    }
    common::wait_for_processes(&format!("sleep {mark}"), 6);
    host.shutdown().await;
    for task in &tasks {
        assert_eq!(task.snapshot().status, TaskStatus::Killed);
    }
    assert!(host_processes_with(&format!("sleep {mark}")).is_empty());
    assert_eq!(host.tasks().len(), 3);
}

#[tokio::test]
async fn dropping_the_host_kills_live_groups() {
    let ws = workspace();
    let mark = format!("38.{}", std::process::id());
    let host = host(ws.path(), 64_000);
    host.start(danger(ws.path(), &format!("sleep {mark} & sleep {mark}")))
        .await
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while host_processes_with(&format!("sleep {mark}")).len() < 2 {
        assert!(Instant::now() < deadline, "task never started");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    drop(host);
    let deadline = Instant::now() + Duration::from_secs(5);
    while !host_processes_with(&format!("sleep {mark}")).is_empty() {
        assert!(
            Instant::now() < deadline,
            "dropping the host left a group alive"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn a_character_written_in_two_halves_is_read_whole() {
    let ws = workspace();
    let host = host(ws.path(), 64_000);
    let gate = ws.path().join("go");
    // "é" is C3 A9: the first byte, a pause until the gate opens, the second.
    let command = format!(
        "printf 'caf\\303'; while [ ! -e {g} ]; do sleep 0.02; done; printf '\\251\\n'",
        g = gate.display()
    );
    let task = host.start(danger(ws.path(), &command)).await.unwrap();
    let first = read_until(&task, |text| text.contains("caf")).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    let held = task.read();
    assert_eq!(held.status, TaskStatus::Running);
    assert_eq!(first + &held.text, "caf", "the half character is held back");
    std::fs::write(&gate, b"").unwrap();
    let rest = read_until(&task, |text| text.ends_with('\n')).await;
    assert_eq!(rest, "\u{e9}\n");
    assert_eq!(task.wait(None).await.status, TaskStatus::Completed);
}

#[tokio::test]
async fn a_task_is_planned_on_a_proven_runner() {
    // A task is not planned again once it started, so an unproven runner is
    // probed before its plan: a bwrap that cannot start sends the task down
    // the ladder, never into a killed task.
    if !common::landlock_usable("a_task_is_planned_on_a_proven_runner") {
        return;
    }
    let ws = workspace();
    let log = ws.path().join("bwrap.log");
    // Only its runner is used; the config it writes is not.
    common::fake_bwrap(
        ws.path(),
        &common::logged_script(
            &log,
            "echo 'bwrap: No permissions to create new namespace' >&2
exit 1",
        ),
    );
    let mut deployment = cordon::Deployment::in_dir(ws.path());
    deployment.max_mode = SandboxMode::DangerFullAccess;
    let host = Host::builder()
        .deployment(deployment)
        .sandbox(cordon::sandbox::SandboxConfig {
            // cordon's, but for its namespace runner (see `fake_bwrap`).
            launcher: Some(ws.path().join("bin/cordon-launcher")),
            bwrap: Some(ws.path().join("bin/bwrap")),
            verdicts: None,
            ..Default::default()
        })
        .spill_parent(ws.path())
        .build()
        .unwrap();
    let task = host
        .start(request(SandboxMode::ReadOnly, ws.path(), "echo confined"))
        .await
        .unwrap();
    let done = task.wait(Some(Duration::from_secs(10))).await;
    assert_eq!(done.status, TaskStatus::Completed, "{done:?}");
    assert_eq!(task.read().text, "confined\n");
    let lines = std::fs::read_to_string(&log).unwrap();
    assert_eq!(lines.lines().count(), 1, "the probe only: {lines}");
    assert!(lines.trim_end().ends_with("-- true"), "{lines}");
    assert_eq!(
        host.probe().unwrap().backend,
        Some(Backend::Landlock),
        "the ladder moved down"
    );
}
