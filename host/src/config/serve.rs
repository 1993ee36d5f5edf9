//! `[serve]` in `cordon.toml`: the server's bounds, whom a socket listener
//! admits, and per-uid ceilings.
//!
//! ```toml
//! [serve]
//! max_runs = 1024            # runs in flight across the server (foreground + running tasks)
//! max_session_runs = 256     # … in one connection
//! max_tasks = 1024           # tasks held (running or settled, until removed)
//! max_session_tasks = 512    # … by one connection
//! policy_threads = 8         # threads the policy calls run on
//! max_request_bytes = 16777216
//! max_batch = 256            # requests in one batch
//! max_in_flight = 256        # lines of one connection read and not yet answered
//! max_queued_replies = 32    # replies not yet taken by a client; at it, its lines wait
//! max_connections = 256      # socket clients at once
//! spill_ttl_secs = 3600      # a result's unreleased spill files are deleted after this
//! detach_ttl_secs = 600      # `detach` on: a detached connection's tasks wait this long
//! reload = "off"             # any | off | "/etc/cordon/policies" (components only from there)
//! allowed_uids = [1000]      # who may connect to the socket (default: the server's user; root always)
//! allowed_gids = [2000]      # members (by primary gid) of these groups too
//! socket_group = "agents"    # the socket file's group (name or gid); mode becomes 0660
//! spare_runners = true       # each connection keeps a sandbox built for its next run
//!
//! [serve.uid.1000]           # a narrower ceiling for one uid's sessions
//! max_mode = "read-only"
//! max_network = "none"
//! allowed_roots = ["/home/alice/src"]
//! deny_read = ["/srv/secrets"]   # hidden from this uid's runs
//! run_as = "client"          # a root server: client (default) | server | a uid or user name
//! ```
//!
//! A server running as root runs each socket client's commands as that
//! client (its uid, gid and groups): `run_as = "server"` keeps them root's,
//! a uid or name maps the client to that user.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

use super::network;
use crate::admission::SessionLimits;
use crate::model::{Ceiling, SandboxMode};
use crate::serve::listen::RunAs;
use crate::serve::{ReloadRule, ServeOptions};

/// `[serve]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServeFile {
    max_runs: Option<usize>,
    max_session_runs: Option<usize>,
    max_tasks: Option<usize>,
    max_session_tasks: Option<usize>,
    policy_threads: Option<usize>,
    max_request_bytes: Option<usize>,
    max_batch: Option<usize>,
    max_in_flight: Option<usize>,
    max_queued_replies: Option<usize>,
    max_connections: Option<usize>,
    spill_ttl_secs: Option<u64>,
    detach_ttl_secs: Option<u64>,
    reload: Option<String>,
    allowed_uids: Option<Vec<u32>>,
    allowed_gids: Option<Vec<u32>>,
    socket_group: Option<toml::Value>,
    uid: Option<BTreeMap<String, CeilingFile>>,
    spare_runners: Option<bool>,
}

/// `[serve.uid.N]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct CeilingFile {
    max_mode: Option<String>,
    max_network: Option<toml::Value>,
    allowed_roots: Option<Vec<PathBuf>>,
    deny_read: Option<Vec<PathBuf>>,
    run_as: Option<toml::Value>,
}

/// `[serve]`, validated.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServeConfig {
    /// The host's bounds on runs and tasks.
    pub session_limits: SessionLimits,
    /// Threads the policy calls run on (default: the host's).
    pub policy_threads: Option<usize>,
    /// The server's own bounds as written; their `reload` is the stdio
    /// default — [`ServeConfig::options`] gives each transport's.
    pub options: ServeOptions,
    /// `reload`, when written.
    pub reload: Option<ReloadRule>,
    /// Who may connect (default: the server's own user).
    pub allowed_uids: Option<Vec<u32>>,
    /// Groups whose members may connect.
    pub allowed_gids: Vec<u32>,
    /// The socket file's group.
    pub socket_group: Option<u32>,
    /// Narrower ceilings by uid.
    pub ceilings: BTreeMap<u32, Ceiling>,
    /// Whom some uids' runs are on a root server (default: the client).
    pub run_as: BTreeMap<u32, RunAs>,
    /// Whether each session keeps a spare runner built for its next run
    /// (default: yes; see `HostBuilder::spare_runners`).
    pub spare_runners: bool,
}

/// What no `[serve]` (or no config file) means: exactly an empty one's.
impl Default for ServeConfig {
    fn default() -> Self {
        parse(ServeFile::default()).expect("an empty [serve] is valid")
    }
}

impl ServeConfig {
    /// The server's options on a socket (`socket`) or stdio: as written,
    /// with the transport's `reload` default where none is written.
    pub fn options(&self, socket: bool) -> ServeOptions {
        ServeOptions {
            reload: self
                .reload
                .clone()
                .unwrap_or_else(|| ReloadRule::default_for(socket)),
            ..self.options.clone()
        }
    }
}

/// Validate `[serve]`; errors are `(key, message)`.
pub(super) fn parse(file: ServeFile) -> Result<ServeConfig, (String, String)> {
    let invalid = |key: &str, message: String| (format!("serve.{key}"), message);
    let positive = |key: &str, value: Option<usize>, default: usize| match value {
        Some(0) => Err(invalid(key, "must be positive".into())),
        Some(n) => Ok(n),
        None => Ok(default),
    };
    let limits = SessionLimits::default();
    let session_limits = SessionLimits {
        max_runs: positive("max_runs", file.max_runs, limits.max_runs)?,
        max_session_runs: positive(
            "max_session_runs",
            file.max_session_runs,
            limits.max_session_runs,
        )?,
        max_tasks: positive("max_tasks", file.max_tasks, limits.max_tasks)?,
        max_session_tasks: positive(
            "max_session_tasks",
            file.max_session_tasks,
            limits.max_session_tasks,
        )?,
    };
    let policy_threads = match file.policy_threads {
        Some(n @ 1..=crate::policy::pool::MAX_POLICY_THREADS) => Some(n),
        Some(_) => {
            return Err(invalid(
                "policy_threads",
                format!("must be 1..={}", crate::policy::pool::MAX_POLICY_THREADS),
            ));
        }
        None => None,
    };
    let defaults = ServeOptions::default();
    let options = ServeOptions {
        max_request_bytes: positive(
            "max_request_bytes",
            file.max_request_bytes,
            defaults.max_request_bytes,
        )?,
        max_batch: positive("max_batch", file.max_batch, defaults.max_batch)?,
        max_in_flight: positive("max_in_flight", file.max_in_flight, defaults.max_in_flight)?,
        max_queued_replies: positive(
            "max_queued_replies",
            file.max_queued_replies,
            defaults.max_queued_replies,
        )?,
        max_connections: positive(
            "max_connections",
            file.max_connections,
            defaults.max_connections,
        )?,
        spill_ttl: match file.spill_ttl_secs {
            Some(0) => return Err(invalid("spill_ttl_secs", "must be positive".into())),
            Some(secs) => Duration::from_secs(secs),
            None => defaults.spill_ttl,
        },
        reload: defaults.reload,
        detach_ttl: match file.detach_ttl_secs {
            Some(0) => return Err(invalid("detach_ttl_secs", "must be positive".into())),
            secs => secs.map(Duration::from_secs),
        },
    };
    let reload = file
        .reload
        .map(|rule| match rule.as_str() {
            "any" => Ok(ReloadRule::Any),
            "off" => Ok(ReloadRule::Off),
            dir if dir.starts_with('/') => Ok(ReloadRule::Under(PathBuf::from(dir))),
            other => Err(invalid(
                "reload",
                format!("{other:?} is neither any, off nor an absolute directory"),
            )),
        })
        .transpose()?;
    let socket_group = file.socket_group.map(socket_group).transpose()?;
    let (ceilings, run_as) = ceilings(file.uid.unwrap_or_default())?;
    Ok(ServeConfig {
        spare_runners: file.spare_runners.unwrap_or(true),
        session_limits,
        policy_threads,
        options,
        reload,
        allowed_uids: file.allowed_uids,
        allowed_gids: file.allowed_gids.unwrap_or_default(),
        socket_group,
        ceilings,
        run_as,
    })
}

/// `[serve] socket_group`: a group name or a gid.
fn socket_group(group: toml::Value) -> Result<u32, (String, String)> {
    let invalid = |message: String| ("serve.socket_group".to_owned(), message);
    match group {
        toml::Value::Integer(gid) => {
            u32::try_from(gid).map_err(|_| invalid(format!("{gid} is no gid")))
        }
        toml::Value::String(name) => group_id(&name).map_err(invalid),
        other => Err(invalid(format!(
            "{other} is neither a group name nor a gid"
        ))),
    }
}

/// Each uid's ceiling and whom its runs are (`[serve.uid.N]`).
type PerUid = (BTreeMap<u32, Ceiling>, BTreeMap<u32, RunAs>);

/// `[serve.uid.N]`: each uid's ceiling, and its `run_as`.
fn ceilings(uids: BTreeMap<String, CeilingFile>) -> Result<PerUid, (String, String)> {
    let invalid = |key: &str, message: String| (format!("serve.{key}"), message);
    let mut ceilings = BTreeMap::new();
    let mut runs_as = BTreeMap::new();
    for (uid, ceiling) in uids {
        let key = format!("uid.{uid}");
        let number: u32 = uid
            .parse()
            .map_err(|_| invalid(&key, format!("{uid:?} is not a numeric uid")))?;
        let max_mode = ceiling
            .max_mode
            .map(|mode| mode.parse::<SandboxMode>())
            .transpose()
            .map_err(|e| invalid(&format!("{key}.max_mode"), e.to_string()))?;
        let max_network = ceiling
            .max_network
            .map(|value| network(&value))
            .transpose()
            .map_err(|e| invalid(&format!("{key}.max_network"), e))?;
        for (field, paths) in [
            ("allowed_roots", &ceiling.allowed_roots),
            ("deny_read", &ceiling.deny_read),
        ] {
            if let Some(bad) = paths.iter().flatten().find(|p| !p.is_absolute()) {
                return Err(invalid(
                    &format!("{key}.{field}"),
                    format!("{} is not an absolute path", bad.display()),
                ));
            }
        }
        if let Some(value) = ceiling.run_as {
            let run_as = run_as(&value).map_err(|e| invalid(&format!("{key}.run_as"), e))?;
            runs_as.insert(number, run_as);
        }
        ceilings.insert(
            number,
            Ceiling {
                max_mode,
                max_network,
                allowed_roots: ceiling.allowed_roots,
                deny_read: ceiling.deny_read.unwrap_or_default(),
            },
        );
    }
    Ok((ceilings, runs_as))
}

/// `run_as`: `client`, `server`, a uid or a user's name.
fn run_as(value: &toml::Value) -> Result<RunAs, String> {
    match value {
        toml::Value::String(word) if word == "client" => Ok(RunAs::Client),
        toml::Value::String(word) if word == "server" => Ok(RunAs::Server),
        toml::Value::Integer(uid) => u32::try_from(*uid)
            .map(RunAs::User)
            .map_err(|_| format!("{uid} is no uid")),
        toml::Value::String(name) => match nix::unistd::User::from_name(name) {
            Ok(Some(user)) => Ok(RunAs::User(user.uid.as_raw())),
            Ok(None) => Err(format!(
                "{name:?} is neither client, server, a uid nor a user's name"
            )),
            Err(err) => Err(format!("cannot look up user {name:?}: {err}")),
        },
        other => Err(format!(
            "{other} is neither client, server, a uid nor a user's name"
        )),
    }
}

/// A group's id by name (or a number written as text).
pub fn group_id(name: &str) -> Result<u32, String> {
    if let Ok(gid) = name.parse::<u32>() {
        return Ok(gid);
    }
    match nix::unistd::Group::from_name(name) {
        Ok(Some(group)) => Ok(group.gid.as_raw()),
        Ok(None) => Err(format!("no group is named {name:?}")),
        Err(err) => Err(format!("cannot look up group {name:?}: {err}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_text(text: &str) -> Result<ServeConfig, (String, String)> {
        parse(toml::from_str(text).unwrap())
    }

    #[test]
    fn no_serve_section_keeps_spare_runners_and_an_operator_may_turn_them_off() {
        assert!(ServeConfig::default().spare_runners);
        assert!(parse_text("").unwrap().spare_runners);
        assert!(!parse_text("spare_runners = false").unwrap().spare_runners);
    }

    #[test]
    fn every_key_parses() {
        let config = parse_text(
            r#"
            max_runs = 10
            max_session_runs = 2
            max_tasks = 20
            max_session_tasks = 5
            policy_threads = 3
            max_request_bytes = 1000
            max_batch = 4
            max_in_flight = 8
            max_connections = 9
            spill_ttl_secs = 60
            detach_ttl_secs = 30
            reload = "/etc/cordon/policies"
            allowed_uids = [1000]
            allowed_gids = [2000]
            socket_group = 0
            [uid.1000]
            max_mode = "read-only"
            max_network = "none"
            allowed_roots = ["/home/a"]
            deny_read = ["/srv/secret"]
            run_as = "server"
            [uid.1001]
            run_as = "root"
            [uid.1002]
            run_as = 1003
            "#,
        )
        .unwrap();
        assert_eq!(config.session_limits.max_session_runs, 2);
        assert_eq!(config.policy_threads, Some(3));
        assert_eq!(config.options.max_batch, 4);
        assert_eq!(config.options.spill_ttl, Duration::from_secs(60));
        assert_eq!(config.options.detach_ttl, Some(Duration::from_secs(30)));
        assert_eq!(
            config.reload,
            Some(ReloadRule::Under("/etc/cordon/policies".into()))
        );
        assert_eq!(config.socket_group, Some(0));
        assert_eq!(config.ceilings[&1000].max_mode, Some(SandboxMode::ReadOnly));
        assert_eq!(
            config.ceilings[&1000].deny_read,
            [PathBuf::from("/srv/secret")]
        );
        assert_eq!(config.run_as[&1000], RunAs::Server);
        assert_eq!(config.run_as[&1001], RunAs::User(0));
        assert_eq!(config.run_as[&1002], RunAs::User(1003));
    }

    #[test]
    fn errors_name_the_key() {
        let key = |text: &str| parse_text(text).unwrap_err().0;
        assert_eq!(key("max_runs = 0"), "serve.max_runs");
        assert_eq!(key("policy_threads = 100000"), "serve.policy_threads");
        assert_eq!(key("reload = \"sometimes\""), "serve.reload");
        assert_eq!(
            key("socket_group = \"no-such-group-here\""),
            "serve.socket_group"
        );
        assert_eq!(
            key("[uid.alice]\nmax_mode = \"read-only\""),
            "serve.uid.alice"
        );
        assert_eq!(key("[uid.7]\nmax_mode = \"wide\""), "serve.uid.7.max_mode");
        assert_eq!(
            key("[uid.7]\nrun_as = \"nobody-such\""),
            "serve.uid.7.run_as"
        );
        assert_eq!(
            key("[uid.7]\ndeny_read = [\"rel\"]"),
            "serve.uid.7.deny_read"
        );
    }
}
