//! The Seatbelt backend (macOS `sandbox-exec -p PROFILE -- argv`): its
//! probe, the profile generator of SPEC.md §6, its wrap and its dialect.
//!
//! The generator is pure and unit-tested on every platform; only the e2e
//! run needs macOS.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::model::{Backend, Enforcement, SandboxPolicy, Signatures, WrapFacts};

use super::Wrap;
use super::grant::Layout;
use super::probe::{Probed, Usable, run_bounded};

/// The runner's program.
pub const PROGRAM: &str = "/usr/bin/sandbox-exec";

/// What every confined run is allowed, whatever its grant: the profile
/// starts from `(deny default)`, as the peers' do, and allows only what a
/// shell and the usual tools need — run and fork programs, signal and
/// inspect processes of this sandbox only, read the file tree and the
/// system's settings, the few system services libc and the security
/// framework call, terminals and the null device. Writes, the network and
/// every other service stay denied unless the grant adds them below.
pub const BASE: &str = "(version 1) (deny default) \
(allow process-exec process-fork) \
(allow signal (target same-sandbox)) \
(allow process-info* (target same-sandbox)) \
(allow file-read*) \
(allow sysctl-read) \
(allow user-preference-read) \
(allow mach-lookup (global-name \"com.apple.system.opendirectoryd.libinfo\") \
(global-name \"com.apple.system.notification_center\") \
(global-name \"com.apple.system.logger\") \
(global-name \"com.apple.logd\") \
(global-name \"com.apple.trustd.agent\") \
(global-name \"com.apple.SecurityServer\")) \
(allow ipc-posix-sem) \
(allow pseudo-tty) \
(allow file-ioctl (literal \"/dev/null\") (literal \"/dev/zero\") (regex #\"^/dev/ttys[0-9]+$\")) \
(allow file-write* (literal \"/dev/null\") (literal \"/dev/zero\") (literal \"/dev/dtracehelper\"))";

/// The profile for `layout` (a policy laid out on this host): [`BASE`],
/// then the grant. `user_temp` is the per-user temp dir
/// (`confstr(_CS_DARWIN_USER_TEMP_DIR)`, canonical), writable under
/// `workspace-write` together with the writable roots and `/private/tmp`.
/// Seatbelt matches paths, so the grant needs no placeholders: a protected
/// path is denied writes whether or not it exists (so it cannot be
/// created), a deny-read path is denied reads; a closed network allows
/// nothing but the exposed sockets, an open one the network. Later rules
/// win over earlier ones.
pub fn profile(layout: &Layout, user_temp: Option<&Path>) -> String {
    let mut profile = String::from(BASE);
    if !layout.writable.is_empty() {
        let mut writable: Vec<PathBuf> = layout.writable.clone();
        writable.push(PathBuf::from("/private/tmp"));
        writable.extend(user_temp.map(Path::to_path_buf));
        let mut seen = Vec::new();
        writable.retain(|path| {
            let fresh = !seen.contains(path);
            seen.push(path.clone());
            fresh
        });
        profile.push_str(" (allow file-write*");
        for path in writable {
            profile.push_str(&format!(" (subpath \"{}\")", escape(&path)));
        }
        profile.push(')');
    }
    if !layout.protected.is_empty() {
        profile.push_str(" (deny file-write*");
        for protected in &layout.protected {
            profile.push_str(&format!(" (subpath \"{}\")", escape(&protected.path)));
        }
        profile.push(')');
    }
    if layout.network_closed() {
        for socket in &layout.facts.sockets {
            profile.push_str(&format!(
                " (allow network-outbound (remote unix-socket (path-literal \"{}\")))",
                escape(socket)
            ));
        }
    } else {
        profile.push_str(" (allow network* system-socket)");
    }
    if !layout.facts.deny_read.is_empty() {
        profile.push_str(" (deny file-read* file-write*");
        for path in &layout.facts.deny_read {
            profile.push_str(&format!(" (subpath \"{}\")", escape(path)));
        }
        profile.push(')');
    }
    profile
}

/// Escape `\` and `"` for a Seatbelt string literal.
fn escape(path: &Path) -> String {
    path.to_string_lossy()
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
}

/// `sandbox-exec`, with the per-user temp dir its profiles allow.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Seatbelt {
    user_temp: Option<PathBuf>,
}

impl Seatbelt {
    /// Seatbelt with `user_temp` as the per-user temp dir (canonical).
    pub fn with_user_temp(user_temp: Option<PathBuf>) -> Self {
        Seatbelt { user_temp }
    }

    /// The full argv: `sandbox-exec -p PROFILE -- argv`.
    pub fn wrap(&self, argv: &[String], policy: &SandboxPolicy, layout: &Layout) -> Wrap {
        let mut full = vec![
            PROGRAM.to_owned(),
            "-p".to_owned(),
            profile(layout, self.user_temp.as_deref()),
            "--".to_owned(),
        ];
        full.extend(argv.iter().cloned());
        Wrap::new(full, policy.clone(), facts()).granting(layout.facts.clone())
    }
}

/// Run `/usr/bin/true` under [`BASE`] through `sandbox-exec` within
/// `timeout`: the rung is usable only where this macOS accepts the base
/// every run's profile starts from and a program runs under it.
pub(super) fn probe(timeout: Duration) -> Probed<Seatbelt> {
    let argv: Vec<String> = [PROGRAM, "-p", BASE, "--", "/usr/bin/true"]
        .map(String::from)
        .to_vec();
    let out = run_bounded(&argv, timeout)?;
    if !out.success {
        return Err(format!(
            "sandbox-exec failed the probe: {}",
            out.first_line()
        ));
    }
    let user_temp = std::env::var_os("TMPDIR").and_then(|t| std::fs::canonicalize(t).ok());
    Ok(Usable {
        runner: Seatbelt::with_user_temp(user_temp),
        reason: "sandbox-exec ran the probe".into(),
    })
}

/// Seatbelt's facts: full enforcement; `sandbox-exec: …` lines are its own
/// failures, `Operation not permitted` a denied write.
pub fn facts() -> WrapFacts {
    WrapFacts {
        backend: Backend::Seatbelt,
        enforcement: Enforcement::Full,
        signatures: Signatures {
            runner_failure: vec!["sandbox-exec: ".into()],
            runner_failure_exit: None,
            runner_notices: vec![],
            denial: vec!["operation not permitted".into()],
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::SandboxMode;
    use crate::sandbox::grant::lay_out;

    /// `policy` laid out with nothing protected, and today's network.
    fn bare(policy: &SandboxPolicy) -> Layout {
        let policy = SandboxPolicy {
            network: crate::model::Network::Full,
            ..policy.clone()
        };
        let mut layout = lay_out(&policy, &[], &[]);
        layout.protected.clear();
        layout
    }

    #[test]
    fn a_closed_network_allows_nothing_but_the_exposed_sockets() {
        let mut policy = SandboxPolicy::new(SandboxMode::ReadOnly, "/Users/me/ws");
        policy.sockets.push("/Users/me/.ssh/agent.sock".into());
        let profile = profile(&lay_out(&policy, &[], &[]), None);
        assert!(
            profile.ends_with(
                "(allow network-outbound (remote unix-socket \
                 (path-literal \"/Users/me/.ssh/agent.sock\")))"
            ),
            "{profile}"
        );
        assert!(!profile.contains("(allow network*"), "{profile}");
        // An open network is allowed whole.
        let open = super::profile(&bare(&policy), None);
        assert!(open.ends_with("(allow network* system-socket)"), "{open}");
    }

    #[test]
    fn every_profile_starts_from_deny_and_never_allows_writes_wholesale() {
        for mode in [SandboxMode::ReadOnly, SandboxMode::WorkspaceWrite] {
            let policy = SandboxPolicy::new(mode, "/Users/me/ws");
            let profile = profile(&lay_out(&policy, &[], &[]), None);
            assert!(
                profile.starts_with("(version 1) (deny default)"),
                "{profile}"
            );
            assert!(!profile.contains("(allow default)"), "{profile}");
            assert!(!profile.contains("(allow file-write*)"), "{profile}");
            assert!(
                !profile.contains("(allow mach-lookup)"),
                "every service: {profile}"
            );
            // Processes of this sandbox only.
            assert!(profile.contains("(allow signal (target same-sandbox))"));
            // Balanced parentheses: sandbox-exec refuses a profile that is not.
            let depth = profile.chars().try_fold(0i32, |depth, c| {
                let depth = depth + i32::from(c == '(') - i32::from(c == ')');
                (depth >= 0).then_some(depth)
            });
            assert_eq!(depth, Some(0), "{profile}");
        }
    }

    #[test]
    fn protected_and_hidden_paths_are_denied_after_the_writable_roots() {
        let mut policy = SandboxPolicy::new(SandboxMode::WorkspaceWrite, "/Users/me/ws");
        policy.deny_read.push("/Users/me/.ssh".into());
        let profile = profile(&lay_out(&policy, &[], &[]), None);
        let allow = profile.find("(allow file-write* (subpath").unwrap();
        let deny = profile.find("(deny file-write* (subpath").unwrap();
        assert!(allow < deny, "{profile}");
        assert!(profile[deny..].contains("(subpath \"/Users/me/ws/.git\")"));
        assert!(profile.ends_with("(deny file-read* file-write* (subpath \"/Users/me/.ssh\"))"));
    }

    #[test]
    fn read_only_profile_is_exact() {
        let policy = SandboxPolicy::new(SandboxMode::ReadOnly, "/Users/me/ws");
        assert_eq!(
            profile(&bare(&policy), Some(Path::new("/private/var/folders/x/T"))),
            format!("{BASE} (allow network* system-socket)")
        );
    }

    #[test]
    fn workspace_write_allows_workspace_tmp_and_user_temp() {
        let policy = SandboxPolicy::new(SandboxMode::WorkspaceWrite, "/Users/me/ws");
        assert_eq!(
            profile(&bare(&policy), Some(Path::new("/private/var/folders/x/T"))),
            format!(
                "{BASE} (allow file-write* (subpath \"/Users/me/ws\") (subpath \"/private/tmp\") \
                 (subpath \"/private/var/folders/x/T\")) (allow network* system-socket)"
            )
        );
    }

    #[test]
    fn writable_paths_are_deduplicated() {
        let policy = SandboxPolicy::new(SandboxMode::WorkspaceWrite, "/private/tmp");
        let profile = profile(&bare(&policy), Some(Path::new("/private/tmp")));
        assert_eq!(profile.matches("(subpath \"/private/tmp\")").count(), 1);
    }

    #[test]
    fn quotes_and_backslashes_are_escaped() {
        let policy = SandboxPolicy::new(SandboxMode::WorkspaceWrite, "/Users/me/we\"ird\\ws");
        let profile = profile(&bare(&policy), None);
        assert!(
            profile.contains("(subpath \"/Users/me/we\\\"ird\\\\ws\")"),
            "{profile}"
        );
    }

    #[test]
    fn wrap_puts_the_argv_after_the_separator() {
        let policy = SandboxPolicy::new(SandboxMode::ReadOnly, "/ws");
        let argv = vec!["bash".to_owned(), "-c".to_owned(), "true".to_owned()];
        let wrap = Seatbelt::with_user_temp(None).wrap(&argv, &policy, &bare(&policy));
        assert_eq!(wrap.argv()[0], PROGRAM);
        assert_eq!(wrap.argv()[1], "-p");
        assert_eq!(&wrap.argv()[3..], ["--", "bash", "-c", "true"]);
        assert_eq!(wrap.facts().backend, Backend::Seatbelt);
    }
}
