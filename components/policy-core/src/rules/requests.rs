//! Rules over a run's HTTP requests: what `rules-policy` answers to the
//! host's `request` call (world `0.3.0`) for every request its proxy can
//! read (plain HTTP, and HTTPS to an endpoint the grant marks `inspect`).
//!
//! A rule names requests as `METHOD host/path`: methods joined by `|` (or
//! `*` for any), a host as an allow-list endpoint names one (`*.npmjs.org`,
//! `api.github.com:443`), and a path whose `*` segment is any one segment
//! and whose final `*` is anything below (`/repos/*/pulls`, `/*`). The
//! query is not matched. Every rule a request matches counts: any *deny*
//! refuses it with that rule's reason; otherwise any *ask* makes it wait
//! for a person's approval (sent, once approved, like an allowed one);
//! the matching rules' edits (headers set or removed, a credential
//! attached) are made, in rule order. A request no rule matches gets the
//! operator's `requestDefault` (`allow`, `deny` or `ask`).
//!
//! ```toml
//! request_default = "deny"
//! [[requests]]
//! request = "GET|HEAD registry.npmjs.org/*"
//! decision = "allow"
//! match = ["GET registry.npmjs.org/left-pad"]
//! [[requests]]
//! request = "POST api.github.com/repos/*/pulls"
//! decision = "ask"
//! reason = "opening a pull request"
//! credential = "github"
//! ```

use std::collections::BTreeMap;

use serde::{Deserialize, Deserializer};

use super::Decision;

/// Requests named as `METHOD host/path`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RequestPattern {
    /// The methods, upper case; empty: any.
    methods: Vec<String>,
    /// The host and port, as an allow-list endpoint.
    endpoint: crate::Endpoint,
    /// The path's segments (`*`: any one; a final `*`: anything below).
    path: Vec<String>,
    /// As written, for messages.
    text: String,
}

impl RequestPattern {
    /// Read `METHOD host/path`.
    pub fn parse(text: &str) -> Result<Self, String> {
        let shape =
            || format!("{text:?} is not METHOD host/path (e.g. \"GET registry.npmjs.org/*\")");
        let (methods, target) = text.trim().split_once(' ').ok_or_else(shape)?;
        let (host, path) = match target.trim().split_once('/') {
            Some((host, path)) => (host, path),
            None => (target.trim(), "*"),
        };
        let methods = match methods {
            "*" => vec![],
            methods => methods.split('|').map(str::to_ascii_uppercase).collect(),
        };
        if methods
            .iter()
            .any(|m| m.is_empty() || !m.bytes().all(|b| b.is_ascii_alphabetic()))
        {
            return Err(shape());
        }
        let endpoint = super::endpoint(host)?;
        Ok(RequestPattern {
            methods,
            endpoint,
            path: path.split('/').map(str::to_owned).collect(),
            text: text.trim().to_owned(),
        })
    }

    /// Whether `request` is one this names.
    pub fn matches(&self, request: &Request<'_>) -> bool {
        let method = self.methods.is_empty()
            || self
                .methods
                .iter()
                .any(|m| m.eq_ignore_ascii_case(request.method));
        method
            && crate::network::covers(&self.endpoint, request.host, request.port)
            && path_matches(&self.path, request.path)
    }
}

impl<'de> Deserialize<'de> for RequestPattern {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        RequestPattern::parse(&text).map_err(serde::de::Error::custom)
    }
}

/// Whether `path` (from its leading `/`) has the pattern's segments.
fn path_matches(pattern: &[String], path: &str) -> bool {
    let path = path.strip_prefix('/').unwrap_or(path);
    let mut segments = path.split('/');
    for (at, wanted) in pattern.iter().enumerate() {
        if wanted == "*" && at + 1 == pattern.len() {
            return true;
        }
        match segments.next() {
            Some(segment) if wanted == "*" || wanted == segment => {}
            _ => return false,
        }
    }
    segments.next().is_none()
}

/// One request as the rules read it.
#[derive(Clone, Copy, Debug)]
pub struct Request<'a> {
    /// The method.
    pub method: &'a str,
    /// The host, lower case.
    pub host: &'a str,
    /// The port.
    pub port: u16,
    /// The path, from `/`, without the query.
    pub path: &'a str,
}

/// One rule over requests.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RequestRule {
    /// The requests it names: `METHOD host/path`.
    pub request: RequestPattern,
    /// `allow`, `deny`, or `ask`: sent only once a person approved it
    /// (the run's facts name each such request; how a person approves is
    /// the embedding's).
    pub decision: Decision,
    /// Why, for a denial or an ask (shown to whoever approves).
    #[serde(default)]
    pub reason: Option<String>,
    /// Headers to set on an allowed request (name to value).
    #[serde(default, alias = "set_headers")]
    pub set_headers: BTreeMap<String, String>,
    /// Headers to remove from an allowed request.
    #[serde(default, alias = "remove_headers")]
    pub remove_headers: Vec<String>,
    /// The operator's credential (by name) to attach to an allowed request.
    #[serde(default)]
    pub credential: Option<String>,
    /// Requests (`METHOD host[:port]/path`) this rule must match.
    #[serde(default, alias = "match")]
    pub matches: Vec<String>,
    /// Requests this rule must not match.
    #[serde(default, alias = "not_match", alias = "not_matches")]
    pub not_matches: Vec<String>,
}

/// A change to an allowed request, as a rule asks for it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Edit {
    /// Set a header.
    Set(String, String),
    /// Remove a header.
    Remove(String),
    /// Attach a credential.
    Credential(String),
}

/// The rules' answer for one request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RequestVerdict {
    /// Send it, with these edits (none: as it is).
    Allow(Vec<Edit>),
    /// Refuse it, for this reason.
    Deny(String),
    /// Send it, with these edits, only once a person approved it; the
    /// reason is shown to them.
    Ask(String, Vec<Edit>),
}

impl RequestRule {
    /// Its edits, in order: headers set, headers removed, the credential.
    fn edits(&self) -> impl Iterator<Item = Edit> + '_ {
        let set =
            (self.set_headers.iter()).map(|(name, value)| Edit::Set(name.clone(), value.clone()));
        let removed = self.remove_headers.iter().cloned().map(Edit::Remove);
        set.chain(removed)
            .chain(self.credential.clone().map(Edit::Credential))
    }

    /// What is wrong with it, if anything: a denying rule's edits would
    /// never be made.
    pub(super) fn check(&self) -> Result<(), String> {
        if self.decision == Decision::Deny && self.edits().next().is_some() {
            return Err(format!(
                "{}: a deny rule sends nothing, so its headers and credential would never be \
                 used; move them to the allow or ask rule for these requests",
                self.request.text
            ));
        }
        Ok(())
    }
}

/// The decision for `request` under `rules`, with `default` for a request
/// no rule names: any matching *deny* refuses it; otherwise any matching
/// *ask* makes it wait for a person; either way every matching rule's edits
/// are made (once sent), in rule order.
pub fn decide(rules: &[RequestRule], default: Decision, request: &Request<'_>) -> RequestVerdict {
    let matching: Vec<&RequestRule> = rules
        .iter()
        .filter(|r| r.request.matches(request))
        .collect();
    let said = |rule: &RequestRule, does: &str| {
        rule.reason
            .clone()
            .unwrap_or_else(|| format!("the rule {:?} {does} this request", rule.request.text))
    };
    if let Some(denying) = matching.iter().find(|r| r.decision == Decision::Deny) {
        return RequestVerdict::Deny(said(denying, "refuses"));
    }
    let named = || format!("{} {}{}", request.method, request.host, request.path);
    let asked = match matching.iter().find(|r| r.decision == Decision::Ask) {
        Some(asking) => Some(said(asking, "asks a person about")),
        None if !matching.is_empty() => None,
        None => match default {
            Decision::Allow => None,
            Decision::Deny => {
                return RequestVerdict::Deny(format!("no request rule allows {}", named()));
            }
            Decision::Ask => Some(format!(
                "no request rule names {}: the operator's default asks a person",
                named()
            )),
        },
    };
    let edits = matching.iter().flat_map(|r| r.edits()).collect();
    match asked {
        Some(reason) => RequestVerdict::Ask(reason, edits),
        None => RequestVerdict::Allow(edits),
    }
}

/// Run every rule's examples: the failures, each naming its rule.
pub fn check_examples(rules: &[RequestRule]) -> (usize, Vec<String>) {
    let (mut checked, mut failures) = (0, vec![]);
    for (at, rule) in rules.iter().enumerate() {
        let examples = (rule.matches.iter().map(|e| (e, true)))
            .chain(rule.not_matches.iter().map(|e| (e, false)));
        for (example, wanted) in examples {
            checked += 1;
            let matched = match example_request(example) {
                Ok(parsed) => rule.request.matches(&parsed.as_request()),
                Err(err) => {
                    failures.push(format!("requests[{at}]: {err}"));
                    continue;
                }
            };
            if matched != wanted {
                let what = match wanted {
                    true => "should match but does not",
                    false => "matches but should not",
                };
                failures.push(format!(
                    "requests[{at}] ({}): {example:?} {what}",
                    rule.request.text
                ));
            }
        }
    }
    (checked, failures)
}

/// An example request, `METHOD host[:port]/path` (port 443 when absent).
struct Example {
    method: String,
    host: String,
    port: u16,
    path: String,
}

impl Example {
    fn as_request(&self) -> Request<'_> {
        Request {
            method: &self.method,
            host: &self.host,
            port: self.port,
            path: &self.path,
        }
    }
}

/// Read an example.
fn example_request(text: &str) -> Result<Example, String> {
    let shape = || format!("the example {text:?} is not METHOD host[:port]/path");
    let (method, target) = text.trim().split_once(' ').ok_or_else(shape)?;
    let (authority, path) = match target.split_once('/') {
        Some((authority, path)) => (authority, format!("/{path}")),
        None => (target, "/".to_owned()),
    };
    let (host, port) = match authority.rsplit_once(':') {
        Some((host, port)) => (host, port.parse().map_err(|_| shape())?),
        None => (authority, 443),
    };
    Ok(Example {
        method: method.to_owned(),
        host: host.to_ascii_lowercase(),
        port,
        path,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(request: &str, decision: Decision) -> RequestRule {
        RequestRule {
            request: RequestPattern::parse(request).unwrap(),
            decision,
            reason: None,
            set_headers: BTreeMap::new(),
            remove_headers: vec![],
            credential: None,
            matches: vec![],
            not_matches: vec![],
        }
    }

    fn request<'a>(method: &'a str, host: &'a str, path: &'a str) -> Request<'a> {
        Request {
            method,
            host,
            port: 443,
            path,
        }
    }

    #[test]
    fn a_pattern_names_methods_a_host_and_path_segments() {
        let npm = RequestPattern::parse("GET|head *.npmjs.org/*").unwrap();
        assert!(npm.matches(&request("GET", "registry.npmjs.org", "/left-pad")));
        assert!(npm.matches(&request("HEAD", "registry.npmjs.org", "/@s/p/-/p-1.tgz")));
        assert!(npm.matches(&request("GET", "registry.npmjs.org", "/")));
        assert!(!npm.matches(&request("POST", "registry.npmjs.org", "/x")));
        assert!(!npm.matches(&request("GET", "npmjs.org.evil", "/x")));
        let pulls = RequestPattern::parse("POST api.github.com:443/repos/*/pulls").unwrap();
        assert!(pulls.matches(&request("POST", "api.github.com", "/repos/cordon/pulls")));
        assert!(!pulls.matches(&request("POST", "api.github.com", "/repos/a/b/pulls")));
        assert!(!pulls.matches(&request("POST", "api.github.com", "/repos/cordon/pulls/1")));
        let any = RequestPattern::parse("* example.com").unwrap();
        assert!(any.matches(&request("DELETE", "example.com", "/a/b")));
        for bad in [
            "registry.npmjs.org/*",
            "G3T x.org/",
            "GET /path",
            "GET a b:c/",
        ] {
            assert!(RequestPattern::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_deny_wins_and_allowed_requests_carry_every_matching_rules_edits() {
        let mut get = rule("GET api.test/*", Decision::Allow);
        get.set_headers.insert("x-trace".into(), "1".into());
        let mut token = rule("* api.test/*", Decision::Allow);
        token.credential = Some("api".into());
        let mut post = rule("POST api.test/admin/*", Decision::Deny);
        post.reason = Some("no admin writes".into());
        let rules = [get, token, post];
        assert_eq!(
            decide(&rules, Decision::Deny, &request("GET", "api.test", "/a")),
            RequestVerdict::Allow(vec![
                Edit::Set("x-trace".into(), "1".into()),
                Edit::Credential("api".into()),
            ])
        );
        assert_eq!(
            decide(
                &rules,
                Decision::Allow,
                &request("POST", "api.test", "/admin/x")
            ),
            RequestVerdict::Deny("no admin writes".into())
        );
        assert_eq!(
            decide(&rules, Decision::Deny, &request("GET", "other.test", "/")),
            RequestVerdict::Deny("no request rule allows GET other.test/".into())
        );
        assert_eq!(
            decide(&rules, Decision::Allow, &request("GET", "other.test", "/")),
            RequestVerdict::Allow(vec![])
        );
    }

    #[test]
    fn an_ask_waits_for_a_person_with_the_edits_a_deny_still_wins_and_a_default_may_ask() {
        let mut pulls = rule("POST api.github.com/repos/*/pulls", Decision::Ask);
        pulls.reason = Some("opening a pull request".into());
        let mut token = rule("* api.github.com/*", Decision::Allow);
        token.credential = Some("github".into());
        let mut locked = rule("POST api.github.com/repos/locked/pulls", Decision::Deny);
        locked.reason = Some("that repository is frozen".into());
        let rules = [pulls, token, locked];
        let post = |path| request("POST", "api.github.com", path);
        assert_eq!(
            decide(&rules, Decision::Deny, &post("/repos/cordon/pulls")),
            RequestVerdict::Ask(
                "opening a pull request".into(),
                vec![Edit::Credential("github".into())]
            )
        );
        assert_eq!(
            decide(&rules, Decision::Deny, &post("/repos/locked/pulls")),
            RequestVerdict::Deny("that repository is frozen".into())
        );
        assert_eq!(
            decide(&rules, Decision::Deny, &post("/repos/cordon/issues")),
            RequestVerdict::Allow(vec![Edit::Credential("github".into())])
        );
        let asked = decide(&rules, Decision::Ask, &request("GET", "other.test", "/x"));
        assert_eq!(
            asked,
            RequestVerdict::Ask(
                "no request rule names GET other.test/x: the operator's default asks a person"
                    .into(),
                vec![]
            )
        );
    }

    #[test]
    fn examples_are_checked_and_a_deny_with_edits_is_refused() {
        let mut npm = rule("GET registry.npmjs.org/*", Decision::Allow);
        npm.matches = vec!["GET registry.npmjs.org/left-pad".into()];
        npm.not_matches = vec!["POST registry.npmjs.org/x".into(), "GET npmjs.org/x".into()];
        assert_eq!(check_examples(&[npm.clone()]), (3, vec![]));
        npm.not_matches.push("GET registry.npmjs.org/y".into());
        let (_, failures) = check_examples(&[npm]);
        assert_eq!(
            failures,
            [
                "requests[0] (GET registry.npmjs.org/*): \"GET registry.npmjs.org/y\" matches but should not"
            ]
        );
        assert!(rule("POST x.test/", Decision::Ask).check().is_ok());
        let mut denying = rule("POST x.test/", Decision::Deny);
        denying.credential = Some("x".into());
        let err = denying.check().unwrap_err();
        assert!(err.contains("would never be used"), "{err}");
    }
}
