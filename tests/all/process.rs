//! Process mechanics through the real library host: timeouts and kill
//! escalation, output tails and spills, stdin, environment scrub, fd
//! hygiene, aborts. Real processes; real bwrap where a mode is confined.

use crate::common;

use std::os::fd::AsRawFd;
use std::path::Path;
use std::time::{Duration, Instant};

use common::{bwrap_usable, danger, workspace};
use cordon::{CancellationToken, ExecRequest, Host, RunOptions, SandboxMode};

const GRACE: Duration = common::TEST_GRACE;

fn host(dir: &Path, tail: usize) -> Host {
    common::test_host(dir, tail)
}

fn read_only(dir: &Path, command: &str) -> ExecRequest {
    common::request(SandboxMode::ReadOnly, dir, command)
}

fn marker(tag: u32) -> String {
    format!("3{tag}.{}", std::process::id())
}

fn gone(needle: &str) -> bool {
    common::processes_gone(needle)
}

#[tokio::test]
async fn a_timeout_terminates_with_sigterm_within_the_grace() {
    let ws = workspace();
    let host = host(ws.path(), 64_000);
    let started = Instant::now();
    let result = host
        .run(danger(ws.path(), "sleep 60").with_timeout_ms(100))
        .await
        .unwrap();
    assert!(result.timed_out);
    assert!(!result.aborted);
    assert_eq!(result.signal, Some(15));
    assert_eq!(result.exit_code, None);
    assert!(started.elapsed() < Duration::from_millis(100) + GRACE + Duration::from_secs(2));
}

#[tokio::test]
async fn a_term_trapping_command_dies_by_sigkill_after_the_grace() {
    let ws = workspace();
    let host = host(ws.path(), 64_000);
    let started = Instant::now();
    let result = host
        // 600 ms: the shell has set its trap by then even on a loaded
        // machine (at 100 ms a slow start met the TERM untrapped).
        .run(danger(ws.path(), "trap '' TERM; sleep 60; true").with_timeout_ms(600))
        .await
        .unwrap();
    assert!(result.timed_out);
    assert_eq!(result.signal, Some(9));
    assert!(started.elapsed() >= Duration::from_millis(600) + GRACE);
}

#[tokio::test]
async fn the_whole_group_dies_even_after_the_leader_exited() {
    let ws = workspace();
    let host = host(ws.path(), 64_000);
    let mark = marker(1);
    // The leader dies of SIGTERM; the TERM-ignoring grandchild must still
    // be killed once the grace has passed.
    let command = format!("(trap '' TERM; exec sleep {mark}) & sleep 60");
    let result = host
        .run(danger(ws.path(), &command).with_timeout_ms(200))
        .await
        .unwrap();
    assert!(result.timed_out);
    assert!(gone(&format!("sleep {mark}")), "grandchild survived");
}

#[tokio::test]
async fn a_background_grandchild_dies_with_a_timed_out_run() {
    let ws = workspace();
    let host = host(ws.path(), 64_000);
    let mark = marker(2);
    let result = host
        .run(danger(ws.path(), &format!("sleep {mark} & sleep 60")).with_timeout_ms(100))
        .await
        .unwrap();
    assert!(result.timed_out);
    assert!(gone(&format!("sleep {mark}")), "grandchild survived");
}

#[tokio::test]
async fn a_command_that_kills_itself_is_neither_timed_out_nor_aborted() {
    let ws = workspace();
    let host = host(ws.path(), 64_000);
    let result = host.run(danger(ws.path(), "kill -TERM $$")).await.unwrap();
    assert_eq!(result.signal, Some(15));
    assert!(!result.timed_out);
    assert!(!result.aborted);
}

#[tokio::test]
async fn a_confined_timeout_kills_the_sandbox() {
    if !bwrap_usable("a_confined_timeout_kills_the_sandbox") {
        return;
    }
    let ws = workspace();
    let host = host(ws.path(), 64_000);
    let mark = marker(3);
    let result = host
        .run(read_only(ws.path(), &format!("sleep {mark} & sleep 60")).with_timeout_ms(100))
        .await
        .unwrap();
    assert!(result.timed_out);
    assert_eq!(result.signal, Some(15));
    assert!(
        gone(&format!("sleep {mark}")),
        "sandboxed grandchild survived"
    );
}

#[tokio::test]
async fn an_abort_terminates_the_group_and_is_reported() {
    let ws = workspace();
    let host = host(ws.path(), 64_000);
    let abort = CancellationToken::new();
    let canceller = abort.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(150)).await;
        canceller.cancel();
    });
    let options = RunOptions {
        abort: Some(abort),
        ..RunOptions::default()
    };
    let result = host
        .run_with(danger(ws.path(), "sleep 60"), options)
        .await
        .unwrap();
    assert!(result.aborted);
    assert!(!result.timed_out);
    assert_eq!(result.signal, Some(15));
}

#[tokio::test]
async fn an_abort_before_the_start_spawns_nothing() {
    let ws = workspace();
    let host = host(ws.path(), 64_000);
    let marker = ws.path().join("spawned");
    let abort = CancellationToken::new();
    abort.cancel();
    let options = RunOptions {
        abort: Some(abort),
        ..RunOptions::default()
    };
    let err = host
        .run_with(
            danger(ws.path(), &format!("touch {}", marker.display())),
            options,
        )
        .await
        .expect_err("an abort before the start is an error");
    assert!(matches!(err, cordon::RunError::Aborted), "{err}");
    assert_eq!(err.code(), "ABORTED");
    // Give a wrongly spawned command time to leave its mark.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!marker.exists(), "the command was spawned");
}

#[tokio::test]
async fn dropping_the_run_future_kills_the_group() {
    let ws = workspace();
    let host = host(ws.path(), 64_000);
    let mark = marker(4);
    let run = host.run(danger(ws.path(), &format!("sleep {mark} & sleep {mark}")));
    assert!(
        tokio::time::timeout(Duration::from_millis(300), run)
            .await
            .is_err()
    );
    assert!(
        gone(&format!("sleep {mark}")),
        "a dropped run left its group"
    );
}

#[tokio::test]
async fn past_the_cap_the_tail_is_exact_and_the_spill_is_whole() {
    let ws = workspace();
    let host = host(ws.path(), 100);
    let result = host
        .run(danger(
            ws.path(),
            "head -c 500 /dev/zero | tr '\\0' x; printf END",
        ))
        .await
        .unwrap();
    let out = &result.stdout;
    assert!(out.truncated);
    assert_eq!(out.text.len(), 100);
    assert!(out.text.ends_with("END"));
    let spill = out.spill_path.as_ref().expect("spilled");
    assert_eq!(std::fs::read(spill).unwrap().len(), 503);
    let spill = spill.clone();
    drop(result);
    assert!(!spill.exists(), "the spill outlived its last reference");
}

#[tokio::test]
async fn exactly_the_cap_is_neither_truncated_nor_spilled() {
    let ws = workspace();
    let host = host(ws.path(), 100);
    let result = host
        .run(danger(ws.path(), "head -c 100 /dev/zero | tr '\\0' x"))
        .await
        .unwrap();
    assert!(!result.stdout.truncated);
    assert_eq!(result.stdout.text.len(), 100);
    assert_eq!(result.stdout.spill_path, None);
}

#[tokio::test]
async fn numbered_lines_spill_whole_and_keep_the_end() {
    if !bwrap_usable("numbered_lines_spill_whole_and_keep_the_end") {
        return;
    }
    let ws = workspace();
    let host = host(ws.path(), 100);
    let result = host.run(read_only(ws.path(), "seq 1 200")).await.unwrap();
    let spill = std::fs::read_to_string(result.stdout.spill_path.as_ref().unwrap()).unwrap();
    let expected: String = (1..=200).map(|i| format!("{i}\n")).collect();
    assert_eq!(spill, expected);
    assert!(result.stdout.text.ends_with("199\n200\n"));
    assert!(!result.stdout.text.starts_with("1\n"));
    assert!(!result.stdout.text.contains("\n1\n"));
}

#[test]
fn a_one_gib_flood_keeps_host_memory_bounded_and_drops_the_spill() {
    let ws = workspace();
    // The child is reaped by `wait4` (for its rusage), not by `Child::wait`.
    #[allow(clippy::zombie_processes)]
    let cordon_run = |command: &str| {
        let mut child = common::cordon()
            .current_dir(ws.path())
            .args(["run", "--json", "--max-mode", "danger-full-access"])
            .args(["--mode", "danger-full-access", "--", command])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdout = child.stdout.take().unwrap();
        let reader = std::thread::spawn(move || {
            let mut bytes = vec![];
            std::io::Read::read_to_end(&mut stdout, &mut bytes).unwrap();
            bytes
        });
        let peak_kib = reap_with_peak_rss_kib(child.id());
        let json: serde_json::Value = serde_json::from_slice(&reader.join().unwrap()).unwrap();
        (json, peak_kib)
    };
    let (_, baseline) = cordon_run("true");
    let (result, flooded) = cordon_run("yes | head -c 1073741824");
    assert_eq!(result["stdout"]["truncated"], true);
    assert_eq!(result["stdout"]["text"].as_str().unwrap().len(), 64_000);
    assert!(
        result["stdout"].get("spillPath").is_none(),
        "a spill past 64 MiB is dropped"
    );
    let grown = flooded.saturating_sub(baseline);
    eprintln!("peak RSS: baseline {baseline} KiB, 1 GiB flood {flooded} KiB");
    assert!(
        grown < 16 * 1024,
        "host RSS grew by {grown} KiB on a 1 GiB flood"
    );
}

/// Reap our child `pid` and return its peak RSS (`ru_maxrss`, KiB).
fn reap_with_peak_rss_kib(pid: u32) -> u64 {
    use nix::libc;
    let mut status = 0;
    // SAFETY: an all-zero rusage is a valid value to be filled in.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `pid` is our own child; wait4 reaps it and fills `usage`.
    let reaped = unsafe { libc::wait4(pid as libc::pid_t, &mut status, 0, &mut usage) };
    assert_eq!(reaped, pid as libc::pid_t);
    usage.ru_maxrss as u64
}

#[tokio::test]
async fn stdin_bytes_reach_the_command_and_an_ignored_mebibyte_cannot_hang_it() {
    let ws = workspace();
    let host = host(ws.path(), 64_000);
    let result = host
        .run(danger(ws.path(), "cat").with_stdin("fed\n"))
        .await
        .unwrap();
    assert_eq!(result.stdout.text, "fed\n");
    let ignored = host
        .run(
            danger(ws.path(), "true")
                .with_stdin(vec![b'x'; 1 << 20])
                .with_timeout_ms(10_000),
        )
        .await
        .unwrap();
    assert_eq!(ignored.exit_code, Some(0));
    assert!(!ignored.timed_out);
    let none = host.run(danger(ws.path(), "cat")).await.unwrap();
    assert_eq!(none.stdout.text, "", "stdin is /dev/null by default");
}

#[tokio::test]
async fn only_fds_0_to_2_reach_the_command() {
    let ws = workspace();
    let host = host(ws.path(), 64_000);
    let file = std::fs::File::create(ws.path().join("secret-fd")).unwrap();
    let fd = file.as_raw_fd();
    // Make the fd inheritable, as a careless library in the host might.
    nix::fcntl::fcntl(
        &file,
        nix::fcntl::FcntlArg::F_SETFD(nix::fcntl::FdFlag::empty()),
    )
    .unwrap();
    let mut requests = vec![danger(ws.path(), &format!("echo leaked >&{fd}"))];
    if bwrap_usable("only_fds_0_to_2_reach_the_command (confined)") {
        requests.push(read_only(ws.path(), &format!("echo leaked >&{fd}")));
    }
    for request in requests {
        let result = host.run(request).await.unwrap();
        assert_ne!(result.exit_code, Some(0), "fd {fd} was usable");
        assert!(
            result.stderr.text.contains("Bad file descriptor"),
            "{}",
            result.stderr.text
        );
    }
    assert_eq!(std::fs::read(ws.path().join("secret-fd")).unwrap(), b"");
}

/// Credentials a review found passing the scrub (issue 34), with values
/// of their real shapes.
const LATER_CREDENTIALS: &[(&str, &str)] = &[
    ("BORG_PASSPHRASE", "correct horse"),
    ("GPG_PASSPHRASE", "battery staple"),
    ("SSHPASS", "hunter2"),
    ("PGPASSWORD", "pg"),
    ("PGPASS", "pg"),
    ("MNEMONIC", "abandon abandon about"),
    ("MASTER_SEED", "00ff"),
    (
        "AZURE_STORAGE_CONNECTION_STRING",
        "DefaultEndpointsProtocol=https;AccountName=a;AccountKey=c2VjcmV0",
    ),
    ("SENTRY_DSN", "https://0123abcd@o1.ingest.sentry.io/1"),
    (
        "SLACK_WEBHOOK_URL",
        "https://hooks.slack.com/services/T0/B0/X",
    ),
    ("ANY_NAME_AT_ALL", "Server=db;User Id=sa;Password=hunter2;"),
];

#[test]
fn credentials_are_scrubbed_and_explicit_entries_survive() {
    let ws = workspace();
    let output = common::cordon()
        .current_dir(ws.path())
        .env("AWS_SECRET_ACCESS_KEY", "aws")
        .env("GITHUB_TOKEN", "gh")
        .env("db_password", "db")
        .env("CORDON_X", "x")
        .envs(LATER_CREDENTIALS.iter().copied())
        .args(["run", "--json", "--env", "EXPLICIT_OVERRIDE_PASSWORD=1"])
        .args([
            "--max-mode",
            "danger-full-access",
            "--mode",
            "danger-full-access",
        ])
        .args(["--", "env"])
        .output()
        .unwrap();
    let result = common::parse(&output);
    let env = result["stdout"]["text"].as_str().unwrap();
    for name in [
        "AWS_SECRET_ACCESS_KEY",
        "GITHUB_TOKEN",
        "db_password",
        "CORDON_X",
    ]
    .into_iter()
    .chain(LATER_CREDENTIALS.iter().map(|(name, _)| *name))
    {
        assert!(!env.contains(&format!("{name}=")), "{name} leaked");
    }
    assert!(env.lines().any(|l| l.starts_with("PATH=")));
    assert!(env.lines().any(|l| l == "EXPLICIT_OVERRIDE_PASSWORD=1"));
    assert!(env.lines().any(|l| l == "NO_COLOR=1"));
}

#[test]
fn the_cli_feeds_a_stdin_file() {
    let ws = workspace();
    let input = ws.path().join("input.txt");
    std::fs::write(&input, "from a file\n").unwrap();
    let output = common::cordon()
        .current_dir(ws.path())
        .args(["run", "--stdin-file", input.to_str().unwrap()])
        .args([
            "--max-mode",
            "danger-full-access",
            "--mode",
            "danger-full-access",
        ])
        .args(["--", "tr a-z A-Z"])
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&output.stdout), "FROM A FILE\n");
}

#[test]
fn ctrl_c_terminates_the_commands_group() {
    let ws = workspace();
    let mark = marker(5);
    let mut child = common::cordon()
        .current_dir(ws.path())
        .args([
            "run",
            "--max-mode",
            "danger-full-access",
            "--mode",
            "danger-full-access",
        ])
        .arg("--")
        .arg(format!("sleep {mark} & sleep {mark}"))
        .spawn()
        .unwrap();
    common::wait_for_processes(&format!("sleep {mark}"), 2);
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGINT,
    )
    .unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130));
    assert!(
        gone(&format!("sleep {mark}")),
        "Ctrl-C left the group alive"
    );
}

#[tokio::test]
async fn a_command_leads_its_own_session_with_default_signal_dispositions() {
    // The host (like every Rust program) ignores SIGPIPE; a command must not
    // inherit that, nor the host's session (and with it its terminal).
    let ws = workspace();
    let host = host(ws.path(), 64_000);
    let script = r#"read -r _ _ _ _ _ sid _ < /proc/$$/stat; grep '^SigIgn' /proc/self/status; echo "session $sid pid $$""#;
    let result = host.run(danger(ws.path(), script)).await.unwrap();
    assert_eq!(result.exit_code, Some(0), "{}", result.stderr.text);
    let lines: Vec<&str> = result.stdout.text.lines().collect();
    assert_eq!(
        lines[0], "SigIgn:\t0000000000000000",
        "{}",
        result.stdout.text
    );
    let words: Vec<&str> = lines[1].split(' ').collect();
    assert_eq!(words[1], words[3], "the command leads its own session");
}

#[tokio::test]
async fn a_program_missing_from_the_commands_path_is_a_spawn_error() {
    let ws = workspace();
    let host = host(ws.path(), 64_000);
    let mut request = danger(ws.path(), "true");
    request.env.push(("PATH".into(), "/nonexistent".into()));
    let err = host.run(request).await.unwrap_err();
    assert_eq!(err.code(), "SPAWN_FAILED", "{err}");
    assert!(
        err.to_string().contains("not found in the command's PATH"),
        "{err}"
    );
}

#[test]
fn a_bwrap_killed_from_outside_is_a_runner_failure_not_the_commands_death() {
    if !bwrap_usable("a_bwrap_killed_from_outside_is_a_runner_failure_not_the_commands_death") {
        return;
    }
    let ws = workspace();
    let sleep = format!("sleep 9.{}", std::process::id());
    let child = common::cordon()
        .current_dir(ws.path())
        .args(["run", "--json", "--backend", "bwrap", "--", &sleep])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Wait for the command itself: bwrap set up the sandbox (killing it
    // earlier races its own --die-with-parent setup).
    let started = std::time::Instant::now();
    while !common::host_processes_with(&sleep).into_iter().any(|pid| {
        std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| c.starts_with(b"sleep\0"))
    }) {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "the command never started"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // The outer bwrap is the first (lowest pid) of the two bwraps.
    let bwrap = *common::bwraps_running(&sleep)
        .first()
        .expect("the outer bwrap");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(bwrap as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    common::assert_runner_failure(
        child.wait_with_output().unwrap(),
        "bwrap was killed by signal 9",
    );
    assert!(gone(&sleep), "the sandboxed command outlived its runner");
}
