//! The write calls the file supervisor carries out in a supervised root
//! (a writable root holding protected paths, which Landlock grants read
//! and execute only): `open` for writing or creating, `mkdir`, `mknod`,
//! `unlink`/`rmdir`, `rename`, `link`, `symlink`, `truncate`, and the
//! `bind` of a unix socket to a path.
//!
//! Each call's path is read once and split into its directory, opened by
//! the supervisor, and its last name ([`Entry`]); `places.rs` judges the
//! directory's path as the kernel names it. A performed call works on that
//! directory descriptor and never follows a final symlink: a symlink the
//! call would follow is opened by the supervisor and judged where it
//! leads, and anything that leads outside the supervised roots continues
//! to the kernel, where Landlock decides. A path the supervisor cannot
//! resolve continues too: the kernel gives the command its own error.
//!
//! An `open` is performed non-blocking; a FIFO that would block (no reader
//! or writer yet) is opened again on a thread of its own, so one waiting
//! command never stalls the others' calls.

use std::ffi::CString;
use std::os::fd::{AsFd, AsRawFd, OwnedFd, RawFd};
use std::path::PathBuf;

use nix::libc;
use seccompiler::SeccompRule;

use super::places::{Named, Verdict};
use super::{Answer, Caller, Places, by_descriptor, done, named, open_at, open_mode, os, stat};

/// The write calls handed to the supervisor, each with its rules (none:
/// always), by this architecture's numbers: an `open` only when its flags
/// write, create or truncate.
pub(super) fn rules() -> Result<Vec<(i64, Vec<SeccompRule>)>, String> {
    let writing = |arg: u8| -> Result<Vec<SeccompRule>, String> {
        [libc::O_WRONLY, libc::O_RDWR, libc::O_CREAT, libc::O_TRUNC]
            .into_iter()
            .map(|flag| {
                super::super::seccomp::masked(arg, flag as u64, flag as u64, "file supervisor")
            })
            .collect()
    };
    let always = [
        libc::SYS_mkdirat,
        libc::SYS_mknodat,
        libc::SYS_unlinkat,
        libc::SYS_renameat2,
        libc::SYS_linkat,
        libc::SYS_symlinkat,
        libc::SYS_truncate,
        libc::SYS_bind,
    ];
    let mut calls: Vec<(i64, Vec<SeccompRule>)> = always.map(|nr| (nr, vec![])).into();
    calls.push((libc::SYS_openat, writing(2)?));
    #[cfg(target_arch = "x86_64")]
    {
        calls.push((libc::SYS_open, writing(1)?));
        calls.extend(
            [
                libc::SYS_creat,
                libc::SYS_mkdir,
                libc::SYS_mknod,
                libc::SYS_unlink,
                libc::SYS_rmdir,
                libc::SYS_rename,
                libc::SYS_renameat,
                libc::SYS_link,
                libc::SYS_symlink,
            ]
            .map(|nr| (nr, vec![])),
        );
    }
    Ok(calls)
}

/// A path argument: a pointer into the caller's memory, from a directory
/// fd (`AT_FDCWD`: the working directory).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct At {
    dir: RawFd,
    path: u64,
}

/// A write call, read from its arguments.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Write {
    /// `openat(at, flags, mode)`.
    Open { at: At, flags: i32, mode: u32 },
    /// `mkdirat(at, mode)`.
    Mkdir { at: At, mode: u32 },
    /// `mknodat(at, mode, dev)`: a FIFO, socket or empty file (devices are
    /// the hardening filter's).
    Mknod { at: At, mode: u32, dev: u64 },
    /// `unlinkat(at, dir ? AT_REMOVEDIR : 0)`.
    Unlink { at: At, dir: bool },
    /// `renameat2(from, to, flags)`.
    Rename { from: At, to: At, flags: u32 },
    /// `linkat(from, to, flags)`.
    Link { from: At, to: At, flags: i32 },
    /// `symlinkat(target, at)`: `target` a pointer to the link's text.
    Symlink { target: u64, at: At },
    /// `truncate(path, length)`.
    Truncate { path: u64, length: i64 },
    /// `bind(socket, address, length)`: `address` a pointer.
    Bind {
        socket: RawFd,
        address: u64,
        length: u32,
    },
}

impl Write {
    /// The write call of system call `nr` with `args`; `None` for another.
    pub(super) fn of(nr: i64, a: [u64; 6]) -> Option<Write> {
        let at = |dir: u64, path: u64| At {
            dir: dir as i32,
            path,
        };
        #[cfg(target_arch = "x86_64")]
        if let Some(write) = Write::of_x86_64(nr, a, |path| at(libc::AT_FDCWD as u64, path)) {
            return Some(write);
        }
        Some(match nr {
            libc::SYS_openat => Write::Open {
                at: at(a[0], a[1]),
                flags: a[2] as i32,
                mode: a[3] as u32,
            },
            libc::SYS_mkdirat => Write::Mkdir {
                at: at(a[0], a[1]),
                mode: a[2] as u32,
            },
            libc::SYS_mknodat => Write::Mknod {
                at: at(a[0], a[1]),
                mode: a[2] as u32,
                dev: a[3],
            },
            libc::SYS_unlinkat => Write::Unlink {
                at: at(a[0], a[1]),
                dir: a[2] & libc::AT_REMOVEDIR as u64 != 0,
            },
            libc::SYS_renameat2 => Write::Rename {
                from: at(a[0], a[1]),
                to: at(a[2], a[3]),
                flags: a[4] as u32,
            },
            libc::SYS_linkat => Write::Link {
                from: at(a[0], a[1]),
                to: at(a[2], a[3]),
                flags: a[4] as i32,
            },
            libc::SYS_symlinkat => Write::Symlink {
                target: a[0],
                at: at(a[1], a[2]),
            },
            libc::SYS_truncate => Write::Truncate {
                path: a[0],
                length: a[1] as i64,
            },
            libc::SYS_bind => Write::Bind {
                socket: a[0] as i32,
                address: a[1],
                length: a[2] as u32,
            },
            _ => return None,
        })
    }

    /// The calls only x86_64 has (the `*at` calls' older forms).
    #[cfg(target_arch = "x86_64")]
    fn of_x86_64(nr: i64, a: [u64; 6], cwd: impl Fn(u64) -> At) -> Option<Write> {
        Some(match nr {
            libc::SYS_open => Write::Open {
                at: cwd(a[0]),
                flags: a[1] as i32,
                mode: a[2] as u32,
            },
            libc::SYS_creat => Write::Open {
                at: cwd(a[0]),
                flags: libc::O_CREAT | libc::O_WRONLY | libc::O_TRUNC,
                mode: a[1] as u32,
            },
            libc::SYS_mkdir => Write::Mkdir {
                at: cwd(a[0]),
                mode: a[1] as u32,
            },
            libc::SYS_mknod => Write::Mknod {
                at: cwd(a[0]),
                mode: a[1] as u32,
                dev: a[2],
            },
            libc::SYS_unlink | libc::SYS_rmdir => Write::Unlink {
                at: cwd(a[0]),
                dir: nr == libc::SYS_rmdir,
            },
            libc::SYS_rename => Write::Rename {
                from: cwd(a[0]),
                to: cwd(a[1]),
                flags: 0,
            },
            libc::SYS_renameat => Write::Rename {
                from: At {
                    dir: a[0] as i32,
                    path: a[1],
                },
                to: At {
                    dir: a[2] as i32,
                    path: a[3],
                },
                flags: 0,
            },
            libc::SYS_link => Write::Link {
                from: cwd(a[0]),
                to: cwd(a[1]),
                flags: 0,
            },
            libc::SYS_symlink => Write::Symlink {
                target: a[0],
                at: cwd(a[1]),
            },
            _ => return None,
        })
    }
}

/// A directory entry a call names: its directory, opened by the
/// supervisor, that directory's path as the kernel names it, and the last
/// name of the call's path.
pub(super) struct Entry {
    pub(super) dir: OwnedFd,
    pub(super) dir_path: PathBuf,
    pub(super) name: CString,
    /// The call's path ended in `/`.
    slash: bool,
}

impl Entry {
    pub(super) fn named(&self) -> Named<'_> {
        Named {
            dir: &self.dir_path,
            name: os(self.name.as_bytes()),
        }
    }
}

impl Caller {
    /// The entry `at` names, its path read once.
    fn entry(&self, at: At) -> Result<Entry, i32> {
        let path = self.path(at.path)?;
        self.entry_of(at.dir, path.as_bytes())
    }

    /// The entry `path` names from directory fd `dir`.
    pub(super) fn entry_of(&self, dir: RawFd, path: &[u8]) -> Result<Entry, i32> {
        let path = self.own_proc(path);
        if path.is_empty() {
            return Err(libc::ENOENT);
        }
        let slash = path.ends_with(b"/");
        let end = path.iter().rposition(|b| *b != b'/').map_or(0, |i| i + 1);
        let trimmed = &path[..end];
        let (dir_part, name): (&[u8], &[u8]) = match trimmed.iter().rposition(|b| *b == b'/') {
            _ if trimmed.is_empty() => (b"/", b"."),
            Some(0) => (b"/", &trimmed[1..]),
            Some(i) => (&trimmed[..i], &trimmed[i + 1..]),
            None => (b".", trimmed),
        };
        let base = match dir_part.first() {
            Some(b'/') => None,
            _ => Some(self.base(dir)?),
        };
        let dir = match (base, dir_part) {
            // A bare name in the working directory: that directory, which
            // `base` opened `O_PATH` and checked.
            (Some(cwd), b".") if dir == libc::AT_FDCWD => cwd,
            (base, _) => {
                let flags = libc::O_PATH | libc::O_DIRECTORY;
                let opened = open_at(base.as_ref().map(AsFd::as_fd), dir_part, flags)?;
                self.still_waiting()?;
                opened
            }
        };
        Ok(Entry {
            dir_path: named(dir.as_fd())?,
            dir,
            name: CString::new(name).map_err(|_| libc::EINVAL)?,
            slash,
        })
    }
}

/// Carry out `write` where `places` says so.
pub(super) fn answer(caller: &Caller, write: Write, places: &Places) -> Answer {
    let answer = match write {
        Write::Open { at, flags, mode } => open(caller, places, at, flags, mode),
        Write::Mkdir { at, mode } => make(caller, places, at, |entry, umask| {
            mkdirat(entry, mode & 0o7777 & !umask)
        }),
        Write::Mknod { at, mode, dev } => make(caller, places, at, |entry, umask| {
            let mode = (mode & libc::S_IFMT) | (mode & 0o7777 & !umask);
            mknodat(entry, mode, dev)
        }),
        Write::Unlink { at, dir } => unlink(caller, places, at, dir),
        Write::Rename { from, to, flags } => rename(caller, places, from, to, flags),
        Write::Link { from, to, flags } => link(caller, places, from, to, flags),
        Write::Symlink { target, at } => symlink(caller, places, target, at),
        Write::Truncate { path, length } => truncate(caller, places, path, length),
        Write::Bind {
            socket,
            address,
            length,
        } => bind(caller, places, socket, address, length),
    };
    // What the supervisor could not resolve, the kernel answers as it
    // would have (Landlock bounds it either way).
    answer.unwrap_or_else(|errno| match errno {
        libc::ENOENT if caller.still_waiting().is_err() => Answer::Sent,
        _ => Answer::Continue,
    })
}

/// The verdict as an answer, performing with `perform` where it says so.
fn decided(verdict: Verdict, perform: impl FnOnce() -> Answer) -> Result<Answer, i32> {
    Ok(match verdict {
        Verdict::Continue => Answer::Continue,
        Verdict::Refuse(errno) => Answer::Errno(errno),
        Verdict::Perform => perform(),
    })
}

/// `open`. Inside a supervised root the entry is judged by its name and
/// opened from its directory without following; a symlink there (the open
/// fails `ELOOP`) that the call would follow is judged where it leads.
/// Outside, the call goes back to the kernel — unless its last name is a
/// symlink the call follows (a descriptor's own `/proc` link among them),
/// which is judged where it leads.
fn open(caller: &Caller, places: &Places, at: At, flags: i32, mode: u32) -> Result<Answer, i32> {
    let entry = caller.entry(at)?;
    let exclusive = flags & libc::O_CREAT != 0 && flags & libc::O_EXCL != 0;
    let follows = flags & libc::O_NOFOLLOW == 0 && !exclusive;
    if !places.supervises(&entry.dir_path) {
        return match follows && is_symlink(&entry) {
            true => through_link(caller, places, &entry, flags),
            false => Ok(Answer::Continue),
        };
    }
    let tmpfile = flags & libc::O_TMPFILE == libc::O_TMPFILE;
    if entry.slash && !tmpfile {
        return Ok(Answer::Continue);
    }
    let verdict = match tmpfile {
        // An unnamed file in the directory the path names.
        true => match entry.named().name.as_encoded_bytes() {
            b"." => places.write(&entry.dir_path),
            name => places.write(&entry.dir_path.join(os(name))),
        },
        false => places.create(entry.named()),
    };
    if verdict != Verdict::Perform {
        return decided(verdict, || Answer::Continue);
    }
    let umask = match tmpfile || flags & libc::O_CREAT != 0 {
        true => caller.umask()?,
        false => 0,
    };
    let mode = mode & 0o7777 & !umask;
    let opening = Opening::At(entry);
    let first = first_open(&opening, flags | libc::O_NOFOLLOW, mode);
    match (first, opening) {
        (Err(libc::ELOOP), Opening::At(entry)) if follows => {
            through_link(caller, places, &entry, flags)
        }
        (Err(errno), _) => Ok(Answer::Errno(errno)),
        (Ok(file), opening) => Ok(hand_over(
            caller,
            opening,
            file,
            flags | libc::O_NOFOLLOW,
            mode,
        )),
    }
}

/// `open` of a symlink the call follows: its target opened by the
/// supervisor, judged where it lies, and opened again from that descriptor.
fn through_link(
    caller: &Caller,
    places: &Places,
    entry: &Entry,
    flags: i32,
) -> Result<Answer, i32> {
    let Ok(target) = open_at(Some(entry.dir.as_fd()), entry.name.as_bytes(), libc::O_PATH) else {
        return Ok(Answer::Continue);
    };
    match places.write(&named(target.as_fd())?) {
        Verdict::Perform => {
            let flags = flags & !(libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW);
            let opening = Opening::Again(target);
            Ok(match first_open(&opening, flags, 0) {
                Err(errno) => Answer::Errno(errno),
                Ok(file) => hand_over(caller, opening, file, flags, 0),
            })
        }
        verdict => decided(verdict, || Answer::Continue),
    }
}

/// What the supervisor opens for the caller, holding every descriptor the
/// open needs for as long as it may take.
enum Opening {
    /// An entry, by its name in its directory.
    At(Entry),
    /// The very file a descriptor holds (`O_PATH`), opened again.
    Again(OwnedFd),
}

impl Opening {
    /// Open it with `flags` (and `mode` when it creates).
    fn open(&self, flags: i32, mode: u32) -> Result<OwnedFd, i32> {
        match self {
            Opening::At(entry) => {
                open_mode(Some(entry.dir.as_fd()), entry.name.as_bytes(), flags, mode)
            }
            Opening::Again(file) => {
                open_mode(None, by_descriptor(file.as_fd()).as_bytes(), flags, mode)
            }
        }
    }
}

/// Whether the entry is a symlink now.
fn is_symlink(entry: &Entry) -> bool {
    let flags = libc::O_PATH | libc::O_NOFOLLOW;
    open_at(Some(entry.dir.as_fd()), entry.name.as_bytes(), flags)
        .and_then(|link| stat(link.as_fd()))
        .is_ok_and(|stat| stat.st_mode & libc::S_IFMT == libc::S_IFLNK)
}

/// The supervisor's first try at `opening`, non-blocking: the file, or none
/// where it is a FIFO the call would wait on (no reader or writer yet).
fn first_open(opening: &Opening, flags: i32, mode: u32) -> Result<Option<OwnedFd>, i32> {
    let blocking = flags & libc::O_NONBLOCK == 0;
    match opening.open(flags | libc::O_NONBLOCK, mode) {
        Err(libc::ENXIO) if blocking => Ok(None),
        Err(errno) => Err(errno),
        Ok(file) if !blocking => Ok(Some(file)),
        Ok(file) => {
            let fifo = stat(file.as_fd()).is_ok_and(|s| s.st_mode & libc::S_IFMT == libc::S_IFIFO);
            let read_write = flags & libc::O_ACCMODE == libc::O_RDWR;
            if fifo && !read_write {
                return Ok(None);
            }
            // As the call asked: without O_NONBLOCK.
            nix::fcntl::fcntl(
                &file,
                nix::fcntl::FcntlArg::F_SETFL(nix::fcntl::OFlag::from_bits_retain(
                    flags & !libc::O_ASYNC,
                )),
            )
            .map_err(|e| e as i32)?;
            Ok(Some(file))
        }
    }
}

/// Hand the caller the `file` opened from `opening`; where there is none
/// yet (a FIFO that waits), open it on a thread of its own, which takes the
/// descriptors it needs along.
fn hand_over(
    caller: &Caller,
    opening: Opening,
    file: Option<OwnedFd>,
    flags: i32,
    mode: u32,
) -> Answer {
    let cloexec = flags & libc::O_CLOEXEC != 0;
    if let Some(file) = file {
        return caller.inject(&file, cloexec);
    }
    let caller = caller.clone();
    let spawned = std::thread::Builder::new()
        .name("cordon-fifo".into())
        .spawn(move || {
            let answer = match opening.open(flags, mode) {
                Ok(file) => caller.inject(&file, cloexec),
                Err(errno) => Answer::Errno(errno),
            };
            caller.respond(answer);
        });
    match spawned {
        Ok(_) => Answer::Sent,
        Err(_) => Answer::Errno(libc::EAGAIN),
    }
}

/// `mkdir` and `mknod`: `perform` makes the entry with the caller's umask.
fn make(
    caller: &Caller,
    places: &Places,
    at: At,
    perform: impl FnOnce(&Entry, u32) -> Result<i64, i32>,
) -> Result<Answer, i32> {
    let entry = caller.entry(at)?;
    let verdict = places.create(entry.named());
    let umask = match verdict {
        Verdict::Perform => caller.umask()?,
        _ => 0,
    };
    decided(verdict, || perform(&entry, umask).into())
}

/// `mkdirat` on the entry.
#[allow(
    unsafe_code,
    reason = "the supervisor's file calls take NUL-ended paths it owns"
)]
fn mkdirat(entry: &Entry, mode: u32) -> Result<i64, i32> {
    // SAFETY: mkdirat reads the NUL-ended name we own.
    done(unsafe { libc::mkdirat(entry.dir.as_raw_fd(), entry.name.as_ptr(), mode) })
}

/// `mknodat` on the entry.
#[allow(
    unsafe_code,
    reason = "the supervisor's file calls take NUL-ended paths it owns"
)]
fn mknodat(entry: &Entry, mode: u32, dev: u64) -> Result<i64, i32> {
    // SAFETY: mknodat reads the NUL-ended name we own.
    done(unsafe { libc::mknodat(entry.dir.as_raw_fd(), entry.name.as_ptr(), mode, dev) })
}

/// `unlink` and `rmdir`.
#[allow(
    unsafe_code,
    reason = "the supervisor's file calls take NUL-ended paths it owns"
)]
fn unlink(caller: &Caller, places: &Places, at: At, dir: bool) -> Result<Answer, i32> {
    let entry = caller.entry(at)?;
    if entry.slash && !dir {
        return Ok(Answer::Continue);
    }
    let flags = if dir { libc::AT_REMOVEDIR } else { 0 };
    decided(places.remove(entry.named()), || {
        // SAFETY: unlinkat reads the NUL-ended name we own.
        done(unsafe { libc::unlinkat(entry.dir.as_raw_fd(), entry.name.as_ptr(), flags) }).into()
    })
}

/// `rename`, `renameat`, `renameat2` (its flags passed on).
#[allow(
    unsafe_code,
    reason = "the supervisor's file calls take NUL-ended paths it owns"
)]
fn rename(caller: &Caller, places: &Places, from: At, to: At, flags: u32) -> Result<Answer, i32> {
    let (from, to) = (caller.entry(from)?, caller.entry(to)?);
    decided(places.rename(from.named(), to.named()), || {
        // SAFETY: renameat2 reads the two NUL-ended names we own.
        let result = unsafe {
            libc::syscall(
                libc::SYS_renameat2,
                from.dir.as_raw_fd(),
                from.name.as_ptr(),
                to.dir.as_raw_fd(),
                to.name.as_ptr(),
                flags,
            )
        };
        done(result as i32).into()
    })
}

/// `link` and `linkat`: the existing file is opened by the supervisor (the
/// fd itself with `AT_EMPTY_PATH`), judged where it lies, and linked by
/// its descriptor.
#[allow(
    unsafe_code,
    reason = "the supervisor's file calls take NUL-ended paths it owns"
)]
fn link(caller: &Caller, places: &Places, from: At, to: At, flags: i32) -> Result<Answer, i32> {
    let source = caller.path(from.path)?;
    let file = match source.as_bytes() {
        b"" if flags & libc::AT_EMPTY_PATH != 0 => caller.fd(from.dir)?,
        path => {
            let entry = caller.entry_of(from.dir, path)?;
            let follow = flags & libc::AT_SYMLINK_FOLLOW != 0;
            let nofollow = if follow { 0 } else { libc::O_NOFOLLOW };
            let name = entry.name.as_bytes();
            open_at(Some(entry.dir.as_fd()), name, libc::O_PATH | nofollow)?
        }
    };
    let to = caller.entry(to)?;
    decided(places.link(&named(file.as_fd())?, to.named()), || {
        let file = by_descriptor(file.as_fd());
        // SAFETY: linkat reads the two NUL-ended paths we own.
        done(unsafe {
            libc::linkat(
                libc::AT_FDCWD,
                file.as_ptr(),
                to.dir.as_raw_fd(),
                to.name.as_ptr(),
                libc::AT_SYMLINK_FOLLOW,
            )
        })
        .into()
    })
}

/// `symlink` and `symlinkat`: the link's text read once.
#[allow(
    unsafe_code,
    reason = "the supervisor's file calls take NUL-ended paths it owns"
)]
fn symlink(caller: &Caller, places: &Places, target: u64, at: At) -> Result<Answer, i32> {
    let target = caller.path(target)?;
    let entry = caller.entry(at)?;
    decided(places.create(entry.named()), || {
        // SAFETY: symlinkat reads the two NUL-ended strings we own.
        done(unsafe {
            libc::symlinkat(target.as_ptr(), entry.dir.as_raw_fd(), entry.name.as_ptr())
        })
        .into()
    })
}

/// `truncate`: the file (symlinks followed, as the call does) opened by the
/// supervisor and judged where it lies.
#[allow(
    unsafe_code,
    reason = "the supervisor's file calls take NUL-ended paths it owns"
)]
fn truncate(caller: &Caller, places: &Places, path: u64, length: i64) -> Result<Answer, i32> {
    let path = caller.own_proc(caller.path(path)?.as_bytes());
    let base = match path.first() {
        Some(b'/') => None,
        _ => Some(caller.cwd()?),
    };
    let file = open_at(base.as_ref().map(AsFd::as_fd), path, libc::O_PATH)?;
    caller.still_waiting()?;
    decided(places.write(&named(file.as_fd())?), || {
        let file = by_descriptor(file.as_fd());
        // SAFETY: truncate reads the NUL-ended path we own.
        done(unsafe { libc::truncate(file.as_ptr(), length) }).into()
    })
}

/// `bind` of a unix socket to a path in a supervised root: the caller's
/// socket (its descriptor taken) bound by the supervisor through the
/// directory it holds (`/proc/self/fd/DIR/NAME`), with the caller's umask.
/// Any other address — inet, abstract, unnamed — is the kernel's.
#[allow(
    unsafe_code,
    reason = "the supervisor's file calls take NUL-ended paths it owns"
)]
fn bind(
    caller: &Caller,
    places: &Places,
    socket: RawFd,
    address: u64,
    length: u32,
) -> Result<Answer, i32> {
    // SAFETY: an all-zero sockaddr_un is a valid value (integers, bytes).
    let mut unix: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    let family = std::mem::size_of_val(&unix.sun_family);
    let length = length as usize;
    if length <= family || length > std::mem::size_of_val(&unix) {
        return Ok(Answer::Continue);
    }
    let bytes = caller.memory(address, length)?;
    let (kind, path) = bytes.split_at(family.min(bytes.len()));
    let unix_family = (libc::AF_UNIX as libc::sa_family_t).to_ne_bytes();
    if kind != unix_family || path.first().is_none_or(|b| *b == 0) {
        return Ok(Answer::Continue);
    }
    let end = path.iter().position(|b| *b == 0).unwrap_or(path.len());
    let entry = caller.entry_of(libc::AT_FDCWD, &path[..end])?;
    let verdict = places.create(entry.named());
    if verdict != Verdict::Perform {
        return decided(verdict, || Answer::Continue);
    }
    let umask = caller.umask()?;
    let socket = caller.fd(socket)?;
    let mut name = format!("/proc/self/fd/{}/", entry.dir.as_raw_fd()).into_bytes();
    name.extend_from_slice(entry.name.as_bytes());
    if name.len() >= unix.sun_path.len() {
        return Ok(Answer::Errno(libc::ENAMETOOLONG));
    }
    unix.sun_family = libc::AF_UNIX as libc::sa_family_t;
    for (to, from) in unix.sun_path.iter_mut().zip(&name) {
        *to = *from as libc::c_char;
    }
    let size = (family + name.len() + 1) as libc::socklen_t;
    // The socket file gets the caller's umask: set on this process (which
    // makes no file of its own) around the one call that creates it.
    let mask = |bits: u32| nix::sys::stat::Mode::from_bits_truncate(bits as libc::mode_t);
    let before = nix::sys::stat::umask(mask(umask));
    // SAFETY: bind reads `size` bytes of the sockaddr_un we own.
    let bound = unsafe {
        libc::bind(
            socket.as_raw_fd(),
            (&raw const unix).cast::<libc::sockaddr>(),
            size,
        )
    };
    nix::sys::stat::umask(before);
    Ok(done(bound).into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn write_calls_are_read_from_their_arguments() {
        let cwd = libc::AT_FDCWD as u64;
        let at = |dir: i32, path: u64| At { dir, path };
        assert_eq!(
            Write::of(libc::SYS_openat, [cwd, 0x10, 0o1101, 0o644, 0, 0]),
            Some(Write::Open {
                at: at(libc::AT_FDCWD, 0x10),
                flags: 0o1101,
                mode: 0o644
            })
        );
        assert_eq!(
            Write::of(
                libc::SYS_unlinkat,
                [3, 0x10, libc::AT_REMOVEDIR as u64, 0, 0, 0]
            ),
            Some(Write::Unlink {
                at: at(3, 0x10),
                dir: true
            })
        );
        assert_eq!(
            Write::of(libc::SYS_renameat2, [3, 0x10, 4, 0x20, 1, 0]),
            Some(Write::Rename {
                from: at(3, 0x10),
                to: at(4, 0x20),
                flags: 1
            })
        );
        assert_eq!(
            Write::of(libc::SYS_symlinkat, [0x30, 5, 0x40, 0, 0, 0]),
            Some(Write::Symlink {
                target: 0x30,
                at: at(5, 0x40)
            })
        );
        assert_eq!(
            Write::of(libc::SYS_bind, [7, 0x50, 110, 0, 0, 0]),
            Some(Write::Bind {
                socket: 7,
                address: 0x50,
                length: 110
            })
        );
        assert_eq!(Write::of(libc::SYS_read, [0; 6]), None);
        #[cfg(target_arch = "x86_64")]
        {
            assert_eq!(
                Write::of(libc::SYS_creat, [0x10, 0o600, 0, 0, 0, 0]),
                Some(Write::Open {
                    at: at(libc::AT_FDCWD, 0x10),
                    flags: libc::O_CREAT | libc::O_WRONLY | libc::O_TRUNC,
                    mode: 0o600
                })
            );
            assert_eq!(
                Write::of(libc::SYS_rmdir, [0x10, 0, 0, 0, 0, 0]),
                Some(Write::Unlink {
                    at: at(libc::AT_FDCWD, 0x10),
                    dir: true
                })
            );
        }
    }

    #[test]
    fn the_filter_hands_over_only_opens_that_write() {
        let rules = rules().unwrap();
        let openat = rules
            .iter()
            .find(|(nr, _)| *nr == libc::SYS_openat)
            .unwrap();
        assert_eq!(openat.1.len(), 4, "write, read-write, create, truncate");
        for nr in [libc::SYS_unlinkat, libc::SYS_renameat2, libc::SYS_linkat] {
            assert!(rules.iter().any(|(n, r)| *n == nr && r.is_empty()), "{nr}");
        }
    }
}
