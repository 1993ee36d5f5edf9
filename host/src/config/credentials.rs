//! `[credentials.NAME]` in `cordon.toml`: credentials a command never
//! holds ([`crate::credentials`]).
//!
//! ```toml
//! [credentials.github]
//! hosts = ["api.github.com:443"]      # where it may be sent (within max_network)
//! from_env = "GITHUB_TOKEN"           # or from_file = "/run/secrets/gh", or
//! # from_command = ["gh", "auth", "token"]   (run once, when the host starts)
//! env = "GITHUB_TOKEN"                # the variable a run finds the placeholder in
//! header = "authorization"            # where an attached credential goes (default)
//! format = "Bearer {}"                # how it is written there (default)
//! ```
//!
//! Every value is read when the configuration is: a variable that is not
//! set, a file that cannot be read, a command that fails, a value no
//! header may carry or a host outside `max_network` is an error naming the
//! key, at start, not at the first request. The variable a value comes
//! from is withheld from every run, and a file it comes from is hidden.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;

use crate::credentials::{Credential, Secret};
use crate::model::{Endpoint, Network};

/// How long `from_command` may take.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(10);

/// One `[credentials.NAME]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CredentialFile {
    /// Endpoints it may be sent to.
    pub hosts: Vec<String>,
    /// A variable of the host's environment holding the value.
    pub from_env: Option<String>,
    /// A file holding the value (its last newline dropped).
    pub from_file: Option<PathBuf>,
    /// A command printing the value (run once, at start).
    pub from_command: Option<Vec<String>>,
    /// The variable a run finds its placeholder in.
    pub env: Option<String>,
    /// The header an attached credential is sent in.
    pub header: Option<String>,
    /// How it is written there (`{}` is the value).
    pub format: Option<String>,
}

/// The credentials read, and the files they came from (hidden from runs).
#[derive(Clone, Debug, Default)]
pub struct Credentials {
    /// Each credential, its value read.
    pub list: Vec<Arc<Credential>>,
    /// The `from_file` files.
    pub files: Vec<PathBuf>,
}

/// Read every `[credentials.NAME]`: the error names `credentials.NAME.KEY`.
pub fn read(
    tables: BTreeMap<String, CredentialFile>,
    max_network: Option<&Network>,
) -> Result<Credentials, (String, String)> {
    let mut read = Credentials::default();
    for (name, table) in tables {
        let key = |field: &str| format!("credentials.{name}.{field}");
        if name.is_empty()
            || !name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        {
            return Err((
                format!("credentials.{name}"),
                "a credential's name is letters, digits, - and _".into(),
            ));
        }
        let hosts = hosts(&table.hosts, max_network).map_err(|why| (key("hosts"), why))?;
        let (source, value) = value(&table)?;
        let value = value.map_err(|why| (key(source), why))?;
        if hyper::header::HeaderValue::from_str(&value).is_err() || value.is_empty() {
            return Err((
                key(source),
                "the value is empty or holds a character no HTTP header may carry (a newline?)"
                    .into(),
            ));
        }
        if let Some(env) = &table.env
            && (env.is_empty() || env.contains(['=', '\0']))
        {
            return Err((
                key("env"),
                format!("{env:?} is not an environment variable's name"),
            ));
        }
        let header = table
            .header
            .clone()
            .unwrap_or_else(|| "authorization".into());
        if hyper::header::HeaderName::from_bytes(header.as_bytes()).is_err() {
            return Err((key("header"), format!("{header:?} is not a header name")));
        }
        let format = table.format.clone().unwrap_or_else(|| "Bearer {}".into());
        if !format.contains("{}") {
            return Err((
                key("format"),
                format!("{format:?} has no {{}} for the value"),
            ));
        }
        read.files.extend(table.from_file.clone());
        read.list.push(Arc::new(Credential {
            name,
            value: Secret::new(value),
            hosts,
            env: table.env,
            source_var: table.from_env,
            header: header.to_ascii_lowercase(),
            format,
        }));
    }
    Ok(read)
}

/// The endpoints, each within `max_network` (a credential bound where no
/// run may connect could never be sent).
fn hosts(hosts: &[String], max_network: Option<&Network>) -> Result<Vec<Endpoint>, String> {
    if hosts.is_empty() {
        return Err("name at least one endpoint it may be sent to".into());
    }
    let ceiling = max_network.cloned().unwrap_or(Network::None);
    hosts
        .iter()
        .map(|text| {
            let endpoint: Endpoint = text.parse()?;
            if !Network::Allow(vec![endpoint.clone()]).within(&ceiling) {
                return Err(format!("{text} is not within max_network ({ceiling})"));
            }
            Ok(endpoint)
        })
        .collect()
}

/// The key of the one source a table names, and the value read from it.
type Sourced = (&'static str, Result<String, String>);

/// The value from the one source the table names, and that source's key.
fn value(table: &CredentialFile) -> Result<Sourced, (String, String)> {
    let sources = [
        table.from_env.is_some(),
        table.from_file.is_some(),
        table.from_command.is_some(),
    ];
    if sources.iter().filter(|named| **named).count() != 1 {
        return Err((
            "credentials".into(),
            "each credential names exactly one of from_env, from_file, from_command".into(),
        ));
    }
    if let Some(var) = &table.from_env {
        let value = std::env::var(var).map_err(|_| {
            format!("the variable {var} is not set (or not UTF-8) in cordon's environment")
        });
        return Ok(("from_env", value));
    }
    if let Some(path) = &table.from_file {
        let value = std::fs::read_to_string(path)
            .map(|text| text.strip_suffix('\n').unwrap_or(&text).to_owned())
            .map_err(|err| format!("cannot read {}: {err}", path.display()));
        return Ok(("from_file", value));
    }
    let argv = table.from_command.clone().unwrap_or_default();
    Ok(("from_command", command_output(&argv)))
}

/// What `argv` prints, its last newline dropped; it must exit 0 within
/// [`COMMAND_TIMEOUT`].
fn command_output(argv: &[String]) -> Result<String, String> {
    let Some((program, args)) = argv.split_first() else {
        return Err("the command is empty".into());
    };
    let mut child = std::process::Command::new(program)
        .args(args)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .map_err(|err| format!("cannot run {program}: {err}"))?;
    let started = std::time::Instant::now();
    while child.try_wait().map_err(|err| err.to_string())?.is_none() {
        if started.elapsed() > COMMAND_TIMEOUT {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!(
                "{program} did not finish within {} s",
                COMMAND_TIMEOUT.as_secs()
            ));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let output = child.wait_with_output().map_err(|err| err.to_string())?;
    if !output.status.success() {
        let said = String::from_utf8_lossy(&output.stderr);
        return Err(format!(
            "{program} failed ({}): {}",
            output.status,
            crate::text::reason(said.trim())
        ));
    }
    let text =
        String::from_utf8(output.stdout).map_err(|_| format!("{program} printed no UTF-8"))?;
    Ok(text.strip_suffix('\n').unwrap_or(&text).to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(toml: &str) -> BTreeMap<String, CredentialFile> {
        toml::from_str(toml).unwrap()
    }

    fn ceiling() -> Network {
        Network::Allow(vec![
            "*.github.com:443".parse().unwrap(),
            "127.0.0.1".parse().unwrap(),
        ])
    }

    #[test]
    fn a_credential_is_read_from_its_one_source_and_bound_within_max_network() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("token");
        std::fs::write(&file, "from-file\n").unwrap();
        let read = read(
            table(&format!(
                "[gh]\nhosts = [\"api.github.com:443\"]\nfrom_file = {:?}\nenv = \"GITHUB_TOKEN\"\n\
                 [cmd]\nhosts = [\"127.0.0.1:8080\"]\nfrom_command = [\"printf\", \"from-command\"]\n\
                 header = \"X-Api-Key\"\nformat = \"{{}}\"\n",
                file.to_str().unwrap()
            )),
            Some(&ceiling()),
        )
        .unwrap();
        let (cmd, gh) = (&read.list[0], &read.list[1]);
        assert_eq!((gh.name.as_str(), gh.value.expose()), ("gh", "from-file"));
        assert_eq!(gh.env.as_deref(), Some("GITHUB_TOKEN"));
        assert_eq!(
            (gh.header.as_str(), gh.attached().as_str()),
            ("authorization", "Bearer from-file")
        );
        assert_eq!(cmd.value.expose(), "from-command");
        assert_eq!(
            (cmd.header.as_str(), cmd.attached().as_str()),
            ("x-api-key", "from-command")
        );
        assert_eq!(read.files, [file]);
        assert!(!format!("{read:?}").contains("from-file"), "{read:?}");
    }

    #[test]
    fn every_mistake_is_named_at_start() {
        let err = |toml: &str| read(table(toml), Some(&ceiling())).unwrap_err();
        let (key, why) = err("[gh]\nhosts = [\"evil.test:443\"]\nfrom_command = [\"true\"]\n");
        assert_eq!(key, "credentials.gh.hosts");
        assert!(why.contains("not within max_network"), "{why}");
        let (key, why) =
            err("[gh]\nhosts = [\"api.github.com:443\"]\nfrom_env = \"CORDON_UNSET_FOR_TEST\"\n");
        assert_eq!(key, "credentials.gh.from_env");
        assert!(why.contains("CORDON_UNSET_FOR_TEST is not set"), "{why}");
        let (_, why) = err("[gh]\nhosts = [\"api.github.com:443\"]\n");
        assert!(why.contains("exactly one of"), "{why}");
        let (key, why) =
            err("[gh]\nhosts = [\"api.github.com:443\"]\nfrom_command = [\"false\"]\n");
        assert_eq!(key, "credentials.gh.from_command");
        assert!(why.contains("false failed"), "{why}");
        let (key, _) =
            err("[gh]\nhosts = [\"api.github.com:443\"]\nfrom_command = [\"printf\", \"a\\nb\"]\n");
        assert_eq!(key, "credentials.gh.from_command");
        let (key, _) = err(
            "[gh]\nhosts = [\"api.github.com:443\"]\nfrom_command = [\"printf\", \"x\"]\nformat = \"Bearer\"\n",
        );
        assert_eq!(key, "credentials.gh.format");
        let (key, _) = err(
            "[\"a b\"]\nhosts = [\"api.github.com:443\"]\nfrom_command = [\"printf\", \"x\"]\n",
        );
        assert_eq!(key, "credentials.a b");
        let (_, why) = read(
            table("[gh]\nhosts = [\"api.github.com:443\"]\nfrom_command = [\"printf\", \"x\"]\n"),
            None,
        )
        .unwrap_err();
        assert!(why.contains("max_network (none)"), "{why}");
    }
}
