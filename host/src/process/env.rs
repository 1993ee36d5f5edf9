//! The child's environment (SPEC.md §3): the host's environment as the
//! operator's [`EnvPolicy`] lets it through, credentials scrubbed, then the
//! spec's entries in order (later wins).
//!
//! The scrub withholds what looks like a credential, by name or by value:
//!
//! * names containing `KEY`, `PASSWORD`, `PASSWD`, `PASSPHRASE`, `SECRET`,
//!   `TOKEN`, `CREDENTIAL`, `AUTH`, `JWT`, `COOKIE`, `SESSION`, `PRIVATE`,
//!   `MNEMONIC`, `WEBHOOK` or `CONNECTION_STRING` (any case) —
//!   `AWS_SESSION_TOKEN`, `GOOGLE_APPLICATION_CREDENTIALS`,
//!   `NPM_CONFIG__AUTH`, `SSH_AUTH_SOCK`, `BORG_PASSPHRASE`,
//!   `SLACK_WEBHOOK_URL`, …;
//! * names ending in `_PAT`, `_PWD`, `_PASS`, `_SEED` or `_DSN`
//!   (`GITHUB_PAT`, `MYSQL_PWD`, `MASTER_SEED`, `SENTRY_DSN`), and
//!   `KUBECONFIG`, `DOCKER_CONFIG`, `PGPASSFILE`, `PGPASS`, `SSHPASS`,
//!   `NETRC`;
//! * every `CORDON_*` variable;
//! * values that carry a credential: a URL with a password in it
//!   (`postgres://user:pw@db/app`, so `DATABASE_URL` too), a connection
//!   string with a key or password (`AccountKey=`, `SharedAccessKey=`,
//!   `Password=`, …), a chat webhook URL, a PEM private key, or a token
//!   with a well-known prefix (`ghp_`, `github_pat_`, `glpat-`, `xoxb-`,
//!   `sk-`, an `AKIA` access key id).
//!
//! An agent's command has no business reading the operator's credentials.
//! An entry the request names explicitly is the caller's choice and
//! survives; so does a host variable the operator's policy includes.

use std::ffi::{OsStr, OsString};
use std::path::PathBuf;

/// Substrings (upper case) that mark a variable name as a credential.
const CREDENTIAL_MARKERS: &[&str] = &[
    "KEY",
    "PASSWORD",
    "PASSWD",
    "SECRET",
    "TOKEN",
    "CREDENTIAL",
    "AUTH",
    "JWT",
    "COOKIE",
    "SESSION",
    "PRIVATE",
    "PASSPHRASE",
    "MNEMONIC",
    "WEBHOOK",
    "CONNECTION_STRING",
];

/// Name endings (upper case) that mark a credential.
const CREDENTIAL_SUFFIXES: &[&str] = &["_PAT", "_PWD", "_PASS", "_SEED", "_DSN"];

/// Names of variables that are credentials or point at credential files.
const CREDENTIAL_NAMES: &[&str] = &[
    "KUBECONFIG",
    "DOCKER_CONFIG",
    "PGPASSFILE",
    "PGPASS",
    "SSHPASS",
    "NETRC",
];

/// Keys (lower case, with their `=`) of a connection string's parts that
/// carry a secret (Azure storage and service bus, ADO.NET, ODBC).
const SECRET_PARTS: &[&str] = &[
    "accountkey=",
    "sharedaccesskey=",
    "sharedaccesssignature=",
    "password=",
    "pwd=",
];

/// URL prefixes of webhooks that are themselves the credential.
const WEBHOOK_PREFIXES: &[&str] = &[
    "https://hooks.slack.com/",
    "https://discord.com/api/webhooks/",
    "https://discordapp.com/api/webhooks/",
];

/// Value prefixes of well-known token formats.
const TOKEN_PREFIXES: &[&str] = &[
    "ghp_",
    "gho_",
    "ghu_",
    "ghs_",
    "ghr_",
    "github_pat_",
    "glpat-",
    "xoxb-",
    "xoxp-",
    "xoxa-",
    "sk-",
    "-----BEGIN",
];

/// The host variables a command inherits before the scrub.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Inherit {
    /// Every host variable.
    #[default]
    All,
    /// Only [`CORE_VARS`] (and `LC_*`).
    Core,
    /// None: the command gets the defaults and its request's entries only.
    None,
}

/// The variables `Inherit::Core` keeps.
pub const CORE_VARS: &[&str] = &[
    "PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "TZ", "TMPDIR",
];

/// Which host variables reach a command (`[env]` in `cordon.toml`):
/// `inherit` picks the starting set, the credential scrub removes what
/// looks like a secret, `include` patterns let named variables through
/// anyway, and `exclude` patterns remove variables whatever else says.
/// A pattern is a name with `*` wildcards (`MY_*`, `*_URL`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EnvPolicy {
    /// The starting set.
    pub inherit: Inherit,
    /// Host variables let through even when the scrub or `inherit` would
    /// drop them.
    pub include: Vec<String>,
    /// Host variables always dropped.
    pub exclude: Vec<String>,
}

/// The caller's shell state, never inherited: they name the directories
/// of whoever started the host, not the command's. The command's shell
/// sets `PWD` from its own working directory — and an inherited `PWD`
/// that happened to name it made bash check every prefix of the path
/// (`sh_canonpath`): 4.7 ms of a run in a workspace 400 directories deep.
pub const CALLER_SHELL_STATE: &[&str] = &["PWD", "OLDPWD"];

impl EnvPolicy {
    /// Whether the host variable `name` (with `value`) reaches commands.
    pub fn passes(&self, name: &str, value: &str) -> bool {
        if CALLER_SHELL_STATE.contains(&name) {
            return false;
        }
        if self.exclude.iter().any(|p| matches(p, name)) {
            return false;
        }
        if self.include.iter().any(|p| matches(p, name)) {
            return true;
        }
        let inherited = match self.inherit {
            Inherit::All => true,
            Inherit::Core => CORE_VARS.contains(&name) || name.starts_with("LC_"),
            Inherit::None => false,
        };
        inherited && !is_scrubbed(name, value)
    }
}

/// Whether `name` matches `pattern` (`*` matches any run of characters).
fn matches(pattern: &str, name: &str) -> bool {
    let mut parts = pattern.split('*');
    let first = parts.next().unwrap_or_default();
    let Some(mut rest) = name.strip_prefix(first) else {
        return false;
    };
    let parts: Vec<&str> = parts.collect();
    let Some((last, middle)) = parts.split_last() else {
        return rest.is_empty();
    };
    for part in middle {
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    rest.len() >= last.len() && rest.ends_with(last)
}

/// Whether the host variable `name` with `value` looks like a credential.
pub fn is_scrubbed(name: &str, value: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    upper.starts_with("CORDON_")
        || CREDENTIAL_MARKERS.iter().any(|m| upper.contains(m))
        || CREDENTIAL_SUFFIXES.iter().any(|s| upper.ends_with(s))
        || CREDENTIAL_NAMES.contains(&upper.as_str())
        || value_is_credential(value)
}

/// A URL with a password, a private key, or a well-known token.
fn value_is_credential(value: &str) -> bool {
    let value = value.trim();
    if TOKEN_PREFIXES.iter().any(|p| value.starts_with(p))
        || WEBHOOK_PREFIXES.iter().any(|p| value.starts_with(p))
    {
        return true;
    }
    // Key=Value;Key=Value… with a secret part.
    let lower = value.to_ascii_lowercase();
    if lower.contains(';')
        && lower.split(';').any(|part| {
            SECRET_PARTS
                .iter()
                .any(|key| part.trim_start().starts_with(key))
        })
    {
        return true;
    }
    if value.len() == 20
        && value.starts_with("AKIA")
        && value.chars().all(|c| c.is_ascii_alphanumeric())
    {
        return true;
    }
    // scheme://user:password@host…
    value.split("://").skip(1).any(|after| {
        let authority = after.split(['/', '?', '#']).next().unwrap_or_default();
        authority
            .rsplit_once('@')
            .is_some_and(|(userinfo, _)| userinfo.contains(':'))
    })
}

/// Variables that point a program at a host socket (an ssh or gpg agent,
/// a container engine, a session bus, a display, a terminal multiplexer):
/// withheld from a run whose network is closed, unless their value names a
/// socket the grant exposes. The socket itself is closed by the sandbox;
/// this keeps programs from trying it (and from leaking where it is).
pub const SOCKET_VARS: &[&str] = &[
    "SSH_AUTH_SOCK",
    "GPG_AGENT_INFO",
    "DOCKER_HOST",
    "CONTAINER_HOST",
    "DBUS_SESSION_BUS_ADDRESS",
    "DBUS_SYSTEM_BUS_ADDRESS",
    "DISPLAY",
    "WAYLAND_DISPLAY",
    "PULSE_SERVER",
    "SWAYSOCK",
    "I3SOCK",
    "TMUX",
    "KITTY_LISTEN_ON",
    "VSCODE_IPC_HOOK_CLI",
];

/// Whether host variable `name` points at a host socket that `exposed`
/// does not name.
pub fn points_at_a_closed_socket(name: &OsStr, value: &OsStr, exposed: &[PathBuf]) -> bool {
    let Some(name) = name.to_str() else {
        return false;
    };
    if !SOCKET_VARS.contains(&name) {
        return false;
    }
    let value = value.to_string_lossy();
    !exposed
        .iter()
        .any(|socket| !socket.as_os_str().is_empty() && value.contains(&*socket.to_string_lossy()))
}

/// The complete environment for a child: `host` through `policy` and the
/// scrub, then `overlay`. `closed` is, for a run whose network is closed,
/// the sockets its grant exposes: a [`SOCKET_VARS`] variable is then
/// withheld unless it names one of them, and passes even the scrub when it
/// does (`SSH_AUTH_SOCK` for an exposed agent). None: the host's network.
pub fn child_env(
    host: impl IntoIterator<Item = (OsString, OsString)>,
    policy: &EnvPolicy,
    overlay: &[(String, String)],
    closed: Option<&[PathBuf]>,
) -> Vec<(OsString, OsString)> {
    let mut env: Vec<(OsString, OsString)> = host
        .into_iter()
        .filter(|(name, value)| match closed {
            Some(exposed) if name.to_str().is_some_and(|n| SOCKET_VARS.contains(&n)) => {
                !points_at_a_closed_socket(name, value, exposed)
            }
            Some(_) | None => match (name.to_str(), value.to_str()) {
                (Some(name), Some(value)) => policy.passes(name, value),
                (Some(name), None) => policy.passes(name, ""),
                (None, _) => false,
            },
        })
        .collect();
    for (name, value) in overlay {
        env.retain(|(existing, _)| existing != name.as_str());
        env.push((name.into(), value.into()));
    }
    env
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn socket_variables_are_withheld_unless_their_socket_is_exposed() {
        let agent = OsStr::new("/tmp/ssh-x/agent.1");
        let closed = |name: &str, value: &OsStr, exposed: &[&str]| {
            let exposed: Vec<PathBuf> = exposed.iter().map(PathBuf::from).collect();
            points_at_a_closed_socket(OsStr::new(name), value, &exposed)
        };
        assert!(closed("SSH_AUTH_SOCK", agent, &[]));
        assert!(!closed("SSH_AUTH_SOCK", agent, &["/tmp/ssh-x/agent.1"]));
        assert!(closed(
            "DBUS_SESSION_BUS_ADDRESS",
            OsStr::new("unix:path=/run/user/0/bus"),
            &["/tmp/ssh-x/agent.1"]
        ));
        assert!(!closed(
            "DBUS_SESSION_BUS_ADDRESS",
            OsStr::new("unix:path=/run/user/0/bus"),
            &["/run/user/0/bus"]
        ));
        assert!(!closed("HOME", OsStr::new("/root"), &[]));
    }

    fn os(pairs: &[(&str, &str)]) -> Vec<(OsString, OsString)> {
        pairs.iter().map(|(k, v)| (k.into(), v.into())).collect()
    }

    #[test]
    fn credentials_and_cordon_variables_are_scrubbed() {
        for name in [
            "AWS_SECRET_ACCESS_KEY",
            "GITHUB_TOKEN",
            "db_password",
            "CORDON_X",
            "api_key",
            "GITHUB_PAT",
            "MY_JWT_SIGNING",
            "MYSQL_PWD",
            "NPM_CONFIG__AUTH",
            "GOOGLE_APPLICATION_CREDENTIALS",
            "AZURE_CREDENTIALS",
            "KUBECONFIG",
            "AWS_SESSION_TOKEN",
            "SSH_AUTH_SOCK",
            "REDIS_PASS",
            "BORG_PASSPHRASE",
            "GPG_PASSPHRASE",
            "SSHPASS",
            "PGPASSWORD",
            "PGPASS",
            "MNEMONIC",
            "WALLET_MNEMONIC",
            "MASTER_SEED",
            "AZURE_STORAGE_CONNECTION_STRING",
            "SENTRY_DSN",
            "SLACK_WEBHOOK_URL",
        ] {
            assert!(is_scrubbed(name, "x"), "{name}");
        }
        for name in [
            "PATH",
            "HOME",
            "LANG",
            "TERM",
            "PWD",
            "OLDPWD",
            "SSL_CERT_FILE",
            "PYTHONHASHSEED",
            "PGHOST",
        ] {
            assert!(!is_scrubbed(name, "/x"), "{name}");
        }
    }

    #[test]
    fn values_that_carry_a_credential_are_scrubbed_whatever_the_name() {
        for value in [
            "postgres://app:hunter2@db.internal:5432/app",
            "https://user:pw@example.com/path?q",
            "ghp_abcdefghijklmnopqrstuvwxyz0123456789",
            "github_pat_11ABC",
            "glpat-xxxx",
            "-----BEGIN OPENSSH PRIVATE KEY-----",
            "AKIAIOSFODNN7EXAMPLE",
            "DefaultEndpointsProtocol=https;AccountName=a;AccountKey=c2VjcmV0;EndpointSuffix=core.windows.net",
            "Endpoint=sb://x.servicebus.windows.net/;SharedAccessKeyName=k;SharedAccessKey=abc=",
            "Server=db;Database=app;User Id=sa;Password=hunter2;",
            "https://hooks.slack.com/services/T000/B000/XXXXXXXX",
            "https://discord.com/api/webhooks/1/abc",
        ] {
            assert!(is_scrubbed("DATABASE_URL_OR_ANY", value), "{value}");
            assert!(is_scrubbed("HARMLESS", value), "{value}");
        }
        for value in [
            "https://example.com/path",
            "ssh://git@github.com/org/repo",
            "/usr/bin:/bin",
            "http://proxy:3128",
            "Server=db;Database=app;Trusted_Connection=True;",
            "a;b;c",
        ] {
            assert!(!is_scrubbed("HARMLESS", value), "{value}");
        }
    }

    #[test]
    fn patterns_match_with_wildcards() {
        assert!(matches("MY_*", "MY_VAR"));
        assert!(matches("*_URL", "DATABASE_URL"));
        assert!(matches("A*B*C", "AxxBxxC"));
        assert!(matches("EXACT", "EXACT"));
        assert!(!matches("EXACT", "EXACTLY"));
        assert!(!matches("*_URL", "URL"));
        assert!(!matches("A*B", "AB_C"));
    }

    #[test]
    fn the_callers_working_directories_are_never_inherited() {
        let all = EnvPolicy {
            include: vec!["*".into()],
            ..EnvPolicy::default()
        };
        for name in CALLER_SHELL_STATE {
            assert!(!all.passes(name, "/home/someone"), "{name}");
        }
        assert!(all.passes("PWDX", "/x"));
    }

    #[test]
    fn the_policy_picks_the_set_then_includes_and_excludes_win() {
        let core = EnvPolicy {
            inherit: Inherit::Core,
            ..EnvPolicy::default()
        };
        assert!(core.passes("PATH", "/bin"));
        assert!(core.passes("LC_ALL", "C"));
        assert!(!core.passes("EDITOR", "vi"));
        let none = EnvPolicy {
            inherit: Inherit::None,
            include: vec!["DATABASE_URL".into(), "CI_*".into()],
            exclude: vec!["CI_SECRET_*".into()],
        };
        assert!(!none.passes("PATH", "/bin"));
        assert!(
            none.passes("DATABASE_URL", "postgres://a:b@c/d"),
            "include beats the scrub"
        );
        assert!(none.passes("CI_JOB", "1"));
        assert!(!none.passes("CI_SECRET_X", "1"), "exclude beats include");
        let all = EnvPolicy::default();
        assert!(all.passes("EDITOR", "vi"));
        assert!(!all.passes("GITHUB_TOKEN", "x"));
    }

    #[test]
    fn overlay_wins_and_survives_the_scrub() {
        let env = child_env(
            os(&[("PATH", "/bin"), ("TERM", "xterm"), ("MY_TOKEN", "t")]),
            &EnvPolicy::default(),
            &[
                ("TERM".into(), "dumb".into()),
                ("EXPLICIT_OVERRIDE_PASSWORD".into(), "1".into()),
            ],
            None,
        );
        assert_eq!(
            env,
            os(&[
                ("PATH", "/bin"),
                ("TERM", "dumb"),
                ("EXPLICIT_OVERRIDE_PASSWORD", "1")
            ])
        );
    }
}
