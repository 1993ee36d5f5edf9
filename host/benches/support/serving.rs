//! Served mode, side by side: read-only `true` runs per second through one
//! `cordon serve` — over its stdio (one client, 1/4/16 requests in flight)
//! and over its Unix socket (1/4/16 clients, one request in flight each) —
//! against spawning bwrap with the same profile in 1/4/16 parallel loops;
//! and `list`'s latency while 500 tasks live across four socket clients.
//! Three alternating blocks; each figure is the median block.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

/// The concurrencies measured.
const WIDTHS: [usize; 3] = [1, 4, 16];

/// One `run` request line for `true` (the deployment's read-only default).
fn run_true(id: u64) -> String {
    format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"run","params":{{"command":"true"}}}}"#)
}

fn assert_ran(line: &str) {
    assert!(line.contains(r#""exitCode":0"#), "{line}");
}

/// `count` runs spread over `width` parallel loops of `run`.
fn parallel(width: usize, count: usize, run: impl Fn(usize) + Sync) {
    std::thread::scope(|scope| {
        for lane in 0..width {
            let run = &run;
            scope.spawn(move || {
                for _ in 0..count / width {
                    run(lane);
                }
            });
        }
    });
}

/// Runs per second of `block`, which does `count` runs.
fn rate(count: usize, block: impl FnOnce()) -> f64 {
    let start = Instant::now();
    block();
    count as f64 / start.elapsed().as_secs_f64()
}

/// Served mode (see the module docs); `before` adds an older build's stdio
/// server beside this one.
pub fn throughput(cordon: &str, before: Option<&str>, dir: &Path, bare: &[String], runs: usize) {
    let bare: Vec<&str> = bare.iter().map(String::as_str).collect();
    // The same server keeping no spare runner (`run/ahead.rs`): what the
    // spare is worth.
    let scratch = tempfile::tempdir().expect("scratch dir");
    let no_spares = scratch.path().join("no-spares.toml");
    std::fs::write(&no_spares, "[serve]\nspare_runners = false\n").expect("write config");
    let mut stdio = vec![
        ("`cordon serve` (stdio)", Served::start(cordon, dir, None)),
        (
            "`cordon serve` (stdio), `spare_runners = false`",
            Served::start(cordon, dir, Some(&no_spares)),
        ),
    ];
    if let Some(before) = before {
        stdio.push((
            super::before_row("`cordon serve` (stdio)"),
            Served::start(before, dir, None),
        ));
    }
    let listener = Listener::start(cordon, dir, "");
    let mut sockets: Vec<Vec<Lane>> = WIDTHS
        .iter()
        .map(|&width| {
            (0..width)
                .map(|_| Lane::connect(&listener.socket))
                .collect()
        })
        .collect();
    for (_, server) in &mut stdio {
        server.runs(1, 5);
    }
    // Rows: bwrap loop, each stdio server, the socket; columns: WIDTHS.
    let rows = 2 + stdio.len();
    let mut blocks = vec![vec![vec![]; WIDTHS.len()]; rows];
    for _ in 0..3 {
        for (column, &width) in WIDTHS.iter().enumerate() {
            let count = runs - runs % width;
            blocks[0][column].push(rate(count, || {
                parallel(width, count, |_| crate::direct(&bare))
            }));
            for (row, (_, server)) in stdio.iter_mut().enumerate() {
                blocks[1 + row][column].push(rate(count, || server.runs(width, count)));
            }
            let lanes = &mut sockets[column];
            blocks[rows - 1][column].push(rate(count, || {
                std::thread::scope(|scope| {
                    for lane in lanes.iter_mut() {
                        scope.spawn(move || lane.runs(count / width));
                    }
                });
            }));
        }
    }
    let medians: Vec<Vec<f64>> = blocks
        .into_iter()
        .map(|row| {
            row.into_iter()
                .map(|mut block| {
                    block.sort_by(f64::total_cmp);
                    block[1]
                })
                .collect()
        })
        .collect();
    let mut names = vec!["`bwrap <read-only profile> -- bash -c true`, parallel loops".to_owned()];
    names.extend(
        stdio
            .iter()
            .map(|(name, _)| format!("{name}, requests in flight")),
    );
    names.push("`cordon serve --listen unix:…`, clients (one request each)".to_owned());
    println!();
    println!(
        "| served mode ({runs} read-only `true` runs per block) | 1 | 4 | 16 | vs bwrap loop (1 / 4 / 16) |"
    );
    println!("|---|---|---|---|---|");
    for (name, row) in names.iter().zip(&medians) {
        let ratios: Vec<String> = row
            .iter()
            .zip(&medians[0])
            .map(|(r, b)| format!("{:.2}×", r / b))
            .collect();
        println!(
            "| {name} | {:.0} | {:.0} | {:.0} | {} |",
            row[0],
            row[1],
            row[2],
            ratios.join(" / ")
        );
    }
    for (_, server) in stdio {
        server.stop();
    }
}

/// `list`'s latency while 500 `sleep` tasks live across four socket
/// clients: on a client holding 125 of them, and on one holding none.
pub fn many_tasks(cordon: &str, dir: &Path) {
    let listener = Listener::start(cordon, dir, "max_mode = \"danger-full-access\"\n");
    let mut holders: Vec<Lane> = (0..4).map(|_| Lane::connect(&listener.socket)).collect();
    let start = Instant::now();
    std::thread::scope(|scope| {
        for holder in holders.iter_mut() {
            scope.spawn(move || {
                for _ in 0..125 {
                    let line = holder.call(
                        r#""method":"start","params":{"command":"sleep 600","policy":{"mode":"danger-full-access","workspaceRoot":"/"}}"#,
                    );
                    assert!(line.contains("taskId"), "{line}");
                }
            });
        }
    });
    let started = start.elapsed();
    let mut fresh = Lane::connect(&listener.socket);
    let time_list = |lane: &mut Lane| {
        let mut samples: Vec<Duration> = (0..50)
            .map(|_| {
                let start = Instant::now();
                let line = lane.call(r#""method":"list""#);
                assert!(
                    line.contains(r#""tasks":500"#),
                    "{}",
                    &line[..200.min(line.len())]
                );
                start.elapsed()
            })
            .collect();
        samples.sort();
        (samples[25], samples[49])
    };
    let (holder_median, holder_max) = time_list(&mut holders[0]);
    let (fresh_median, fresh_max) = time_list(&mut fresh);
    println!();
    println!(
        "500 live tasks across 4 socket clients (started in {:.2} s): `list` on a client holding \
         125 of them {:.2} ms median, {:.2} ms max of 50; on a client holding none {:.2} ms \
         median, {:.2} ms max",
        started.as_secs_f64(),
        ms(holder_median),
        ms(holder_max),
        ms(fresh_median),
        ms(fresh_max)
    );
    drop(holders);
}

/// The memory a live confined task holds: 50 read-only `sleep` tasks
/// through one socket client, the proportional set size of every process
/// the server started for them (runner, init, the command) summed and
/// divided by 50 — shared pages counted once across them, as the machine
/// pays them.
pub fn pss_per_task(cordon: &str, dir: &Path) {
    const TASKS: usize = 50;
    let listener = Listener::start(cordon, dir, "");
    let mut lane = Lane::connect(&listener.socket);
    let start = format!(
        r#""method":"start","params":{{"command":"sleep 600","policy":{{"mode":"read-only","workspaceRoot":{:?}}}}}"#,
        dir.display().to_string()
    );
    for _ in 0..TASKS {
        let line = lane.call(&start);
        assert!(line.contains("taskId"), "{line}");
    }
    let server = listener.child.id();
    let sleeping = || {
        super::scale::descendants(server)
            .into_iter()
            .filter(|pid| {
                std::fs::read_to_string(format!("/proc/{pid}/comm"))
                    .is_ok_and(|c| c.trim() == "sleep")
            })
            .count()
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    while sleeping() < TASKS {
        assert!(Instant::now() < deadline, "the {TASKS} tasks never all ran");
        std::thread::sleep(Duration::from_millis(50));
    }
    let processes = super::scale::descendants(server);
    let total: u64 = processes
        .iter()
        .map(|pid| super::scale::pss_kib(*pid))
        .sum();
    println!();
    println!(
        "{TASKS} live read-only `sleep` tasks through `cordon serve`: {} processes, {:.2} MiB PSS \
         in all, {:.3} MiB per task (the server itself {:.1} MiB)",
        processes.len(),
        total as f64 / 1024.0,
        total as f64 / 1024.0 / TASKS as f64,
        super::scale::pss_kib(server) as f64 / 1024.0
    );
}

fn ms(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1e3
}

/// `cordon serve --listen` in a scratch directory, killed on drop.
struct Listener {
    child: Child,
    socket: PathBuf,
    _dir: tempfile::TempDir,
}

impl Listener {
    fn start(cordon: &str, dir: &Path, config: &str) -> Listener {
        // Under the temp dir: a socket's path must stay short.
        let scratch = tempfile::tempdir().expect("scratch dir");
        let socket = scratch.path().join("b.sock");
        let config_file = scratch.path().join("cordon.toml");
        std::fs::write(&config_file, config).expect("write config");
        let child = Command::new(cordon)
            .current_dir(dir)
            .arg("serve")
            .arg("--listen")
            .arg(format!("unix:{}", socket.display()))
            .arg("--config")
            .arg(&config_file)
            .stderr(Stdio::null())
            .spawn()
            .expect("cordon serve --listen");
        let deadline = Instant::now() + Duration::from_secs(30);
        while UnixStream::connect(&socket).is_err() {
            assert!(Instant::now() < deadline, "the listener never came up");
            std::thread::sleep(Duration::from_millis(20));
        }
        Listener {
            child,
            socket,
            _dir: scratch,
        }
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One socket client, one request at a time.
struct Lane {
    writer: UnixStream,
    reader: BufReader<UnixStream>,
    next_id: u64,
}

impl Lane {
    fn connect(socket: &Path) -> Lane {
        let stream = UnixStream::connect(socket).expect("connect");
        Lane {
            reader: BufReader::new(stream.try_clone().expect("clone")),
            writer: stream,
            next_id: 0,
        }
    }

    /// One request (`"method":…` and its params as JSON members); the reply.
    fn call(&mut self, members: &str) -> String {
        self.next_id += 1;
        writeln!(
            self.writer,
            r#"{{"jsonrpc":"2.0","id":{},{members}}}"#,
            self.next_id
        )
        .expect("write request");
        self.receive()
    }

    fn receive(&mut self) -> String {
        let mut line = String::new();
        self.reader.read_line(&mut line).expect("read reply");
        line
    }

    fn runs(&mut self, count: usize) {
        for _ in 0..count {
            self.next_id += 1;
            writeln!(self.writer, "{}", run_true(self.next_id)).expect("write request");
            assert_ran(&self.receive());
        }
    }
}

impl Drop for Lane {
    fn drop(&mut self) {
        let _ = self.writer.shutdown(std::net::Shutdown::Both);
    }
}

/// A `cordon serve` child driven over its stdio.
struct Served {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    next_id: u64,
}

impl Served {
    /// `cordon serve` in `dir`, with `config` when given.
    fn start(cordon: &str, dir: &Path, config: Option<&Path>) -> Self {
        let mut command = Command::new(cordon);
        command.current_dir(dir).arg("serve");
        if let Some(config) = config {
            command.arg("--config").arg(config);
        }
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("cordon serve");
        Served {
            stdin: child.stdin.take().unwrap(),
            stdout: BufReader::new(child.stdout.take().unwrap()),
            child,
            next_id: 0,
        }
    }

    fn send(&mut self) {
        self.next_id += 1;
        writeln!(self.stdin, "{}", run_true(self.next_id)).expect("write request");
        self.stdin.flush().expect("flush");
    }

    fn receive(&mut self) {
        let mut line = String::new();
        self.stdout.read_line(&mut line).expect("read reply");
        assert_ran(&line);
    }

    /// `count` runs with up to `window` requests in flight.
    fn runs(&mut self, window: usize, count: usize) {
        let first = window.min(count);
        for _ in 0..first {
            self.send();
        }
        for done in 0..count {
            self.receive();
            if done + first < count {
                self.send();
            }
        }
    }

    fn stop(self) {
        drop(self.stdin);
        let mut child = self.child;
        assert!(child.wait().expect("wait").success());
    }
}
