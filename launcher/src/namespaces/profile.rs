//! The runner's mount program: bwrap's own profile flags (the host's
//! `sandbox::bwrap::profile` writes them), read into a [`Plan`] of steps.

use std::path::{Path, PathBuf};

/// One step of the mount program, in bwrap's words.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    /// `--bind`, `--ro-bind`, `--ro-bind-try SOURCE DEST`: the host's
    /// `source` (and everything mounted below it) at `dest`.
    Bind {
        /// On the host.
        source: PathBuf,
        /// In the sandbox.
        dest: PathBuf,
        /// `--bind`: keep the host's write access (else read-only).
        writable: bool,
        /// `--ro-bind-try`: skip it when the source does not exist.
        optional: bool,
    },
    /// `--tmpfs DEST`: a fresh, empty, writable tmpfs.
    Tmpfs(PathBuf),
    /// `--remount-ro DEST`: the mount at `dest` read-only.
    RemountRo(PathBuf),
    /// `--dev DEST`: a minimal `/dev`.
    Dev(PathBuf),
    /// `--proc DEST`: a fresh `/proc` of the sandbox's PID namespace.
    Proc(PathBuf),
}

/// What the runner builds.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Plan {
    /// The mount program, in order; it starts with `--ro-bind / /`.
    pub steps: Vec<Step>,
    /// A network namespace of its own (only the loopback, brought up).
    pub unshare_net: bool,
}

impl Plan {
    /// The plan of a whole profile (bwrap's flags, as the host writes them
    /// for this runner), checked.
    pub fn read(args: &[&str]) -> Result<Plan, String> {
        let mut plan = Plan::default();
        let mut args = args.iter().map(std::ffi::OsString::from);
        while let Some(flag) = args.next() {
            let flag = flag.to_string_lossy().into_owned();
            if !plan.take(&flag, &mut args)? {
                return Err(format!("not a profile flag: {flag}"));
            }
        }
        plan.check()?;
        Ok(plan)
    }

    /// Take one profile flag and its operands from `args`; false when
    /// `flag` is not one of the profile's.
    pub fn take(
        &mut self,
        flag: &str,
        args: &mut impl Iterator<Item = std::ffi::OsString>,
    ) -> Result<bool, String> {
        let mut path = |what: &str| {
            args.next()
                .map(PathBuf::from)
                .filter(|p| p.is_absolute())
                .ok_or_else(|| format!("{flag} needs an absolute {what}"))
        };
        let step = match flag {
            "--bind" | "--ro-bind" | "--ro-bind-try" => Step::Bind {
                source: path("source")?,
                dest: path("destination")?,
                writable: flag == "--bind",
                optional: flag == "--ro-bind-try",
            },
            "--tmpfs" => Step::Tmpfs(path("destination")?),
            "--remount-ro" => Step::RemountRo(path("destination")?),
            "--dev" => Step::Dev(path("destination")?),
            "--proc" => Step::Proc(path("destination")?),
            // The runner always dies with the host.
            "--die-with-parent" => return Ok(true),
            "--unshare-net" => {
                self.unshare_net = true;
                return Ok(true);
            }
            _ => return Ok(false),
        };
        self.steps.push(step);
        Ok(true)
    }

    /// The host paths the program binds writable.
    pub fn writable_sources(&self) -> impl Iterator<Item = &Path> {
        self.steps.iter().filter_map(|step| {
            if let Step::Bind {
                source,
                writable: true,
                ..
            } = step
            {
                Some(source.as_path())
            } else {
                None
            }
        })
    }

    /// Check the program's shape: the host's root, read-only, first.
    pub fn check(&self) -> Result<(), String> {
        match self.steps.first() {
            Some(Step::Bind {
                source,
                dest,
                writable: false,
                optional: false,
            }) if source == Path::new("/") && dest == Path::new("/") => Ok(()),
            _ => Err("the mount program must start with --ro-bind / /".into()),
        }
    }
}
