//! A run's network grant, read the way the host reads it: whether a
//! connection to `host:port` is one the grant names. The host's proxy asks
//! the component (`connect`) for every connection of an allow-list run;
//! the default answer is this one.

use crate::{Endpoint, Network};

/// Whether `endpoint` covers `host:port`: the same host (ASCII case
/// ignored), or any subdomain for a `*.domain` pattern; any port when it
/// names none.
pub fn covers(endpoint: &Endpoint, host: &str, port: u16) -> bool {
    if endpoint.port.is_some_and(|p| p != port) {
        return false;
    }
    let (pattern, host) = (
        endpoint.host.to_ascii_lowercase(),
        host.to_ascii_lowercase(),
    );
    match pattern.strip_prefix("*.") {
        Some(domain) => host
            .strip_suffix(domain)
            .is_some_and(|rest| rest.ends_with('.') && rest.len() > 1),
        None => pattern == host,
    }
}

/// Whether `network` allows a connection to `host:port`.
pub fn allows(network: &Network, host: &str, port: u16) -> bool {
    match network {
        Network::None => false,
        Network::Full => true,
        Network::Allow(endpoints) => endpoints.iter().any(|e| covers(e, host, port)),
    }
}

/// [`allows`], with the reason a refused connection is given.
pub fn decide(network: &Network, host: &str, port: u16) -> Result<(), String> {
    match allows(network, host, port) {
        true => Ok(()),
        false => Err(format!("{host}:{port} is not in this run's network grant")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn endpoint(host: &str, port: Option<u16>) -> Endpoint {
        Endpoint {
            host: host.into(),
            port,
        }
    }

    #[test]
    fn an_allow_list_covers_its_hosts_subdomains_and_ports_only() {
        let list = Network::Allow(vec![
            endpoint("github.com", Some(22)),
            endpoint("*.npmjs.org", Some(443)),
            endpoint("example.com", None),
        ]);
        assert!(allows(&list, "GitHub.com", 22));
        assert!(!allows(&list, "github.com", 443));
        assert!(allows(&list, "registry.npmjs.org", 443));
        assert!(
            !allows(&list, "npmjs.org", 443),
            "the pattern names subdomains"
        );
        assert!(!allows(&list, "evilnpmjs.org", 443));
        assert!(allows(&list, "example.com", 8080));
        assert!(!allows(&Network::None, "example.com", 80));
        assert!(allows(&Network::Full, "anything", 1));
        assert_eq!(
            decide(&list, "evil.com", 80),
            Err("evil.com:80 is not in this run's network grant".into())
        );
    }
}
