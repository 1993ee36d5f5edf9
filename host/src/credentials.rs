//! Credentials a command never holds.
//!
//! The operator declares each credential by name in `cordon.toml`, where
//! its value comes from (an environment variable of the host, a file, or a
//! command run once when the host starts) and the endpoints it may be sent
//! to. A run whose network goes through the allow-list proxy gets a
//! *placeholder* for each — a random token naming the credential, in the
//! variable the operator named — and never the value: not in its
//! environment, not in any file it can read. The proxy, for every request
//! it can read (plain HTTP; HTTPS to an inspected endpoint), replaces a
//! placeholder in the request's headers or target with the value when the
//! request goes to an endpoint the credential is bound to, attaches the
//! value when the policy's `request` verdict asks for it, and refuses a
//! request that carries a placeholder anywhere else (recorded). A request
//! the proxy cannot read (a tunnel) carries the placeholder, which is
//! worth nothing. The value never reaches a component, the facts, the
//! audit log or a model: they name the credential, never its value.

use std::fmt;
use std::sync::Arc;

use crate::model::Endpoint;

/// A credential's value: never printed, wiped when dropped.
#[derive(Clone)]
pub struct Secret(zeroize::Zeroizing<String>);

impl Secret {
    /// Hold `value`.
    pub fn new(value: String) -> Self {
        Secret(zeroize::Zeroizing::new(value))
    }

    /// The value, for the one place that sends it.
    pub(crate) fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(<withheld>)")
    }
}

/// One credential the operator declared.
#[derive(Clone, Debug)]
pub struct Credential {
    /// Its name (`[credentials.NAME]`), which a policy's `attach-credential`
    /// names and the facts record.
    pub name: String,
    /// Its value.
    pub value: Secret,
    /// Where it may be sent (as `max_network` names endpoints).
    pub hosts: Vec<Endpoint>,
    /// The variable a run finds its placeholder in; none: no placeholder
    /// (it is only ever attached by the policy).
    pub env: Option<String>,
    /// The host's variable the value came from, withheld from every run.
    pub source_var: Option<String>,
    /// The header an attached credential is sent in (lower case).
    pub header: String,
    /// How the value is written in that header: `{}` is the value.
    pub format: String,
}

impl Credential {
    /// Whether it may be sent to `host:port`.
    pub fn bound_to(&self, host: &str, port: u16) -> bool {
        let wanted = Endpoint::at(host, port);
        self.hosts.iter().any(|bound| bound.covers(&wanted))
    }

    /// The header value an attached credential is sent as.
    pub(crate) fn attached(&self) -> String {
        self.format.replace("{}", self.value.expose())
    }
}

/// The credentials of one run: each with the placeholder the run holds.
#[derive(Debug, Default)]
pub struct RunCredentials {
    held: Vec<(Arc<Credential>, String)>,
}

impl RunCredentials {
    /// Fresh placeholders for `credentials`, unguessable and unlike any
    /// other run's.
    pub fn issue(credentials: &[Arc<Credential>]) -> Self {
        let held = credentials
            .iter()
            .map(|credential| {
                let placeholder = format!(
                    "cordon-credential-{}-{:032x}",
                    credential.name,
                    crate::random::u128()
                );
                (credential.clone(), placeholder)
            })
            .collect();
        RunCredentials { held }
    }

    /// The run's environment entries: each credential's placeholder in the
    /// variable its operator named.
    pub fn env(&self) -> Vec<(String, String)> {
        self.held
            .iter()
            .filter_map(|(credential, placeholder)| {
                Some((credential.env.clone()?, placeholder.clone()))
            })
            .collect()
    }

    /// Whether the run holds no credential.
    pub fn is_empty(&self) -> bool {
        self.held.is_empty()
    }

    /// The credentials whose placeholders `text` carries.
    pub fn named_in<'a>(
        &'a self,
        text: &'a str,
    ) -> impl Iterator<Item = (&'a Credential, &'a str)> {
        (self.held.iter())
            .filter(move |(_, placeholder)| text.contains(placeholder.as_str()))
            .map(|(credential, placeholder)| (credential.as_ref(), placeholder.as_str()))
    }

    /// The credential named `name`.
    pub fn named(&self, name: &str) -> Option<&Credential> {
        (self.held.iter())
            .map(|(credential, _)| credential.as_ref())
            .find(|credential| credential.name == name)
    }

    /// `text` with every placeholder whose credential is bound to
    /// `host:port` replaced by its value, and the names of the credentials
    /// it carried (none: `text` as it is); the name of a credential whose
    /// placeholder it carries and which is not bound there, as an error.
    pub fn substituted<'a>(
        &'a self,
        text: &'a str,
        (host, port): (&str, u16),
    ) -> Result<(String, Vec<&'a str>), String> {
        let mut out = text.to_owned();
        let mut names = vec![];
        for (credential, placeholder) in self.named_in(text) {
            if !credential.bound_to(host, port) {
                return Err(credential.name.clone());
            }
            out = out.replace(placeholder, credential.value.expose());
            names.push(credential.name.as_str());
        }
        Ok((out, names))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn credential(name: &str, host: &str, env: Option<&str>) -> Arc<Credential> {
        Arc::new(Credential {
            name: name.into(),
            value: Secret::new(format!("{name}-s3cret")),
            hosts: vec![Endpoint::at(host, 443)],
            env: env.map(str::to_owned),
            source_var: None,
            header: "authorization".into(),
            format: "Bearer {}".into(),
        })
    }

    #[test]
    fn a_placeholder_is_replaced_only_for_a_host_its_credential_is_bound_to() {
        let run = RunCredentials::issue(&[
            credential("gh", "api.github.com", Some("GITHUB_TOKEN")),
            credential("npm", "registry.npmjs.org", None),
        ]);
        let env = run.env();
        assert_eq!(env.len(), 1, "only a credential with a variable has one");
        let (name, placeholder) = &env[0];
        assert_eq!(name, "GITHUB_TOKEN");
        assert!(
            placeholder.starts_with("cordon-credential-gh-"),
            "{placeholder}"
        );
        assert!(!placeholder.contains("s3cret"));
        let header = format!("token {placeholder}");
        assert_eq!(
            run.substituted(&header, ("API.github.com", 443)).unwrap(),
            ("token gh-s3cret".to_owned(), vec!["gh"])
        );
        assert_eq!(
            run.substituted(&header, ("evil.test", 443)),
            Err("gh".into())
        );
        assert_eq!(
            run.substituted(&header, ("api.github.com", 80)),
            Err("gh".into())
        );
        assert_eq!(
            run.substituted("nothing", ("evil.test", 443)).unwrap(),
            ("nothing".to_owned(), vec![])
        );
        assert_eq!(run.named("npm").unwrap().attached(), "Bearer npm-s3cret");
        let other = RunCredentials::issue(&[credential("gh", "api.github.com", Some("T"))]);
        assert_ne!(
            other.env()[0].1,
            *placeholder,
            "each run its own placeholder"
        );
        assert!(!format!("{run:?}").contains("s3cret"), "{run:?}");
    }
}
