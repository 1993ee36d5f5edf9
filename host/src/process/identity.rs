//! Whom a run's processes are: a root server runs a socket client's
//! commands as that client ([`Identity`]), so what the command may read,
//! whom `id` says it is and whose files it creates are the kernel's answer
//! for that user — a ceiling bounds writes, an identity bounds everything.
//!
//! The host cannot change a child's identity through `posix_spawn` (it
//! starts runners without forking itself, `spawn.rs` says why), so a run
//! with an identity starts `cordon __as`, which takes it on and executes
//! the runner in the same process ([`Identity::wrap`]).

use std::ffi::OsString;
use std::path::PathBuf;

/// A user a run's processes are: uid, gid, supplementary groups, and the
/// name and home directory its environment names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Identity {
    /// The uid.
    pub uid: u32,
    /// The primary gid.
    pub gid: u32,
    /// Supplementary groups.
    pub groups: Vec<u32>,
    /// The user's name in the user database, when it has one.
    pub name: Option<String>,
    /// The user's home directory, when the user database names one.
    pub home: Option<PathBuf>,
}

impl Identity {
    /// The user `uid` with primary group `gid` (a socket peer's, from
    /// `SO_PEERCRED`) and the supplementary groups the user database gives
    /// it. A uid the database does not know gets `gid` alone.
    pub fn of_user(uid: u32, gid: u32) -> Identity {
        let user = nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(uid))
            .ok()
            .flatten();
        let groups = user
            .as_ref()
            .and_then(|user| supplementary(&user.name, gid))
            .unwrap_or_else(|| vec![gid]);
        Identity {
            uid,
            gid,
            groups,
            name: user.as_ref().map(|user| user.name.clone()),
            home: user.map(|user| user.dir),
        }
    }

    /// The user `uid` as the user database has it (its primary gid), for
    /// an operator's mapping of a client to another user.
    pub fn of_uid(uid: u32) -> Result<Identity, String> {
        match nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(uid)) {
            Ok(Some(user)) => Ok(Identity::of_user(uid, user.gid.as_raw())),
            Ok(None) => Err(format!("no user has uid {uid}")),
            Err(err) => Err(format!("cannot look up uid {uid}: {err}")),
        }
    }

    /// Whether a process of this host already is this identity (nothing
    /// to take on).
    pub fn is_this_process(&self) -> bool {
        nix::unistd::geteuid().as_raw() == self.uid && nix::unistd::getegid().as_raw() == self.gid
    }

    /// Whether this user may reach `path` — search every directory above
    /// it — as the mode bits say. A directory with an access ACL counts as
    /// searchable (its bits do not tell), as does anything that cannot be
    /// read: only a path this user certainly cannot reach is `false`, and
    /// a runner need not (cannot) cover such a path to hide it.
    pub fn may_reach(&self, path: &std::path::Path) -> bool {
        let mut ancestors: Vec<&std::path::Path> = path.ancestors().skip(1).collect();
        ancestors.reverse();
        ancestors.into_iter().all(|dir| self.may_search(dir))
    }

    /// Whether this user may enter the directory `dir`: reach it, and
    /// search it.
    pub fn may_enter(&self, dir: &std::path::Path) -> bool {
        self.may_reach(dir) && self.may_search(dir)
    }

    /// Whether the mode bits of `dir` let this user search it (or cannot
    /// tell: an ACL, or a directory that cannot be read).
    fn may_search(&self, dir: &std::path::Path) -> bool {
        use std::os::unix::fs::MetadataExt;
        let Ok(meta) = std::fs::metadata(dir) else {
            return true;
        };
        let bit = if meta.uid() == self.uid {
            0o100
        } else if self.gid == meta.gid() || self.groups.contains(&meta.gid()) {
            0o010
        } else {
            0o001
        };
        meta.mode() & bit != 0 || has_access_acl(dir)
    }

    /// `argv` (a runner's, or an unconfined command's) started as this
    /// identity: `cordon __as …` (`cordon` being `launcher` — the
    /// launcher's own executable installed beside this one —, else this
    /// executable) executing
    /// it — with the environment at [`crate::process::HANDOVER_FD`] when
    /// `env_over_fd` (`__as` itself runs with a fixed one).
    pub(crate) fn wrap(
        &self,
        argv: Vec<String>,
        env_over_fd: bool,
        launcher: Option<std::path::PathBuf>,
    ) -> std::io::Result<Vec<String>> {
        if cfg!(not(target_os = "linux")) {
            return Err(std::io::Error::new(
                std::io::ErrorKind::Unsupported,
                "a run as another user needs Linux",
            ));
        }
        // The launcher's own executable beside this one, else this one —
        // when it dispatches the modes: a program that does not would run
        // its own main again.
        let cordon = match launcher {
            Some(launcher) => launcher,
            None if !cordon_launcher::dispatches() => {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::Unsupported,
                    "a run as another user needs cordon's `__as` mode, which this program does \
                     not dispatch (its main does not call cordon_launcher::invoked)",
                ));
            }
            None => std::env::current_exe()?,
        };
        let groups: Vec<String> = self.groups.iter().map(u32::to_string).collect();
        let mut wrapped = vec![
            cordon.to_string_lossy().into_owned(),
            cordon_launcher::AS_SUBCOMMAND.to_owned(),
            "--uid".into(),
            self.uid.to_string(),
            "--gid".into(),
            self.gid.to_string(),
            "--groups".into(),
            groups.join(","),
        ];
        if env_over_fd {
            wrapped.extend(["--env-fd".into(), super::HANDOVER_FD.to_string()]);
        }
        wrapped.push("--".into());
        wrapped.extend(argv);
        Ok(wrapped)
    }

    /// The environment entries that name the user (`HOME`, `USER`,
    /// `LOGNAME`): this identity's replace the server's.
    pub(crate) fn name_user_in(&self, env: &mut Vec<(OsString, OsString)>) {
        let mut set = |name: &str, value: OsString| {
            env.retain(|(have, _)| have != name);
            env.push((name.into(), value));
        };
        if let Some(home) = &self.home {
            set("HOME", home.clone().into_os_string());
        }
        if let Some(name) = &self.name {
            set("USER", name.into());
            set("LOGNAME", name.into());
        }
    }
}

/// Whether `dir` carries an access ACL (whose entries its mode bits do
/// not show in full).
#[cfg(target_os = "linux")]
#[allow(
    unsafe_code,
    reason = "lgetxattr is a raw system call; the block says why it is sound"
)]
fn has_access_acl(dir: &std::path::Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let Ok(path) = std::ffi::CString::new(dir.as_os_str().as_bytes()) else {
        return true;
    };
    // SAFETY: two NUL-terminated strings and a zero-length query (no
    // buffer is written); returns the value's size or -1.
    let size = unsafe {
        nix::libc::lgetxattr(
            path.as_ptr(),
            c"system.posix_acl_access".as_ptr(),
            std::ptr::null_mut(),
            0,
        )
    };
    size > 0
}

/// Elsewhere: mode bits alone.
#[cfg(not(target_os = "linux"))]
fn has_access_acl(_dir: &std::path::Path) -> bool {
    false
}

/// The groups the user database gives `name` (with `gid`).
#[cfg(target_os = "linux")]
fn supplementary(name: &str, gid: u32) -> Option<Vec<u32>> {
    let name = std::ffi::CString::new(name).ok()?;
    let groups = nix::unistd::getgrouplist(&name, nix::unistd::Gid::from_raw(gid)).ok()?;
    Some(groups.into_iter().map(|g| g.as_raw()).collect())
}

/// Elsewhere a client's runs are the server's own (`__as` is Linux's).
#[cfg(not(target_os = "linux"))]
fn supplementary(_name: &str, _gid: u32) -> Option<Vec<u32>> {
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn root_is_known_with_its_home_and_groups() {
        let root = Identity::of_user(0, 0);
        assert_eq!(root.name.as_deref(), Some("root"));
        assert!(root.groups.contains(&0), "{root:?}");
        assert!(Identity::of_uid(0).is_ok());
    }

    #[test]
    fn an_unknown_uid_keeps_its_peer_gid_alone() {
        let stranger = Identity::of_user(3_999_999_999, 77);
        assert_eq!(stranger.groups, vec![77]);
        assert_eq!(stranger.name, None);
        assert!(Identity::of_uid(3_999_999_999).is_err());
    }

    #[test]
    fn a_path_beneath_a_directory_closed_to_the_user_is_unreachable() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let closed = dir.path().join("closed");
        std::fs::create_dir(&closed).unwrap();
        std::fs::set_permissions(&closed, std::fs::Permissions::from_mode(0o700)).unwrap();
        let me = nix::unistd::geteuid().as_raw();
        let stranger = Identity {
            uid: me.wrapping_add(12345),
            gid: 3_999_999_998,
            groups: vec![],
            name: None,
            home: None,
        };
        let owner = Identity {
            uid: me,
            ..stranger.clone()
        };
        assert!(!stranger.may_reach(&closed.join("secret")));
        assert!(!stranger.may_enter(&closed), "the directory itself");
        assert!(owner.may_enter(&closed));
        assert!(stranger.may_reach(&closed), "its parent is open");
        assert!(owner.may_reach(&closed.join("secret")));
        std::fs::set_permissions(&closed, std::fs::Permissions::from_mode(0o701)).unwrap();
        assert!(stranger.may_reach(&closed.join("secret")));
    }

    #[test]
    fn the_wrap_takes_the_identity_before_the_runner() {
        // This executable dispatches the launcher modes, as cordon's main.
        cordon_launcher::invoked(&[]);
        let who = Identity {
            uid: 1001,
            gid: 1002,
            groups: vec![1002, 27],
            name: Some("alice".into()),
            home: Some("/home/alice".into()),
        };
        let argv = who
            .wrap(vec!["bwrap".into(), "--".into(), "id".into()], false, None)
            .unwrap();
        assert_eq!(
            argv[1..],
            [
                "__as", "--uid", "1001", "--gid", "1002", "--groups", "1002,27", "--", "bwrap",
                "--", "id"
            ]
        );
        let mut env = vec![
            ("HOME".into(), "/root".into()),
            ("PATH".into(), "/bin".into()),
        ];
        who.name_user_in(&mut env);
        assert!(env.contains(&("HOME".into(), "/home/alice".into())));
        assert!(env.contains(&("USER".into(), "alice".into())));
        assert!(env.contains(&("PATH".into(), "/bin".into())));
        assert_eq!(env.iter().filter(|(n, _)| n == "HOME").count(), 1);
    }
}
