//! A child made with the kernel's `clone` directly, running only raw
//! system calls between the clone and its `execve` — where the libc's
//! `posix_spawn` cannot do the job: musl (cordon's static release build)
//! has no `closefrom` file action and no way into a cgroup, and glibc
//! before 2.39 has no way into a cgroup.
//!
//! Two shapes, one child:
//!
//! * [`vfork`]: `CLONE_VM | CLONE_VFORK` on a stack of its own, as a
//!   libc's `posix_spawn` does inside: the host's memory is shared, never
//!   copied, and the calling thread waits until the child has exec'd or
//!   failed. The child's failure is left in memory both share.
//! * [`into_cgroup`]: `clone3(CLONE_INTO_CGROUP)` in fork style — a
//!   copy-on-write copy of the host, slower than a vfork (the page tables
//!   are copied, and the host's next writes fault), the price of a child
//!   that is inside a cgroup v2 directory before its first instruction.
//!   Its failure comes back over a close-on-exec pipe: EOF means it
//!   exec'd.
//!
//! Before either, the calling thread blocks every signal, so no host
//! handler can run in the child; the child ([`child`]) places its fds,
//! marks every other fd close-on-exec (`close_range`), changes directory,
//! starts its own session, resets every signal to its default and unblocks
//! them, and execs. Everything it touches was made by the parent before
//! the clone: it never allocates.

use std::sync::atomic::{AtomicI32, Ordering};

use super::*;

/// `clone3`'s flag: start the child in the cgroup `args.cgroup` names.
const CLONE_INTO_CGROUP: u64 = 0x2_0000_0000;

/// The vfork child's own stack. The child calls a handful of system-call
/// wrappers; this leaves room for an unoptimised build.
const CHILD_STACK: usize = 256 << 10;

/// `struct clone_args` (linux/sched.h), up to `cgroup`.
#[repr(C)]
#[derive(Default)]
struct CloneArgs {
    flags: u64,
    pidfd: u64,
    child_tid: u64,
    parent_tid: u64,
    exit_signal: u64,
    stack: u64,
    stack_size: u64,
    tls: u64,
    set_tid: u64,
    set_tid_size: u64,
    cgroup: u64,
}

/// Restores the calling thread's signal mask on drop.
struct MaskGuard(libc::sigset_t);

impl Drop for MaskGuard {
    fn drop(&mut self) {
        // SAFETY: restores a mask saved by `block_all`.
        unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &self.0, std::ptr::null_mut()) };
    }
}

/// Block every signal on this thread (so no host handler runs in the
/// child before it resets them); the guard restores the mask.
fn block_all() -> MaskGuard {
    // SAFETY: sigset operations on values we own.
    unsafe {
        let mut all: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        let mut old: libc::sigset_t = std::mem::zeroed();
        libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut old);
        MaskGuard(old)
    }
}

/// Where the child says why it did not exec.
#[derive(Clone, Copy)]
enum Report<'a> {
    /// Shared memory (a vfork child): its errno.
    Shared(&'a AtomicI32),
    /// A pipe's write end (a fork-style child): its errno's four bytes.
    Pipe(RawFd),
}

/// What the child runs with, all made before the clone.
struct ChildArgs<'a> {
    path: &'a CString,
    argv: &'a [*const libc::c_char],
    envp: &'a [*const libc::c_char],
    workdir: &'a CString,
    slots: &'a [(RawFd, RawFd)],
    first_closed: libc::c_uint,
    report: Report<'a>,
}

/// Everything [`ChildArgs`] points to, made before the clone.
struct Prepared {
    exec: Exec,
    argv: Vec<*const libc::c_char>,
    envp: Vec<*const libc::c_char>,
    slots: Vec<(RawFd, RawFd)>,
    first_closed: libc::c_uint,
}

impl Prepared {
    fn new(program: &Path, spec: &Spec<'_>, fds: &ChildFds) -> io::Result<Prepared> {
        let exec = Exec::new(program, spec)?;
        Ok(Prepared {
            argv: exec.argv(),
            envp: exec.envp(),
            exec,
            slots: fds.slots(),
            first_closed: fds.first_closed() as libc::c_uint,
        })
    }

    /// The child's arguments, reporting a failure to `report`.
    fn args<'a>(&'a self, report: Report<'a>) -> ChildArgs<'a> {
        ChildArgs {
            path: &self.exec.path,
            argv: &self.argv,
            envp: &self.envp,
            workdir: &self.exec.workdir,
            slots: &self.slots,
            first_closed: self.first_closed,
            report,
        }
    }
}

/// An anonymous mapping for the vfork child's stack, with an inaccessible
/// guard page below it (the child shares the host's memory: an overflow
/// must fault, not write into whatever lies below), unmapped on drop.
struct Stack {
    base: *mut libc::c_void,
    len: usize,
}

impl Stack {
    fn new() -> io::Result<Stack> {
        // SAFETY: sysconf reads a constant.
        let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) })
            .unwrap_or(4096)
            .max(4096);
        let len = CHILD_STACK + page;
        // SAFETY: a fresh private anonymous mapping, inaccessible until
        // the stack part is opened below; nothing else uses it.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_NONE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_STACK,
                -1,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let stack = Stack { base, len };
        // SAFETY: the mapping's part above its first page, ours.
        let opened = unsafe {
            libc::mprotect(
                base.cast::<u8>().add(page).cast(),
                CHILD_STACK,
                libc::PROT_READ | libc::PROT_WRITE,
            )
        };
        if opened < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(stack)
    }

    /// The stack's top (it grows down), page-aligned.
    fn top(&self) -> *mut libc::c_void {
        // SAFETY: one past the end of the mapping, which the kernel's
        // clone takes as the initial stack pointer.
        unsafe { self.base.cast::<u8>().add(self.len).cast() }
    }
}

impl Drop for Stack {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `new`, unmapped once; the child that
        // used it has exec'd or exited (CLONE_VFORK returned).
        unsafe { libc::munmap(self.base, self.len) };
    }
}

/// Start `program` for `spec` with `fds` placed, sharing the host's
/// memory until it execs (`CLONE_VM | CLONE_VFORK`). Only the build
/// without glibc spawns this way (what it needs comes with it); glibc's
/// `posix_spawn` does the same, and the tests run this one there.
#[cfg_attr(
    target_env = "gnu",
    allow(
        dead_code,
        reason = "musl's spawner; glibc's posix_spawn does this there"
    )
)]
pub(in crate::process) fn vfork(
    program: &Path,
    spec: &Spec<'_>,
    fds: &ChildFds,
) -> io::Result<Pid> {
    let prepared = Prepared::new(program, spec, fds)?;
    let failed = AtomicI32::new(0);
    let args = prepared.args(Report::Shared(&failed));
    let stack = Stack::new()?;
    let mask = block_all();
    // SAFETY: the child runs `vfork_entry` on its own stack with `args`,
    // which lives (like everything it points to) until the clone returns —
    // CLONE_VFORK returns only once the child has exec'd or exited.
    let pid = unsafe {
        libc::clone(
            vfork_entry,
            stack.top(),
            libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD,
            &args as *const ChildArgs<'_> as *mut libc::c_void,
        )
    };
    let clone_error = io::Error::last_os_error();
    drop(mask);
    drop(stack);
    if pid < 0 {
        return Err(clone_error);
    }
    match failed.load(Ordering::Acquire) {
        0 => Ok(Pid::from_raw(pid)),
        errno => {
            // The child failed and exited: reap it, and say why.
            let _ = wait_blocking(Pid::from_raw(pid));
            Err(io::Error::from_raw_os_error(errno))
        }
    }
}

/// The vfork child's entry: [`child`] with the parent's arguments.
extern "C" fn vfork_entry(args: *mut libc::c_void) -> libc::c_int {
    // SAFETY: `args` is the parent's `ChildArgs`, alive while the parent
    // waits (CLONE_VFORK); every signal is blocked.
    unsafe { child(&*(args as *const ChildArgs<'_>)) }
}

/// Start `program` for `spec` with `fds` placed, inside the cgroup v2
/// directory `cgroup` (an open fd of it) from its first instruction: a
/// fork-style `clone3(CLONE_INTO_CGROUP)`.
pub(in crate::process) fn into_cgroup(
    program: &Path,
    spec: &Spec<'_>,
    fds: &ChildFds,
    cgroup: RawFd,
) -> io::Result<Pid> {
    let prepared = Prepared::new(program, spec, fds)?;
    // The pipe closes on exec, so EOF means the program started. Above
    // the slots, so no dup2 in the child lands on it.
    let (report_read, report_write) = pipe()?;
    let report_write = above_child_slots(report_write)?;
    let args = prepared.args(Report::Pipe(report_write.as_raw_fd()));
    let clone = CloneArgs {
        flags: CLONE_INTO_CGROUP,
        exit_signal: libc::SIGCHLD as u64,
        cgroup: cgroup as u64,
        ..CloneArgs::default()
    };
    let mask = block_all();
    // SAFETY: clone3 with fork semantics (no CLONE_VM): the child has its
    // own copy of memory and runs only `child` below.
    let pid = unsafe {
        libc::syscall(
            libc::SYS_clone3,
            &clone as *const CloneArgs,
            size_of::<CloneArgs>(),
        )
    };
    if pid == 0 {
        // SAFETY: in the child, every signal blocked; see `child`.
        unsafe { child(&args) };
    }
    let clone_error = io::Error::last_os_error();
    drop(mask);
    if pid < 0 {
        return Err(clone_error);
    }
    drop(report_write);
    let mut errno = [0u8; 4];
    let mut file = std::fs::File::from(report_read);
    match std::io::Read::read(&mut file, &mut errno) {
        Ok(4) => {
            let _ = wait_blocking(Pid::from_raw(pid as i32));
            Err(io::Error::from_raw_os_error(i32::from_ne_bytes(errno)))
        }
        _ => Ok(Pid::from_raw(pid as i32)),
    }
}

/// The child's side: only system calls on what the parent prepared, then
/// `execve`; on any failure its errno goes to the report and the child
/// exits 127. Signal dispositions and the mask are set with the raw
/// system calls, never the libc's wrappers (which may take locks, and
/// with `CLONE_VM` would take the host's).
///
/// # Safety
///
/// Only in the child of one of the clones above, with every signal
/// blocked; the pointers come from the parent's live values.
unsafe fn child(args: &ChildArgs<'_>) -> ! {
    // SAFETY: async-signal-safe calls only, on values prepared before the
    // clone; this never returns.
    unsafe {
        let fail = || -> ! {
            let errno = *libc::__errno_location();
            match args.report {
                Report::Shared(failed) => failed.store(errno.max(1), Ordering::Release),
                Report::Pipe(fd) => {
                    libc::write(fd, errno.to_ne_bytes().as_ptr().cast(), 4);
                }
            }
            libc::_exit(127)
        };
        for &(source, slot) in args.slots {
            if libc::dup2(source, slot) < 0 {
                fail();
            }
        }
        // Everything above the slots closes at exec (a report pipe too).
        if libc::syscall(
            libc::SYS_close_range,
            args.first_closed,
            libc::c_uint::MAX,
            libc::CLOSE_RANGE_CLOEXEC,
        ) < 0
        {
            fail();
        }
        if libc::chdir(args.workdir.as_ptr()) < 0 || libc::setsid() < 0 {
            fail();
        }
        // The kernel's `struct sigaction`, all zero: SIG_DFL, no flags, an
        // empty mask (on every architecture's layout).
        let default = [0u64; 4];
        let sigset_size = size_of::<u64>();
        for signal in 1..=64 {
            if signal == libc::SIGKILL || signal == libc::SIGSTOP {
                continue;
            }
            let action = default.as_ptr();
            libc::syscall(
                libc::SYS_rt_sigaction,
                signal,
                action,
                std::ptr::null_mut::<u64>(),
                sigset_size,
            );
        }
        let none = 0u64;
        libc::syscall(
            libc::SYS_rt_sigprocmask,
            libc::SIG_SETMASK,
            &none as *const u64,
            std::ptr::null_mut::<u64>(),
            sigset_size,
        );
        libc::execve(args.path.as_ptr(), args.argv.as_ptr(), args.envp.as_ptr());
        fail()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The fds a child gets: stdin from `/dev/null`, stdout and stderr
    /// pipes (the host's read ends returned).
    fn child_fds() -> (ChildFds, OwnedFd, OwnedFd) {
        let null = OwnedFd::from(std::fs::File::open("/dev/null").unwrap());
        let (out_read, out_write) = pipe().unwrap();
        let (err_read, err_write) = pipe().unwrap();
        let fds = ChildFds {
            stdin: above_child_slots(null).unwrap(),
            stdout: above_child_slots(out_write).unwrap(),
            stderr: above_child_slots(err_write).unwrap(),
            status: None,
            handover: None,
            init: None,
            init_env: None,
            passed: None,
        };
        (fds, out_read, err_read)
    }

    fn spec<'a>(argv: &'a [String], env: &'a [(OsString, OsString)], dir: &'a Path) -> Spec<'a> {
        Spec {
            argv,
            env,
            workdir: dir,
            stdin: Stdin::Null,
            status_pipe: false,
            handover: None,
            handover_later: false,
            init_pipe: false,
            init_env: None,
            passed: None,
            cgroup: None,
        }
    }

    /// A stray fd of the host's without close-on-exec (as an embedding
    /// program may leave one): its number.
    fn stray_fd() -> OwnedFd {
        let file = std::fs::File::open("/dev/null").unwrap();
        // SAFETY: dup of a valid fd returns a new fd (no close-on-exec).
        let raw = unsafe { libc::dup(file.as_raw_fd()) };
        assert!(raw > 2);
        // SAFETY: a fresh fd we own.
        unsafe { OwnedFd::from_raw_fd(raw) }
    }

    /// What the shell reports of itself: its pid and session, working
    /// directory, environment, whether `stray` reached it, and (read by
    /// the program it execs last, as the shell itself blocks every signal
    /// while it waits for a child) the ignored and blocked signals.
    fn report_script(stray: RawFd) -> String {
        format!(
            "set -- $(cat /proc/$$/stat); echo \"pid=$1 sid=$6\"; echo \"cwd=$(pwd)\"; \
             echo \"only=$ONLY home=${{HOME-unset}}\"; \
             if [ -e /proc/$$/fd/{stray} ]; then echo stray=leaked; else echo stray=closed; fi; \
             exec grep -E '^Sig(Ign|Blk)' /proc/self/status"
        )
    }

    fn read_all(fd: OwnedFd) -> String {
        let mut text = String::new();
        std::io::Read::read_to_string(&mut std::fs::File::from(fd), &mut text).unwrap();
        text
    }

    #[test]
    fn a_vfork_child_gets_its_session_fds_directory_environment_and_default_signals_only() {
        let dir = tempfile::tempdir().unwrap();
        let stray = stray_fd();
        let argv: Vec<String> = ["sh", "-c", &report_script(stray.as_raw_fd())]
            .map(String::from)
            .to_vec();
        let env = vec![
            ("PATH".into(), "/usr/bin:/bin".into()),
            ("ONLY".into(), "this".into()),
        ];
        let (fds, out, err) = child_fds();
        let program = resolve_program("sh", &env, dir.path()).unwrap();
        // The test harness ignores SIGPIPE, as the host does: the child
        // must not inherit that.
        let pid = vfork(&program, &spec(&argv, &env, dir.path()), &fds).unwrap();
        drop(fds);
        let (out, err) = (read_all(out), read_all(err));
        assert!(wait_blocking(pid).unwrap().success(), "{out}{err}");
        let cwd = dir.path().canonicalize().unwrap();
        for line in [
            format!("pid={pid} sid={pid}"),
            format!("cwd={}", cwd.display()),
            "SigIgn:\t0000000000000000".into(),
            "SigBlk:\t0000000000000000".into(),
            "only=this home=unset".into(),
            "stray=closed".into(),
        ] {
            assert!(
                out.lines().any(|l| l == line),
                "{line:?} not in:\n{out}{err}"
            );
        }
    }

    #[test]
    fn a_vfork_child_that_cannot_exec_or_enter_its_directory_is_an_error_with_its_cause() {
        let dir = tempfile::tempdir().unwrap();
        let argv = vec!["nothing".to_string()];
        let env = vec![];
        let (fds, _, _) = child_fds();
        let missing = dir.path().join("nothing");
        let err = vfork(&missing, &spec(&argv, &env, dir.path()), &fds).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::NotFound, "{err}");
        let gone = dir.path().join("gone");
        let err = vfork(Path::new("/bin/true"), &spec(&argv, &env, &gone), &fds).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::NotFound, "{err}");
        let file = dir.path().join("file");
        std::fs::write(&file, "").unwrap();
        let err = vfork(Path::new("/bin/true"), &spec(&argv, &env, &file), &fds).unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::ENOTDIR), "{err}");
    }

    #[test]
    fn the_vfork_childs_stack_has_an_inaccessible_page_below_it() {
        let stack = Stack::new().unwrap();
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        let permissions = |address: usize| {
            let line = maps
                .lines()
                .find(|line| {
                    let range = line.split(' ').next().unwrap();
                    let (start, end) = range.split_once('-').unwrap();
                    let start = usize::from_str_radix(start, 16).unwrap();
                    let end = usize::from_str_radix(end, 16).unwrap();
                    (start..end).contains(&address)
                })
                .unwrap_or_else(|| panic!("{address:x} not mapped:\n{maps}"));
            line.split(' ').nth(1).unwrap().to_owned()
        };
        assert!(
            permissions(stack.base as usize).starts_with("---"),
            "{maps}"
        );
        assert!(
            permissions(stack.top() as usize - 1).starts_with("rw-"),
            "{maps}"
        );
    }

    #[test]
    fn a_child_made_into_a_cgroup_starts_there_with_its_fds_and_session() {
        let Some(parent) = writable_v2_cgroup() else {
            assert!(
                std::env::var_os("CORDON_TEST_REQUIRE_CGROUP2").is_none(),
                "CORDON_TEST_REQUIRE_CGROUP2 is set and no cgroup2 hierarchy is writable here"
            );
            eprintln!(
                "SKIPPED a_child_made_into_a_cgroup_starts_there_with_its_fds_and_session: \
                 no writable cgroup v2 directory here (cgroup v1, or not delegated)"
            );
            return;
        };
        let run = parent.join(format!("raw-test-{}", std::process::id()));
        std::fs::create_dir(&run).unwrap();
        let directory = std::fs::File::open(&run).unwrap();
        let stray = stray_fd();
        let script = format!("cat /proc/$$/cgroup; {}", report_script(stray.as_raw_fd()));
        let argv: Vec<String> = ["sh", "-c", &script].map(String::from).to_vec();
        let env = vec![
            ("PATH".into(), "/usr/bin:/bin".into()),
            ("ONLY".into(), "this".into()),
        ];
        let (fds, out, _) = child_fds();
        let mut spec = spec(&argv, &env, Path::new("/"));
        spec.cgroup = Some(directory.as_raw_fd());
        let program = resolve_program("sh", &env, Path::new("/")).unwrap();
        let pid = into_cgroup(&program, &spec, &fds, directory.as_raw_fd()).unwrap();
        drop(fds);
        let out = read_all(out);
        assert!(wait_blocking(pid).unwrap().success(), "{out}");
        let _ = std::fs::remove_dir(&run);
        let name = run.file_name().unwrap().to_string_lossy().into_owned();
        assert!(
            out.lines()
                .any(|l| l.starts_with("0::") && l.ends_with(&name)),
            "{out}"
        );
        assert!(
            out.lines().any(|l| l == format!("pid={pid} sid={pid}")),
            "{out}"
        );
        assert!(out.lines().any(|l| l == "stray=closed"), "{out}");
    }

    /// A directory of a mounted cgroup v2 hierarchy this process may make
    /// a child directory in (its own cgroup's, on a v2 host).
    fn writable_v2_cgroup() -> Option<PathBuf> {
        let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
        let mount = mountinfo.lines().find_map(|line| {
            let (fields, source) = line.split_once(" - ")?;
            source
                .starts_with("cgroup2 ")
                .then(|| fields.split(' ').nth(4))?
        })?;
        let own = std::fs::read_to_string("/proc/self/cgroup").ok()?;
        let path = own.lines().find_map(|line| line.strip_prefix("0::"))?;
        let dir = Path::new(mount).join(path.trim_start_matches('/'));
        dir.join("cgroup.controllers").exists().then_some(())?;
        let probe = dir.join(format!("raw-probe-{}", std::process::id()));
        std::fs::create_dir(&probe).ok()?;
        std::fs::remove_dir(&probe).ok()?;
        Some(dir)
    }
}
