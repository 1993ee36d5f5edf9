//! What the bench checks beside the timings: the kernel's floor (a C
//! program that builds the read-only sandbox, compiled here), the cgroups
//! a one-shot `cordon run` makes (watched from outside, with inotify, on
//! the run cgroups' parent), a deep workspace, a long stream's peak memory,
//! and the memory a live confined task holds.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify};

/// The C floor (`support/floor.c`) compiled into the bench's target
/// directory; none, loudly, without a C compiler or without root (it makes
/// its namespaces with no user namespace).
pub fn build_floor() -> Option<String> {
    if !nix::unistd::geteuid().is_root() {
        eprintln!("SKIPPED the C floor: it builds its sandbox as root");
        return None;
    }
    let source = concat!(env!("CARGO_MANIFEST_DIR"), "/benches/support/floor.c");
    let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join("cordon-floor");
    let built = Command::new("cc")
        .args(["-O2", "-Wall", "-o"])
        .arg(&out)
        .arg(source)
        .status();
    match built {
        Ok(status) if status.success() => Some(out.to_string_lossy().into_owned()),
        Ok(status) => panic!("cc {source} failed: {status}"),
        Err(err) => {
            eprintln!("SKIPPED the C floor: no C compiler (cc: {err})");
            None
        }
    }
}

/// The run cgroups' parent of the pids controller (cgroup v1, where this
/// bench's machine puts them); none elsewhere.
fn cgroup_parent() -> Option<PathBuf> {
    let parent = Path::new("/sys/fs/cgroup/pids/cordon");
    parent.is_dir().then(|| parent.to_path_buf())
}

/// Which cgroups each one-shot run made, seen from outside: an inotify
/// watch on the run cgroups' parent, whose entries are named
/// `<host pid>-<n>`.
pub struct CgroupWatch {
    inotify: Inotify,
    /// Per watched run: its pid and the names it made.
    pub runs: Vec<(u32, Vec<String>)>,
}

impl CgroupWatch {
    /// A watch; none, loudly, where runs get no v1 cgroup here.
    pub fn start() -> Option<CgroupWatch> {
        let Some(parent) = cgroup_parent() else {
            eprintln!(
                "SKIPPED counting a one-shot run's cgroups: no /sys/fs/cgroup/pids/cordon (not root, or not cgroup v1)"
            );
            return None;
        };
        let inotify = Inotify::init(InitFlags::IN_NONBLOCK | InitFlags::IN_CLOEXEC).ok()?;
        inotify
            .add_watch(
                &parent,
                AddWatchFlags::IN_CREATE | AddWatchFlags::IN_ONLYDIR,
            )
            .ok()?;
        Some(CgroupWatch {
            inotify,
            runs: vec![],
        })
    }

    /// Record the cgroups the finished run `pid` made (every event queued
    /// so far is read; other processes' names are left out).
    pub fn record(&mut self, pid: u32) {
        let prefix = format!("{pid}-");
        let mut made = vec![];
        while let Ok(events) = self.inotify.read_events() {
            if events.is_empty() {
                break;
            }
            made.extend(
                events
                    .into_iter()
                    .filter_map(|event| event.name?.into_string().ok())
                    .filter(|name| name.starts_with(&prefix)),
            );
        }
        self.runs.push((pid, made));
    }

    /// The runs that made more than one cgroup (a second one thrown away)
    /// or none.
    pub fn not_one(&self) -> Vec<&(u32, Vec<String>)> {
        self.runs
            .iter()
            .filter(|(_, made)| made.len() != 1)
            .collect()
    }
}

/// `cordon run FLAGS -- true` as a new process, recorded by `watch`.
pub fn cli_true_watched(cordon: &str, flags: &[&str], watch: &mut CgroupWatch) {
    let mut child = Command::new(cordon)
        .arg("run")
        .args(flags)
        .args(["--", "true"])
        .spawn()
        .expect("cordon");
    let pid = child.id();
    assert!(child.wait().expect("wait").success());
    watch.record(pid);
}

/// A directory `depth` levels below `root` (made once), for the deep
/// workspace case.
pub fn deep_workspace(root: &Path, depth: usize) -> PathBuf {
    let mut dir = root.to_path_buf();
    for level in 0..depth {
        dir.push(format!("d{level}"));
    }
    std::fs::create_dir_all(&dir).expect("the deep workspace");
    dir
}

/// One run of `argv` whose stdout the bench reads to its end: how long,
/// and the peak resident memory of that process in KiB (its `VmHWM`, read
/// while it runs: `wait4`'s `ru_maxrss` would report the bench's own, which
/// a child spawned by `vfork` takes with it to its `exec`).
pub fn drained(argv: &[&str]) -> (Duration, u64) {
    use std::io::Read;
    let start = Instant::now();
    let mut child = Command::new(argv[0])
        .args(&argv[1..])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn");
    let pid = child.id();
    let watcher = std::thread::spawn(move || {
        let mut peak = 0;
        while let Some(now) = high_water_kib(pid) {
            peak = peak.max(now);
            std::thread::sleep(Duration::from_millis(2));
        }
        peak
    });
    let mut out = child.stdout.take().expect("stdout");
    let mut buf = vec![0u8; 64 * 1024];
    while out.read(&mut buf).expect("read") > 0 {}
    // Read once more before the reaping: the last figure is the peak.
    let last = high_water_kib(pid).unwrap_or(0);
    let status = child.wait().expect("wait");
    let elapsed = start.elapsed();
    assert!(status.success(), "{argv:?}: {status}");
    (elapsed, last.max(watcher.join().expect("the watcher")))
}

/// `VmHWM` of process `pid` in KiB; none once it has exited (a zombie has
/// no memory to report).
fn high_water_kib(pid: u32) -> Option<u64> {
    kib_field(&format!("/proc/{pid}/status"), "VmHWM:")
}

/// The `KEY: N kB` figure of the procfs file `file`, in KiB.
fn kib_field(file: &str, key: &str) -> Option<u64> {
    let text = std::fs::read_to_string(file).ok()?;
    let line = text.lines().find_map(|line| line.strip_prefix(key))?;
    line.trim().trim_end_matches("kB").trim().parse().ok()
}

/// The proportional set size of process `pid` in KiB (0 when it is gone).
pub fn pss_kib(pid: u32) -> u64 {
    kib_field(&format!("/proc/{pid}/smaps_rollup"), "Pss:").unwrap_or(0)
}

/// Every descendant of `pid` (children of each of its threads, down).
pub fn descendants(pid: u32) -> Vec<u32> {
    let mut found = vec![];
    let mut queue = vec![pid];
    while let Some(parent) = queue.pop() {
        let Ok(threads) = std::fs::read_dir(format!("/proc/{parent}/task")) else {
            continue;
        };
        for thread in threads.flatten() {
            let children =
                std::fs::read_to_string(thread.path().join("children")).unwrap_or_default();
            for child in children.split_whitespace().filter_map(|c| c.parse().ok()) {
                found.push(child);
                queue.push(child);
            }
        }
    }
    found
}
