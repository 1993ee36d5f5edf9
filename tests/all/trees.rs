//! A run's process tree, attempted from inside under every backend and
//! checked on the host afterwards (issue 13): nothing a command leaves
//! behind — a `setsid` grandchild, a double fork, a child that outlives its
//! leader — survives the run, nor the host's own `SIGKILL`; a timeout gets
//! its `SIGTERM` and grace; a signal death reads as a signal.

use std::io::Write;
use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

use crate::common::{
    self, confined_backends, cordon, processes_gone, run_json, sandbox, sleepers,
    wait_for_sleepers, workspace,
};

/// A `sleep` argument no other test uses: `TAG.PID` (sleep takes decimals).
fn mark(tag: u32) -> String {
    format!("{tag}.{}", std::process::id())
}

/// A command that leaves three kinds of leftovers, each a `sleep` carrying
/// `mark`: a `setsid` grandchild, a double-forked daemon, a plain child
/// that outlives the leader (which exits at once, or sleeps too when
/// `linger`).
fn leaver(mark: &str, linger: bool) -> String {
    let tail = if linger {
        format!("sleep {mark}")
    } else {
        "echo left".to_owned()
    };
    format!("(setsid sleep {mark} &); (sleep {mark} &) ; sleep {mark} & {tail}")
}

#[test]
fn nothing_a_command_leaves_behind_outlives_its_run() {
    let ws = workspace();
    for (n, (backend, _)) in confined_backends("nothing_a_command_leaves_behind_outlives_its_run")
        .into_iter()
        .enumerate()
    {
        let mark = mark(4100 + n as u32);
        let (code, result) = run_json(ws.path(), backend, &leaver(&mark, false));
        assert_eq!(code, 0, "{backend:?}: {result}");
        assert_eq!(result["stdout"]["text"], "left\n", "{backend:?}: {result}");
        // Checked the moment the run returned: no grace period.
        assert_eq!(
            sleepers(&mark),
            Vec::<u32>::new(),
            "{backend:?}: leftovers outlived the run"
        );
    }
}

#[test]
fn nothing_survives_a_timeout_either() {
    let ws = workspace();
    for (n, (backend, _)) in confined_backends("nothing_survives_a_timeout_either")
        .into_iter()
        .enumerate()
    {
        let mark = mark(4200 + n as u32);
        let mut args = backend.to_vec();
        args.extend(["--timeout-ms", "1500"]);
        let (code, result) = run_json(ws.path(), &args, &leaver(&mark, true));
        assert_eq!(code, 124, "{backend:?}: {result}");
        assert_eq!(result["timedOut"], true, "{backend:?}: {result}");
        assert_eq!(
            sleepers(&mark),
            Vec::<u32>::new(),
            "{backend:?}: leftovers outlived the timeout"
        );
    }
}

/// `cordon ARGS` in `dir` as a child with piped stdio.
fn spawn_cordon(dir: &Path, args: &[&str]) -> Child {
    cordon()
        .current_dir(dir)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn cordon")
}

/// SIGKILL `child` and reap it.
fn sigkill(mut child: Child) {
    kill(Pid::from_raw(child.id() as i32), Signal::SIGKILL).unwrap();
    let _ = child.wait();
}

#[test]
fn nothing_survives_the_host_being_sigkilled() {
    let ws = workspace();
    for (n, (backend, _)) in confined_backends("nothing_survives_the_host_being_sigkilled")
        .into_iter()
        .enumerate()
    {
        let mark = mark(4300 + n as u32);
        let mut args = vec!["run"];
        args.extend(backend);
        let command = leaver(&mark, true);
        args.extend(["--", &command]);
        let host = spawn_cordon(ws.path(), &args);
        wait_for_sleepers(&mark, 4);
        sigkill(host);
        assert!(
            processes_gone(&format!("sleep {mark}")),
            "{backend:?}: leftovers outlived the SIGKILLed host: {:?}",
            sleepers(&mark)
        );
    }
}

#[test]
fn a_background_task_dies_with_a_sigkilled_server() {
    let ws = workspace();
    for (n, (backend, _)) in confined_backends("a_background_task_dies_with_a_sigkilled_server")
        .into_iter()
        .enumerate()
    {
        let mark = mark(4400 + n as u32);
        let ticks = ws.path().join(format!("ticks-{n}"));
        let mut args = vec!["serve"];
        args.extend(backend);
        let mut server = spawn_cordon(ws.path(), &args);
        let command = format!(
            "(setsid sh -c 'while :; do echo . >> {ticks}; sleep {mark}; done' &); sleep {mark}",
            ticks = ticks.display()
        );
        let request = serde_json::json!({
            "jsonrpc": "2.0", "id": 1, "method": "start",
            "params": {
                "command": command,
                "policy": {"mode": "workspace-write", "workspaceRoot": ws.path()},
            },
        });
        let stdin = server.stdin.as_mut().unwrap();
        writeln!(stdin, "{request}").unwrap();
        stdin.flush().unwrap();
        wait_for_sleepers(&mark, 2);
        sigkill(server);
        assert!(
            processes_gone(&format!("sleep {mark}")),
            "{backend:?}: the task outlived the SIGKILLed server: {:?}",
            sleepers(&mark)
        );
        // Nothing writes into the workspace any more.
        let before = std::fs::metadata(&ticks).map(|m| m.len()).unwrap_or(0);
        std::thread::sleep(Duration::from_millis(300));
        let after = std::fs::metadata(&ticks).map(|m| m.len()).unwrap_or(0);
        assert_eq!(before, after, "{backend:?}: the task kept writing");
    }
}

#[test]
fn a_timeout_sends_sigterm_first_and_a_trap_runs() {
    let ws = workspace();
    for (n, (backend, _)) in confined_backends("a_timeout_sends_sigterm_first_and_a_trap_runs")
        .into_iter()
        .enumerate()
    {
        let marker = ws.path().join(format!("cleaned-{n}"));
        let mut args = backend.to_vec();
        let root = ws.path().to_str().unwrap();
        args.extend([
            "--mode",
            "workspace-write",
            "--workspace",
            root,
            "--timeout-ms",
            "500",
        ]);
        let command = format!(
            "trap 'echo cleaned > {}; exit 3' TERM; sleep 30 & wait",
            marker.display()
        );
        let (code, result) = run_json(ws.path(), &args, &command);
        assert_eq!(code, 124, "{backend:?}: {result}");
        assert_eq!(result["timedOut"], true, "{backend:?}: {result}");
        assert_eq!(
            std::fs::read_to_string(&marker).unwrap_or_default(),
            "cleaned\n",
            "{backend:?}: the TERM trap never ran: {result}"
        );
    }
}

#[test]
fn a_command_that_ignores_sigterm_is_killed_after_the_grace() {
    let ws = workspace();
    for (n, (backend, _)) in
        confined_backends("a_command_that_ignores_sigterm_is_killed_after_the_grace")
            .into_iter()
            .enumerate()
    {
        let mark = mark(4500 + n as u32);
        let mut args = backend.to_vec();
        args.extend(["--timeout-ms", "300"]);
        let started = Instant::now();
        let (code, result) = run_json(
            ws.path(),
            &args,
            &format!("trap '' TERM; sleep {mark} & sleep {mark}"),
        );
        assert_eq!(code, 124, "{backend:?}: {result}");
        assert_eq!(result["signal"], "SIGKILL", "{backend:?}: {result}");
        // The default grace is 3 s; the host's own margin is 1 s more.
        assert!(
            started.elapsed() < Duration::from_secs(8),
            "{backend:?}: took {:?}",
            started.elapsed()
        );
        assert_eq!(sleepers(&mark), Vec::<u32>::new(), "{backend:?}");
    }
}

#[test]
fn a_signal_death_is_a_signal_and_an_exit_code_is_an_exit_code() {
    let ws = workspace();
    for (backend, _) in
        confined_backends("a_signal_death_is_a_signal_and_an_exit_code_is_an_exit_code")
    {
        let (code, result) = run_json(ws.path(), backend, "kill -9 $$");
        assert_eq!(code, 137, "{backend:?}: {result}");
        assert_eq!(result["signal"], "SIGKILL", "{backend:?}: {result}");
        assert_eq!(result["exitCode"], serde_json::Value::Null, "{backend:?}");
        assert_eq!(sandbox(&result)["denied"], false, "{backend:?}: {result}");
        // After text that reads like a denial, still a signal, not a denial.
        let (_, result) = run_json(
            ws.path(),
            backend,
            "echo 'x: Read-only file system' >&2; echo 'x: Permission denied' >&2; kill -9 $$",
        );
        assert_eq!(result["signal"], "SIGKILL", "{backend:?}: {result}");
        assert_eq!(sandbox(&result)["denied"], false, "{backend:?}: {result}");
        // Positive control: a real exit code 137 is an exit code.
        let (code, result) = run_json(ws.path(), backend, "exit 137");
        assert_eq!(code, 137, "{backend:?}: {result}");
        assert_eq!(result["exitCode"], 137, "{backend:?}: {result}");
        assert_eq!(result["signal"], serde_json::Value::Null, "{backend:?}");
    }
}

#[test]
fn a_command_cannot_kill_the_server_that_runs_it() {
    let ws = workspace();
    for (backend, _) in confined_backends("a_command_cannot_kill_the_server_that_runs_it") {
        let mut args = vec!["serve"];
        args.extend(backend);
        let mut server = spawn_cordon(ws.path(), &args);
        let pid = server.id();
        let request = serde_json::json!({
            "jsonrpc": "2.0", "id": 1, "method": "run",
            "params": {"command": format!("kill -KILL {pid}; echo tried")},
        });
        let stdin = server.stdin.as_mut().unwrap();
        writeln!(stdin, "{request}").unwrap();
        stdin.flush().unwrap();
        let mut line = String::new();
        std::io::BufRead::read_line(
            &mut std::io::BufReader::new(server.stdout.as_mut().unwrap()),
            &mut line,
        )
        .unwrap();
        let reply: serde_json::Value = serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("{backend:?}: no reply ({e}): {line:?}"));
        assert_eq!(
            reply["result"]["stdout"]["text"], "tried\n",
            "{backend:?}: {reply}"
        );
        assert!(
            server.try_wait().unwrap().is_none(),
            "{backend:?}: the server died"
        );
        sigkill(server);
    }
}

#[test]
fn a_landlock_supervisor_killed_from_outside_is_a_runner_failure() {
    if !common::landlock_usable("a_landlock_supervisor_killed_from_outside_is_a_runner_failure") {
        return;
    }
    let ws = workspace();
    let mark = mark(4600);
    let child = cordon()
        .current_dir(ws.path())
        .args(["run", "--json", "--backend", "landlock", "--"])
        .arg(format!("sleep {mark}"))
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for_sleepers(&mark, 1);
    // The launcher is handed its command over a pipe, so its own argv does
    // not name the sleeper: it is the sleeper's parent.
    let supervisor = common::host_processes_with(&format!("sleep {mark}"))
        .into_iter()
        .filter_map(parent_of)
        .find(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| String::from_utf8_lossy(&c).contains("__landlock"))
        })
        .expect("the supervisor");
    kill(Pid::from_raw(supervisor as i32), Signal::SIGKILL).unwrap();
    common::assert_runner_failure(
        child.wait_with_output().unwrap(),
        "cordon's launcher was killed by signal 9",
    );
    assert!(
        processes_gone(&format!("sleep {mark}")),
        "the command outlived its supervisor"
    );
}

/// The parent of host process `pid`, from its `/proc` status.
fn parent_of(pid: u32) -> Option<u32> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|line| line.strip_prefix("PPid:"))
        .and_then(|ppid| ppid.trim().parse().ok())
}
