//! The Landlock half of the launcher: build a ruleset that handles every
//! file right up to Landlock ABI 5 (truncate arrived in ABI 3, ioctl on
//! devices in ABI 5), grant read rights beneath each `--ro` path, listing
//! only beneath each `--ls` path, all rights beneath each `--rw` path and
//! read rights beneath each `--rw-supervised` root (whose changes the file
//! supervisor carries out, `notify/`), set no-new-privs and restrict this
//! process; nested children inherit the restriction. The ruleset also
//! scopes the command (Landlock ABI 6): it cannot signal processes outside
//! its domain — the host's, cordon's own — nor connect to abstract unix
//! sockets created outside it. On a kernel with an older ABI the ruleset
//! is *partially* enforced, which the launcher reports (informational,
//! never a failure).

use std::path::PathBuf;

use ::landlock::{
    ABI, Access, AccessFs, AccessNet, BitFlags, NetPort, PathBeneath, PathFd, Ruleset, RulesetAttr,
    RulesetCreated, RulesetCreatedAttr, RulesetStatus, Scope,
};

use super::{
    Mode, PROBE_FULL, PROBE_IPC_ISOLATED, PROBE_IPC_SHARED, PROBE_METADATA, PROBE_PARTIAL,
    PROBE_SCOPES, PROBE_WRITES_SUPERVISED, PROBE_WRITES_UNSUPERVISED,
};

/// The ABI whose file rights cordon's modes need.
const TARGET_ABI: ABI = ABI::V5;
/// The ABI whose scopes (signals, abstract unix sockets) every run gets.
const SCOPE_ABI: ABI = ABI::V6;

/// The scopes every run asks for.
fn scopes() -> BitFlags<Scope> {
    Scope::from_all(SCOPE_ABI)
}

/// A ruleset handling every file right of [`TARGET_ABI`] and scoped by
/// every scope of [`SCOPE_ABI`] (best effort: an older kernel enforces
/// what it has, and says so as `PartiallyEnforced`).
fn ruleset() -> Result<RulesetCreated, ::landlock::RulesetError> {
    Ruleset::default()
        .handle_access(AccessFs::from_all(TARGET_ABI))?
        .scope(scopes())?
        .create()
}

/// The scopes this kernel enforces, by name.
pub fn kernel_scopes() -> Vec<&'static str> {
    if kernel_abi() < 6 {
        return vec![];
    }
    scopes()
        .iter()
        .map(|scope| match scope {
            Scope::Signal => "signal",
            Scope::AbstractUnixSocket => "abstract-unix-socket",
            _ => "other",
        })
        .collect()
}

/// How completely the kernel enforces the ruleset.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Restricted {
    /// Every right the ruleset handles.
    Fully,
    /// An older ABI: some rights are not enforced.
    Partially,
}

/// The kernel's Landlock ABI version (0 when unsupported).
#[allow(
    unsafe_code,
    reason = "the Landlock ABI query is a raw system call; each block says why it is sound"
)]
pub fn kernel_abi() -> i64 {
    const LANDLOCK_CREATE_RULESET_VERSION: nix::libc::c_uint = 1;
    // SAFETY: the version query takes no attribute pointer and size 0.
    let abi = unsafe {
        nix::libc::syscall(
            nix::libc::SYS_landlock_create_ruleset,
            std::ptr::null::<u8>(),
            0usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    abi.max(0)
}

/// What a launch grants: paths by the rights beneath them.
pub(super) struct Grants<'a> {
    /// Read (and execute) rights.
    pub read_only: &'a [PathBuf],
    /// Listing only.
    pub listable: &'a [PathBuf],
    /// Every right.
    pub writable: &'a [PathBuf],
    /// Read rights: the file supervisor carries out changes there.
    pub supervised: &'a [PathBuf],
}

/// A ruleset made and not yet in force: made before the launcher forks
/// (and, for a launcher started ahead, before its command comes), put in
/// force by the command's process alone ([`Rules::restrict_self`]).
pub(super) struct Rules {
    ruleset: RulesetCreated,
    /// Each rule's path, with the identity (device, inode) of what the
    /// rule was made from.
    made_from: Vec<(PathBuf, u64, u64)>,
}

/// A file's device and inode, as the host's `DEV:INO` writable roots name
/// them.
#[allow(clippy::unnecessary_cast)] // `dev_t` and `ino_t` are not u64 on every target.
fn identity(stat: &nix::sys::stat::FileStat) -> (u64, u64) {
    (stat.st_dev as u64, stat.st_ino as u64)
}

/// The rights `grants` asks for, path by path, with whether the path may
/// have vanished since the host listed it.
fn rules_of<'a>(
    grants: &'a Grants<'_>,
) -> impl Iterator<Item = (&'a PathBuf, BitFlags<AccessFs>, bool)> {
    let read = AccessFs::from_read(TARGET_ABI);
    grants
        .read_only
        .iter()
        .map(move |path| (path, read, true))
        .chain(
            grants
                .listable
                .iter()
                .map(|path| (path, AccessFs::ReadDir.into(), false)),
        )
        .chain(
            grants
                .writable
                .iter()
                .map(|path| (path, AccessFs::from_all(TARGET_ABI), false)),
        )
        .chain(
            grants
                .supervised
                .iter()
                .map(move |path| (path, read, false)),
        )
}

impl Rules {
    /// The ruleset of `grants` — its denials logged to the kernel's audit
    /// after the exec too when `log_denials` (Landlock ABI 7; an older
    /// kernel logs none) — each writable root in `roots` granted only as
    /// the very directory the host checked; the error is the launcher's
    /// detail.
    pub(super) fn make(
        grants: &Grants<'_>,
        roots: &[super::verify::Root],
        connect_port: Option<u16>,
        log_denials: bool,
    ) -> Result<Rules, String> {
        let mut ruleset = match connect_port {
            None => ruleset(),
            // TCP handled too (ABI 4): no bind at all, connect to this port only.
            Some(_) if kernel_abi() < 4 => {
                return Err("this kernel's Landlock has no TCP rules (ABI 4)".into());
            }
            Some(_) => Ruleset::default()
                .handle_access(AccessFs::from_all(TARGET_ABI))
                .and_then(|r| r.handle_access(AccessNet::BindTcp | AccessNet::ConnectTcp))
                .and_then(|r| r.scope(scopes()))
                .and_then(Ruleset::create),
        }
        .map_err(|err| format!("ruleset error: {err}"))?;
        if let Some(port) = connect_port {
            ruleset = ruleset
                .add_rule(NetPort::new(port, AccessNet::ConnectTcp))
                .map_err(|err| format!("cannot grant TCP port {port}: {err}"))?;
        }
        let mut made_from = vec![];
        for (path, access, may_vanish) in rules_of(grants) {
            let fd = match PathFd::new(path) {
                Ok(fd) => fd,
                // A read grant beside a hidden path is one entry of a listing
                // the host made before the launch: an entry removed since then
                // needs no right (skipping a grant only takes rights away).
                Err(_) if may_vanish && std::fs::symlink_metadata(path).is_err() => continue,
                Err(err) => return Err(format!("cannot open {}: {err}", path.display())),
            };
            // What the rule is made from: the descriptor's own file.
            let stat = nix::sys::stat::fstat(&fd)
                .map_err(|err| format!("cannot read {}: {err}", path.display()))?;
            let (dev, ino) = identity(&stat);
            // A writable root the host checked is granted only if the
            // descriptor the rule is made from is that very directory.
            if let Some(root) = roots.iter().find(|root| &root.path == path) {
                root.matches(dev, ino)?;
            }
            // Directory-only rights cannot be granted on a file.
            let access = match stat.st_mode & nix::libc::S_IFMT == nix::libc::S_IFDIR {
                true => access,
                false => access & AccessFs::from_file(TARGET_ABI),
            };
            ruleset = ruleset
                .add_rule(PathBeneath::new(fd, access))
                .map_err(|err| format!("cannot grant {}: {err}", path.display()))?;
            made_from.push((path.clone(), dev, ino));
        }
        if log_denials {
            ruleset = ruleset
                .log_new_exec(true)
                .map_err(|err| format!("cannot log denials: {err}"))?;
        }
        Ok(Rules { ruleset, made_from })
    }

    /// Every rule's path still names what its rule was made from: a
    /// launcher started ahead checks this when its command comes (a path
    /// moved, replaced or removed on the host since then would leave a
    /// rule granting what the path no longer is; a fresh launcher would
    /// have made its rules from the paths as they are now).
    pub(super) fn unchanged(&self) -> Result<(), String> {
        for (path, dev, ino) in &self.made_from {
            // Followed, as the rule's own open followed it.
            let now = nix::sys::stat::stat(path.as_path()).map(|stat| identity(&stat));
            if now != Ok((*dev, *ino)) {
                return Err(format!(
                    "{} changed on the host while the launcher waited for its command; \
                     nothing was run (run the command again)",
                    path.display()
                ));
            }
        }
        Ok(())
    }

    /// Put the ruleset in force on this process (and no-new-privs): what
    /// it execs next is confined.
    pub(super) fn restrict_self(self) -> Result<Restricted, String> {
        let restricted = self
            .ruleset
            .restrict_self()
            .map_err(|err| format!("cannot restrict: {err}"))?;
        match restricted.ruleset {
            RulesetStatus::FullyEnforced => Ok(Restricted::Fully),
            RulesetStatus::PartiallyEnforced => Ok(Restricted::Partially),
            RulesetStatus::NotEnforced => Err("this kernel does not enforce Landlock".into()),
        }
    }
}

/// `--probe`: try what a launch will do — new IPC namespaces, a throwaway
/// ruleset, the metadata filter — and say how it was enforced: the verdict line, the ABI, the
/// scopes in force and whether IPC can be isolated.
pub(super) fn probe() -> ! {
    let fail = |status, detail: &str| -> ! { Mode::Landlock.fail(status, detail) };
    let ipc = crate::ipc::unshare_ipc().is_ok();
    match ruleset().and_then(|r| r.restrict_self()).map(|s| s.ruleset) {
        Ok(RulesetStatus::FullyEnforced) => println!("{PROBE_FULL}"),
        Ok(RulesetStatus::PartiallyEnforced) => println!("{PROBE_PARTIAL}"),
        Ok(RulesetStatus::NotEnforced) => fail(None, "this kernel does not enforce Landlock"),
        Err(err) => fail(None, &format!("ruleset error: {err}")),
    }
    // Whether runs get the file supervisor: for writes in the roots that
    // hold protected paths (it must hand the command descriptors), else
    // for `chmod` and `utimensat` inside the writable roots only, else
    // neither (those refused everywhere). The listener is dropped at once:
    // a call handed to no listener fails `ENOSYS`, so nothing waits.
    #[cfg(target_os = "linux")]
    let writes = super::notify::probe(true).map(drop);
    #[cfg(target_os = "linux")]
    let metadata = match &writes {
        Ok(()) => Ok(()),
        Err(_) => super::notify::probe(false).map(drop),
    };
    #[cfg(target_os = "linux")]
    if let Err(detail) = super::metadata::refuse_metadata_changes(metadata.is_ok()) {
        fail(None, &detail);
    }
    println!("abi: {}", kernel_abi());
    #[cfg(target_os = "linux")]
    match metadata {
        Ok(()) => println!("{PROBE_METADATA}supervised inside the writable roots"),
        Err(err) => println!("{PROBE_METADATA}refused everywhere ({err})"),
    }
    #[cfg(target_os = "linux")]
    match writes {
        Ok(()) => println!("{PROBE_WRITES_SUPERVISED}"),
        Err(err) => println!("{PROBE_WRITES_UNSUPERVISED}{err}"),
    }
    println!("{PROBE_SCOPES}{}", kernel_scopes().join(", "));
    println!(
        "{}",
        if ipc {
            PROBE_IPC_ISOLATED
        } else {
            PROBE_IPC_SHARED
        }
    );
    std::process::exit(0)
}
