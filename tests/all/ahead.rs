//! `cordon run` starts its runner ahead of its plan (`run/ahead.rs`): the
//! namespace runner builds the sandbox for the request's grant while the
//! host loads the policy component, and the run hands it the command when
//! its own checked launch has the same runner. These tests watch the
//! runner's starts through a logging launcher and check the host after.

use crate::common;

use std::path::{Path, PathBuf};

use common::{cgroups, component, cordon, namespaces_usable, workspace};
use serde_json::{Value, json};

/// A launcher that logs its arguments and runs a copy of cordon, named
/// by a config in `dir` (a configured launcher is probed up front: the
/// probe's start is logged too). Returns (config, log).
fn logged_launcher(dir: &Path) -> (PathBuf, PathBuf) {
    let log = dir.join("launcher.log");
    let launcher = common::wrapped_launcher(dir, &format!("echo \"$*\" >> {}", log.display()));
    let config = dir.join("cordon.toml");
    std::fs::write(
        &config,
        format!("landlock_launcher = \"{}\"\n", launcher.display()),
    )
    .unwrap();
    (config, log)
}

/// The namespace runner's starts in `log`: (started ahead, started with
/// its command), the probe's aside.
fn runner_starts(log: &Path) -> (usize, usize) {
    starts_of("__ns", log)
}

/// The starts of launcher mode `mode` in `log`: (started ahead, started
/// with its command), the probe's aside.
fn starts_of(mode: &str, log: &Path) -> (usize, usize) {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let started = |with: &str| {
        text.lines()
            .filter(|l| l.starts_with(mode) && l.contains(with))
            .count()
    };
    (started("--await-fd"), started("--env-fd"))
}

/// No process is left whose arguments name `dir`.
fn nothing_left_naming(dir: &Path) -> bool {
    let dir = dir.to_str().unwrap();
    std::fs::read_dir("/proc").unwrap().flatten().all(|entry| {
        std::fs::read(entry.path().join("cmdline"))
            .map(|cmdline| !String::from_utf8_lossy(&cmdline).contains(dir))
            .unwrap_or(true)
    })
}

/// Every protected default present in `root`: a workspace-write grant
/// that needs no placeholder (such a grant gets no runner ahead).
fn every_protected_path_present(root: &Path) {
    for name in cordon::model::PROTECTED_DEFAULTS {
        let path = root.join(name);
        let prefix = format!("{name}/");
        match cordon::model::PROTECTED_DEFAULTS
            .iter()
            .any(|other| other.starts_with(&prefix))
        {
            true => std::fs::create_dir_all(&path).unwrap(),
            false => {
                std::fs::create_dir_all(path.parent().unwrap()).unwrap();
                if !path.exists() {
                    std::fs::write(&path, "").unwrap();
                }
            }
        }
    }
    // …and git's `commondir`, which only a linked worktree's gitdir has
    // (a `.` names the gitdir itself).
    std::fs::write(root.join(".git/commondir"), ".\n").unwrap();
}

#[test]
fn the_cli_hands_its_command_to_the_runner_it_started_ahead_and_it_is_confined() {
    if !namespaces_usable(
        "the_cli_hands_its_command_to_the_runner_it_started_ahead_and_it_is_confined",
    ) {
        return;
    }
    let ws = workspace();
    let (config, log) = logged_launcher(ws.path());
    let outside = ws.path().join("outside-x");
    let output = cordon()
        .current_dir(ws.path())
        .args([
            "run",
            "--config",
            config.to_str().unwrap(),
            "--mode",
            "read-only",
            "--",
        ])
        .arg(format!(
            "echo out; touch {} || echo denied; echo \"$CORDON_AHEAD_TEST\"",
            outside.display()
        ))
        .env("CORDON_AHEAD_TEST", "kept")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    assert_eq!(String::from_utf8_lossy(&output.stdout), "out\ndenied\n\n");
    assert!(stderr.contains("Read-only file system"), "{stderr}");
    assert!(!outside.exists(), "the read-only run wrote on the host");
    assert_eq!(
        runner_starts(&log),
        (1, 0),
        "one runner, started ahead, and none started with the command: {}",
        std::fs::read_to_string(&log).unwrap_or_default()
    );
    assert!(nothing_left_naming(ws.path()));
}

#[test]
fn the_cli_hands_its_command_to_the_landlock_launcher_it_started_ahead_and_it_is_confined() {
    let test =
        "the_cli_hands_its_command_to_the_landlock_launcher_it_started_ahead_and_it_is_confined";
    if !common::landlock_usable(test) || cgroups(test).is_none() {
        return;
    }
    let ws = workspace();
    let outside = workspace();
    every_protected_path_present(ws.path());
    let (config, log) = logged_launcher(ws.path());
    let planted = outside.path().join("planted");
    let output = cordon()
        .current_dir(ws.path())
        .args(["run", "--config", config.to_str().unwrap()])
        .args(["--backend", "landlock", "--mode", "workspace-write", "--"])
        .arg(format!(
            "touch made; touch {} || echo denied; echo \"$CORDON_AHEAD_TEST\"",
            planted.display()
        ))
        .env("CORDON_AHEAD_TEST", "kept")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    assert_eq!(String::from_utf8_lossy(&output.stdout), "denied\n\n");
    assert!(
        ws.path().join("made").exists(),
        "the workspace write did not land"
    );
    assert!(!planted.exists(), "the run wrote outside its workspace");
    assert_eq!(
        starts_of("__landlock", &log),
        (1, 0),
        "one launcher, started ahead, and none started with the command: {}",
        std::fs::read_to_string(&log).unwrap_or_default()
    );
    assert!(nothing_left_naming(ws.path()));
}

#[test]
fn a_runner_started_for_another_grant_is_ended_and_the_run_starts_its_own() {
    if !namespaces_usable("a_runner_started_for_another_grant_is_ended_and_the_run_starts_its_own")
    {
        return;
    }
    // The runner started ahead is logged by its launcher's script, which
    // the host may end (unused) before that script has written its line:
    // on a loaded machine a run can be planned first. Every attempt must
    // hold; one of them must have seen the runner started ahead.
    for _attempt in 0..10 {
        if narrowed_run_ends_the_runner_started_ahead() {
            return;
        }
    }
    panic!("in ten runs, no runner started ahead was seen");
}

/// One `cordon run` whose component narrows the grant it asked for: it
/// holds (the narrowed grant, the run's own runner, nothing left). Whether
/// the runner started ahead logged its start before it was ended.
fn narrowed_run_ends_the_runner_started_ahead() -> bool {
    let ws = workspace();
    let (config, log) = logged_launcher(ws.path());
    every_protected_path_present(ws.path());
    // The request asks for workspace-write; the component narrows it to
    // read-only: the runner started ahead has the wrong sandbox.
    let marker = ws.path().join("written");
    let output = cordon()
        .current_dir(ws.path())
        .args(["run", "--config", config.to_str().unwrap()])
        .args([
            "--policy",
            component("hostile-policy.wasm").to_str().unwrap(),
        ])
        .args(["--mode", "workspace-write", "--"])
        .arg(format!(
            "narrow-mode 2>/dev/null; touch {} || echo read-only",
            marker.display()
        ))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    assert_eq!(String::from_utf8_lossy(&output.stdout), "read-only\n");
    assert!(
        !marker.exists(),
        "the run got the grant it asked for, not the narrowed one"
    );
    assert!(
        nothing_left_naming(ws.path()),
        "the runner started ahead outlived the run"
    );
    let (ahead, own) = runner_starts(&log);
    assert_eq!(
        own,
        1,
        "the run started its own runner: {}",
        std::fs::read_to_string(&log).unwrap_or_default()
    );
    assert!(ahead <= 1, "one runner started ahead at most");
    ahead == 1
}

/// `cordon serve` over stdio in `dir` with `config` (its spares kept, the
/// default), and a client for it.
struct Served {
    child: std::process::Child,
    rpc: crate::rpc::Rpc,
}

impl Served {
    fn start(dir: &Path, config: &Path) -> Served {
        let mut child = cordon()
            .current_dir(dir)
            .env("TMPDIR", dir)
            .args(["serve", "--config", config.to_str().unwrap()])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let (stdout, stdin) = (child.stdout.take().unwrap(), child.stdin.take().unwrap());
        Served {
            child,
            rpc: crate::rpc::Rpc::new(stdout, stdin),
        }
    }

    /// A foreground `run` of `command` under `mode` in `root`.
    fn run(&mut self, mode: &str, root: &Path, command: &str) -> Value {
        let params = json!({"command": command, "workdir": root,
                            "policy": {"mode": mode, "workspaceRoot": root}});
        self.rpc.call("run", params)
    }

    /// Whether one spare for `dir` is built and waits for its command, and
    /// the server's session holds it: the thread that started it has
    /// handed it over (every `cordon-ahead` thread of the server sleeps in
    /// its wait for release). A spare built before its thread has handed
    /// it over is not yet the session's: a run then starts afresh.
    fn spare_waits(&self, dir: &Path) -> bool {
        spares_naming(dir) == 1 && a_spare_is_built(dir) && self.spare_handed_over()
    }

    /// Every `cordon-ahead` thread of the server is asleep (once its spare
    /// has started, such a thread only waits to be released), and there
    /// is one.
    fn spare_handed_over(&self) -> bool {
        let tasks = format!("/proc/{}/task", self.child.id());
        let Ok(tasks) = std::fs::read_dir(tasks) else {
            return false;
        };
        let states: Vec<char> = tasks
            .flatten()
            .filter(|task| {
                std::fs::read_to_string(task.path().join("comm"))
                    .is_ok_and(|comm| comm.trim_end() == "cordon-ahead")
            })
            .filter_map(|task| stat_after_name(&task.path())?.chars().next())
            .collect();
        !states.is_empty() && states.iter().all(|&state| state == 'S')
    }

    /// Close stdin and wait for the server to exit.
    fn stop(mut self) {
        self.rpc.close();
        common::exit_within(&mut self.child, std::time::Duration::from_secs(20))
            .expect("the server exits at EOF");
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The processes waiting for a command (`--await-fd`) whose arguments
/// name `dir`: their `/proc` directories.
fn awaiting_naming(dir: &Path) -> Vec<PathBuf> {
    let dir = dir.to_str().unwrap();
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .map(|entry| entry.path())
        .filter(|proc| {
            std::fs::read(proc.join("cmdline")).is_ok_and(|cmdline| {
                let cmdline = String::from_utf8_lossy(&cmdline);
                cmdline.contains(dir) && cmdline.contains("--await-fd")
            })
        })
        .collect()
}

/// The fields of the process or thread `proc` (its `/proc` directory)
/// after its command's name in `stat`, starting with its state: the name
/// may hold spaces and parentheses, so it is skipped to the last `)`.
fn stat_after_name(proc: &Path) -> Option<String> {
    let stat = std::fs::read_to_string(proc.join("stat")).ok()?;
    Some(stat[stat.rfind(')')? + 2..].to_owned())
}

/// The spare runners alive for `dir`: sessions of processes waiting for a
/// command (`--await-fd`) whose arguments name it (a runner and the init
/// it forked are one session).
fn spares_naming(dir: &Path) -> usize {
    let mut sessions: Vec<String> = awaiting_naming(dir)
        .iter()
        .filter_map(|proc| {
            // After the command's name: state, ppid, pgrp, session.
            stat_after_name(proc)?.split(' ').nth(3).map(str::to_owned)
        })
        .collect();
    sessions.sort();
    sessions.dedup();
    sessions.len()
}

/// Whether a spare for `dir` has built its sandbox and now waits for its
/// command: one of its processes blocked reading the pipe the command
/// comes over. (A spare that merely exists may still be building its
/// view: a change on the host before it is built is one it sees, and it
/// rightly takes the run.)
fn a_spare_is_built(dir: &Path) -> bool {
    awaiting_naming(dir).iter().any(|proc| {
        std::fs::read_to_string(proc.join("wchan")).is_ok_and(|wchan| wchan.contains("pipe_read"))
    })
}

/// Whether serve's spares can be tried here: the namespace runner usable
/// and runs given cgroups (each skip loud).
fn spares_usable(test: &str) -> bool {
    namespaces_usable(test) && cgroups(test).is_some()
}

#[test]
fn a_serving_session_hands_its_next_run_the_spare_it_built_and_it_stays_confined() {
    let test = "a_serving_session_hands_its_next_run_the_spare_it_built_and_it_stays_confined";
    if !spares_usable(test) {
        return;
    }
    let ws = workspace();
    let (config, log) = logged_launcher(ws.path());
    let outside = ws.path().join("outside-x");
    let mut served = Served::start(ws.path(), &config);
    for round in 0..3 {
        let result = served.run(
            "read-only",
            ws.path(),
            &format!("sleep 0.2; touch {} || echo denied", outside.display()),
        );
        assert_eq!(result["exitCode"], 0, "round {round}: {result}");
        assert_eq!(
            result["stdout"]["text"], "denied\n",
            "round {round}: {result}"
        );
        assert!(
            !outside.exists(),
            "round {round}: the read-only run wrote on the host"
        );
        // The spare for the next run is built by now, and only one.
        common::eventually(
            std::time::Duration::from_secs(10),
            &format!("round {round}: one spare is built and waits for the next run"),
            || served.spare_waits(ws.path()),
        );
    }
    assert_eq!(
        runner_starts(&log),
        (3, 1),
        "the first run's runner started with its command, the next two took spares, and a \
         spare waits: {}",
        std::fs::read_to_string(&log).unwrap_or_default()
    );
    served.stop();
    assert!(
        nothing_left_naming(ws.path()),
        "the session's spare outlived the server"
    );
}

#[test]
fn a_spare_whose_view_changed_on_the_host_runs_nothing_and_the_run_is_started_afresh() {
    let test = "a_spare_whose_view_changed_on_the_host_runs_nothing_and_the_run_is_started_afresh";
    if !spares_usable(test) {
        return;
    }
    let ws = workspace();
    let root = ws.path().join("repo");
    every_protected_path_present(&root);
    let (config, log) = logged_launcher(ws.path());
    let mut served = Served::start(ws.path(), &config);
    let first = served.run(
        "workspace-write",
        &root,
        "touch .git/hooks/x || echo protected",
    );
    assert_eq!(first["stdout"]["text"], "protected\n", "{first}");
    common::eventually(
        std::time::Duration::from_secs(10),
        "a spare is built and waits for the next run",
        || served.spare_waits(ws.path()),
    );
    // On the host, between the runs: `.git` moved aside (the read-only
    // covers of its hooks and config go with it in the spare's view) and
    // made again.
    std::fs::rename(root.join(".git"), root.join(".git-moved")).unwrap();
    every_protected_path_present(&root);
    let second = served.run(
        "workspace-write",
        &root,
        "touch .git/hooks/x || echo protected; touch written",
    );
    assert_eq!(second["exitCode"], 0, "{second}");
    assert_eq!(second["stdout"]["text"], "protected\n", "{second}");
    assert!(
        !root.join(".git/hooks/x").exists(),
        "the stale spare let .git/hooks be written"
    );
    assert!(!root.join(".git-moved/hooks/x").exists());
    assert!(root.join("written").exists(), "the workspace write landed");
    let (ahead, fresh) = runner_starts(&log);
    assert_eq!(
        fresh,
        2,
        "the first run's runner, and the second's afresh after the spare refused: {}",
        std::fs::read_to_string(&log).unwrap_or_default()
    );
    assert!(ahead >= 1, "a spare was built and handed the second run");
    served.stop();
    assert!(nothing_left_naming(ws.path()));
}

#[test]
fn a_serving_session_on_the_landlock_rung_keeps_a_spare_and_refuses_a_stale_one() {
    let test = "a_serving_session_on_the_landlock_rung_keeps_a_spare_and_refuses_a_stale_one";
    if !common::landlock_usable(test) || cgroups(test).is_none() {
        return;
    }
    let ws = workspace();
    let outside = workspace();
    let root = ws.path().join("repo");
    every_protected_path_present(&root);
    let (config, log) = logged_launcher(ws.path());
    let mut text = std::fs::read_to_string(&config).unwrap();
    text.push_str("backend = \"landlock\"\n");
    std::fs::write(&config, text).unwrap();
    let planted = outside.path().join("planted");
    let command = format!(
        "touch .git/hooks/x || echo protected; touch {} || echo denied; touch written",
        planted.display()
    );
    let mut served = Served::start(ws.path(), &config);
    for round in 0..2 {
        let result = served.run("workspace-write", &root, &command);
        assert_eq!(result["exitCode"], 0, "round {round}: {result}");
        assert_eq!(
            result["stdout"]["text"], "protected\ndenied\n",
            "round {round}: {result}"
        );
        assert!(
            root.join("written").exists(),
            "round {round}: no write landed"
        );
        std::fs::remove_file(root.join("written")).unwrap();
        common::eventually(
            std::time::Duration::from_secs(10),
            &format!("round {round}: one spare is built and waits for the next run"),
            || served.spare_waits(ws.path()),
        );
    }
    assert_eq!(
        starts_of("__landlock", &log),
        (2, 1),
        "{}",
        std::fs::read_to_string(&log).unwrap()
    );
    // On the host, between the runs: the workspace moved aside and made
    // again. The spare's rule was made for the old directory.
    let moved = ws.path().join("moved");
    std::fs::rename(&root, &moved).unwrap();
    every_protected_path_present(&root);
    let result = served.run("workspace-write", &root, &command);
    assert_eq!(result["exitCode"], 0, "{result}");
    assert_eq!(result["stdout"]["text"], "protected\ndenied\n", "{result}");
    assert!(!root.join(".git/hooks/x").exists());
    assert!(root.join("written").exists(), "the workspace write landed");
    assert!(
        !moved.join("written").exists(),
        "the stale spare wrote in the old workspace"
    );
    assert!(!planted.exists(), "a run wrote outside its workspace");
    assert_eq!(
        starts_of("__landlock", &log).1,
        2,
        "the spare refused the third run, which was started afresh: {}",
        std::fs::read_to_string(&log).unwrap_or_default()
    );
    served.stop();
    assert!(nothing_left_naming(ws.path()));
}

#[test]
fn a_server_told_to_keep_no_spares_builds_none() {
    let test = "a_server_told_to_keep_no_spares_builds_none";
    if !spares_usable(test) {
        return;
    }
    let ws = workspace();
    let (config, log) = logged_launcher(ws.path());
    let mut text = std::fs::read_to_string(&config).unwrap();
    text.push_str("[serve]\nspare_runners = false\n");
    std::fs::write(&config, text).unwrap();
    let mut served = Served::start(ws.path(), &config);
    for _ in 0..2 {
        let result = served.run("read-only", ws.path(), "true");
        assert_eq!(result["exitCode"], 0, "{result}");
    }
    assert_eq!(spares_naming(ws.path()), 0);
    assert_eq!(runner_starts(&log), (0, 2));
    served.stop();
}

/// What a served run in `ws` says of its network: its namespace (`net:[N]`),
/// how many TCP sockets it sees in any state (`/proc/net/tcp`, `tcp6`),
/// how many of its own fds are network namespaces, and whether the
/// host's listener at `port` answered — after running `then`.
fn network_seen(served: &mut Served, ws: &Path, port: u16, then: &str) -> Vec<String> {
    let command = format!(
        "{then}; ns=$(readlink /proc/self/ns/net); \
         tcp=$(cat /proc/net/tcp /proc/net/tcp6 2>/dev/null | grep -vc local_address); \
         fds=$(ls -l /proc/self/fd/ /proc/$$/fd/ | grep -c 'net:'); \
         (echo x > /dev/tcp/127.0.0.1/{port}) 2>/dev/null && host=reached || host=closed; \
         echo \"$ns $tcp $fds $host\""
    );
    let result = served.run("read-only", ws, &command);
    assert_eq!(result["exitCode"], 0, "{result}");
    let text = result["stdout"]["text"].as_str().unwrap_or_default();
    text.split_whitespace().map(str::to_owned).collect()
}

/// A loopback connection closed by its client first: the client's side
/// stays in `TIME_WAIT` for a minute after the run's processes are gone.
const TIME_WAIT: &str = "python3 -c 'import socket; s = socket.socket(); \
    s.bind((\"127.0.0.1\", 0)); s.listen(); c = socket.create_connection(s.getsockname()); \
    a, _ = s.accept(); c.close(); a.close(); s.close()'";

#[test]
fn a_serving_session_lends_a_network_namespace_again_only_once_it_is_quiet() {
    let test = "a_serving_session_lends_a_network_namespace_again_only_once_it_is_quiet";
    if !spares_usable(test) {
        return;
    }
    let ws = workspace();
    let (config, log) = logged_launcher(ws.path());
    let host = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = host.local_addr().unwrap().port();
    let own = std::fs::read_link("/proc/self/ns/net").unwrap();
    let own = own.to_str().unwrap();
    let mut served = Served::start(ws.path(), &config);
    let mut seen = vec![];
    for round in 0..6 {
        // Run 4 (the third spare's) leaves a TIME_WAIT in its namespace.
        let then = if round == 3 { TIME_WAIT } else { "true" };
        let run = network_seen(&mut served, ws.path(), port, then);
        assert_eq!(run.len(), 4, "round {round}: {run:?}");
        assert_ne!(run[0], own, "round {round}: the run had the host's network");
        assert_eq!(
            run[3], "closed",
            "round {round}: the host's loopback answered"
        );
        assert_eq!(
            run[2], "0",
            "round {round}: a namespace fd reached the command"
        );
        match round {
            3 => assert_ne!(
                run[1], "0",
                "round 3: its own TIME_WAIT is there (the control)"
            ),
            _ => assert_eq!(run[1], "0", "round {round}: it saw another run's sockets"),
        }
        seen.push(run[0].clone());
        common::eventually(
            std::time::Duration::from_secs(10),
            &format!("round {round}: one spare is built and waits for the next run"),
            || served.spare_waits(ws.path()),
        );
    }
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    let joined = text.lines().filter(|l| l.contains("--join-net")).count();
    if nix::unistd::geteuid().is_root() {
        // The first run's runner made its own; each spare joined one the
        // session made: the second run's namespace again for the fourth
        // (the second run over, nothing left in it), and not the fourth's
        // for the sixth (its TIME_WAIT: checked above, the sixth saw no
        // socket).
        assert_eq!(joined, 6, "every spare joined a lent namespace: {text}");
        assert_eq!(
            seen[3], seen[1],
            "a quiet namespace is lent again: {seen:?}"
        );
        assert_eq!(seen[4], seen[2], "{seen:?}");
    } else {
        assert_eq!(joined, 0, "only root lends namespaces: {text}");
    }
    served.stop();
    assert!(nothing_left_naming(ws.path()));
}
