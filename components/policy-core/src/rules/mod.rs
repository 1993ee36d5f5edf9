//! Rules over what a command line runs: the decision logic of a
//! settings-driven policy (`rules-policy`), as data an operator writes.
//!
//! A rule names a program (or several, or a glob) and what its words must
//! be — an argument prefix, flags in any order and spelling, a regular
//! expression ([`pattern`]) — and says *allow*, *ask* or *deny*. Every simple command the line runs ([`crate::shell`]) is
//! matched against every rule; the most restrictive decision of the
//! matching rules wins for that command, the operator's `default` applies
//! to a command no rule matches, an *opaque* command (one whose program or
//! script is built at run time) gets the operator's `opaque` decision, and
//! a line that does not parse gets `unparsable`. The line's decision is the
//! most restrictive of its commands'. So `curl`, `${CURL}l`, `c\url` and
//! `bash -c "curl …"` cannot be told apart in a rule's favour: the first
//! three are read as `curl` or opaque, the last is read into.
//!
//! ```json
//! {
//!   "default": "allow", "opaque": "ask", "unparsable": "deny",
//!   "rules": [
//!     {"program": "curl", "decision": "deny", "reason": "no downloads; vendor the file",
//!      "matches": ["curl x", "${CURL}l x"], "notMatches": ["echo curl"]},
//!     {"program": "git", "args": ["push"], "decision": "ask", "reason": "pushing leaves the machine"}
//!   ]
//! }
//! ```
//!
//! Each rule may carry examples (`matches`, `notMatches`) that
//! [`RuleSet::check_examples`] runs, as Codex's rules do: a rule file
//! proves what it means before it is deployed.

use serde::Deserialize;

use crate::shell::{self, Command, Word};

mod pattern;
pub mod requests;

pub use pattern::{Pattern, Programs};
pub use requests::RequestRule;

/// What a rule (or the operator's fallback) says about a command.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Decision {
    /// Run it.
    Allow,
    /// Ask a person first.
    Ask,
    /// Refuse it.
    Deny,
}

/// One rule: a program, and what its words must be.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Rule {
    /// The program, or a list of them: a bare name matches it anywhere
    /// on the path (`curl` matches `/usr/bin/curl`); a path matches only
    /// itself; `*` in either is any text (`./scripts/*`).
    pub program: Programs,
    /// The arguments the command must start with (none: any).
    #[serde(default)]
    pub args: Vec<String>,
    /// Flags the command must carry after `args`, in any order and
    /// spelling: each entry one flag's spellings joined by `|`
    /// (`["-r|-R|--recursive", "-f|--force"]` matches `-rf`, `-r -f`,
    /// `-fr` and `--recursive --force`).
    #[serde(default)]
    pub flags: Vec<String>,
    /// A regular expression the arguments after `args`, joined by single
    /// spaces, must match (searched: anchor it with `^…$`).
    #[serde(default)]
    pub regex: Option<Pattern>,
    /// What it says.
    pub decision: Decision,
    /// Why, in words for the model and the person.
    #[serde(default)]
    pub reason: Option<String>,
    /// Lines this rule must match (`match` in a rule file too).
    #[serde(default, alias = "match")]
    pub matches: Vec<String>,
    /// Lines this rule must not match (`not_match` in a rule file too).
    #[serde(default, alias = "not_match", alias = "not_matches")]
    pub not_matches: Vec<String>,
    /// What the sandbox grants a command this rule matches.
    #[serde(default)]
    pub grant: Grant,
}

/// What a rule grants the commands it matches, on top of the policy the
/// request was handed (the host still checks it against the operator's
/// ceilings). The grants of every rule a line matches add up.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Grant {
    /// Endpoints (`host:port`, `*.domain:port`, `host` for any port): the
    /// run's network becomes the allow-list of every matched rule's.
    #[serde(default)]
    pub network: Vec<String>,
    /// More writable roots (absolute, or `~/…`).
    #[serde(default, alias = "writable_roots")]
    pub writable_roots: Vec<String>,
    /// Host sockets to expose (absolute, or `~/…`).
    #[serde(default)]
    pub sockets: Vec<String>,
    /// Paths to hide from the command (absolute, or `~/…`).
    #[serde(default, alias = "deny_read")]
    pub deny_read: Vec<String>,
    /// More paths to keep read-only inside the writable roots (relative:
    /// in each root).
    #[serde(default)]
    pub protected: Vec<String>,
}

impl Grant {
    /// Add `other`'s entries that `self` lacks.
    fn add(&mut self, other: &Grant) {
        for (mine, theirs) in [
            (&mut self.network, &other.network),
            (&mut self.writable_roots, &other.writable_roots),
            (&mut self.sockets, &other.sockets),
            (&mut self.deny_read, &other.deny_read),
            (&mut self.protected, &other.protected),
        ] {
            for entry in theirs {
                if !mine.contains(entry) {
                    mine.push(entry.clone());
                }
            }
        }
    }

    /// Whether it grants nothing.
    pub fn is_empty(&self) -> bool {
        self.network.is_empty()
            && self.writable_roots.is_empty()
            && self.sockets.is_empty()
            && self.deny_read.is_empty()
            && self.protected.is_empty()
    }

    /// Lay this grant over `policy`; applying it twice changes nothing, so
    /// a proposed policy that already carries it is recognised on re-send.
    pub fn apply(&self, policy: &mut crate::SandboxPolicy) {
        let add = |list: &mut Vec<String>, entries: &[String]| {
            for entry in entries {
                if !list.contains(entry) {
                    list.push(entry.clone());
                }
            }
        };
        add(&mut policy.writable_roots, &self.writable_roots);
        add(&mut policy.sockets, &self.sockets);
        add(&mut policy.deny_read, &self.deny_read);
        add(&mut policy.protected, &self.protected);
        if !self.network.is_empty() {
            let mut endpoints = match &policy.network {
                crate::Network::Allow(endpoints) => endpoints.clone(),
                crate::Network::None | crate::Network::Full => vec![],
            };
            for text in &self.network {
                let endpoint = endpoint(text).expect("checked when the rules were read");
                if !endpoints.contains(&endpoint) {
                    endpoints.push(endpoint);
                }
            }
            policy.network = crate::Network::Allow(endpoints);
        }
    }
}

/// Every entry of `grant` is one the host can take.
fn check_grant(grant: &Grant) -> Result<(), String> {
    for text in &grant.network {
        endpoint(text).map_err(|err| format!("network: {err}"))?;
    }
    let absolute = grant
        .writable_roots
        .iter()
        .chain(&grant.sockets)
        .chain(&grant.deny_read);
    for path in absolute {
        if !path.starts_with('/') && !path.starts_with("~/") {
            return Err(format!("{path:?} is not an absolute path (or ~/…)"));
        }
    }
    Ok(())
}

/// `host:port`, `host:*` or `host` as an endpoint.
pub fn endpoint(text: &str) -> Result<crate::Endpoint, String> {
    let (host, port) = match text.rsplit_once(':') {
        Some((host, "*")) => (host, None),
        Some((host, port)) => (
            host,
            Some(
                port.parse::<u16>()
                    .map_err(|_| format!("{text:?}: the port is not a number 0–65535 (or *)"))?,
            ),
        ),
        None => (text, None),
    };
    let bare = host.strip_prefix("*.").unwrap_or(host);
    if bare.is_empty() || bare.contains(['*', '/', ' ']) {
        return Err(format!(
            "{text:?} is not an endpoint; write host:port, *.domain:port or host"
        ));
    }
    Ok(crate::Endpoint {
        host: host.to_ascii_lowercase(),
        port,
    })
}

/// An operator's rules and fallbacks.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RuleSet {
    /// For a command no rule matches (default: allow).
    #[serde(default = "allow")]
    pub default: Decision,
    /// For a command whose program or script is built at run time
    /// (default: ask).
    #[serde(default = "ask")]
    pub opaque: Decision,
    /// For a line that does not parse (default: deny).
    #[serde(default = "deny")]
    pub unparsable: Decision,
    /// The rules, in any order (the most restrictive match wins).
    #[serde(default)]
    pub rules: Vec<Rule>,
    /// What every run gets, whatever matches (`deny_read = ["~/.ssh"]`).
    #[serde(default)]
    pub grant: Grant,
    /// Rules over a run's HTTP requests ([`requests`]).
    #[serde(default)]
    pub requests: Vec<RequestRule>,
    /// For a request no request rule names (default: allow — the
    /// connection's grant already bounds where it goes).
    #[serde(default = "allow", alias = "request_default")]
    pub request_default: Decision,
}

fn allow() -> Decision {
    Decision::Allow
}

fn ask() -> Decision {
    Decision::Ask
}

fn deny() -> Decision {
    Decision::Deny
}

/// The decision for a line, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verdict {
    /// Allow, ask or deny.
    pub decision: Decision,
    /// Why: the deciding rule's reason, or which fallback applied.
    pub reason: String,
    /// The index of the deciding rule, when a rule decided.
    pub rule: Option<usize>,
    /// What the matched rules grant, together.
    pub grant: Grant,
}

impl RuleSet {
    /// Read a rule set from its JSON settings, checking it: every rule
    /// names a program, and an argument prefix has no empty word.
    pub fn from_json(json: &str) -> Result<RuleSet, String> {
        let rules: RuleSet = serde_json::from_str(json).map_err(|err| format!("rules: {err}"))?;
        check_grant(&rules.grant).map_err(|err| format!("grant: {err}"))?;
        for (at, rule) in rules.rules.iter().enumerate() {
            if rule.program.0.is_empty() || rule.program.0.iter().any(|p| p.trim().is_empty()) {
                return Err(format!("rules[{at}].program is empty"));
            }
            if let Some(flag) = rule.flags.iter().find(|f| {
                f.split('|')
                    .any(|s| !s.trim().starts_with('-') || s.trim().len() < 2)
            }) {
                return Err(format!(
                    "rules[{at}].flags: {flag:?} is not a flag's spellings (write \"-r|--recursive\")"
                ));
            }
            if rule.args.iter().any(String::is_empty) {
                return Err(format!("rules[{at}].args has an empty word"));
            }
            check_grant(&rule.grant).map_err(|err| format!("rules[{at}].grant: {err}"))?;
        }
        for (at, rule) in rules.requests.iter().enumerate() {
            rule.check()
                .map_err(|err| format!("requests[{at}]: {err}"))?;
        }
        Ok(rules)
    }

    /// The decision for one HTTP request of a run.
    pub fn decide_request(&self, request: &requests::Request<'_>) -> requests::RequestVerdict {
        requests::decide(&self.requests, self.request_default, request)
    }

    /// The decision for `line`, with the grant of every rule it matches
    /// and the rule set's own.
    pub fn decide(&self, line: &str) -> Verdict {
        self.decide_in(line, &[])
    }

    /// The decision for `line` run with the environment entries `env`
    /// too: an entry bash or a program runs as code (`BASH_ENV`,
    /// `BASH_FUNC_*`, `LD_PRELOAD`, …) is opaque, one a program runs as a
    /// command line (`GIT_SSH_COMMAND`) is read as a script
    /// ([`shell::environment`]).
    pub fn decide_in(&self, line: &str, env: &[(String, String)]) -> Verdict {
        let mut verdict = self.decide_line(line, env);
        let mut grant = self.grant.clone();
        grant.add(&verdict.grant);
        verdict.grant = grant;
        verdict
    }

    fn decide_line(&self, line: &str, env: &[(String, String)]) -> Verdict {
        let commands = match shell::commands(line) {
            Ok(mut commands) => {
                let entries = env.iter().map(|(k, v)| (k.as_str(), v.as_str()));
                commands.splice(0..0, shell::environment(entries));
                commands
            }
            Err(err) => {
                return Verdict {
                    decision: self.unparsable,
                    reason: format!("{err} (the operator's decision for such lines)"),
                    rule: None,
                    grant: Grant::default(),
                };
            }
        };
        // The most restrictive command decides (a rule's reason before a
        // fallback's on a tie); a line with no command at all (`a=1`) is
        // the default's.
        let mut verdicts = commands.iter().map(|command| self.decide_command(command));
        let Some(mut verdict) = verdicts.next() else {
            return Verdict {
                decision: self.default,
                reason: "no rule matches (the operator's default)".into(),
                rule: None,
                grant: Grant::default(),
            };
        };
        for next in verdicts {
            let mut grant = std::mem::take(&mut verdict.grant);
            grant.add(&next.grant);
            if next.decision > verdict.decision
                || (next.decision == verdict.decision
                    && verdict.rule.is_none()
                    && next.rule.is_some())
            {
                verdict = next;
            }
            verdict.grant = grant;
        }
        verdict
    }

    fn decide_command(&self, command: &Command) -> Verdict {
        if let Some(why) = &command.opaque {
            return Verdict {
                decision: self.opaque,
                reason: format!(
                    "what this runs is only known at run time: {why} (the operator's decision)"
                ),
                rule: None,
                grant: Grant::default(),
            };
        }
        let mut verdict = Verdict {
            decision: self.default,
            reason: "no rule matches (the operator's default)".into(),
            rule: None,
            grant: Grant::default(),
        };
        let mut matched = false;
        let mut grant = Grant::default();
        for (at, rule) in self.rules.iter().enumerate() {
            if !rule.matches_command(command) {
                continue;
            }
            grant.add(&rule.grant);
            if !matched || rule.decision > verdict.decision {
                verdict = Verdict {
                    decision: rule.decision,
                    reason: rule
                        .reason
                        .clone()
                        .unwrap_or_else(|| format!("rule {at} ({})", rule.program.first())),
                    rule: Some(at),
                    grant: Grant::default(),
                };
                matched = true;
            }
        }
        verdict.grant = grant;
        verdict
    }

    /// Run every rule's examples: each of `matches` must be matched by its
    /// rule, none of `notMatches` may be. The failures, each naming the
    /// rule and the line.
    pub fn check_examples(&self) -> Result<usize, Vec<String>> {
        let mut failures = vec![];
        let mut checked = 0;
        for (at, rule) in self.rules.iter().enumerate() {
            for (line, wanted) in rule
                .matches
                .iter()
                .map(|l| (l, true))
                .chain(rule.not_matches.iter().map(|l| (l, false)))
            {
                checked += 1;
                let matched = match shell::commands(line) {
                    Ok(commands) => commands.iter().any(|c| rule.matches_command(c)),
                    Err(_) => false,
                };
                if matched != wanted {
                    failures.push(format!(
                        "rules[{at}] ({}): {line:?} {}",
                        rule.program.first(),
                        if wanted {
                            "should match but does not"
                        } else {
                            "matches but should not"
                        }
                    ));
                }
            }
        }
        let (requests, failed) = requests::check_examples(&self.requests);
        checked += requests;
        failures.extend(failed);
        if failures.is_empty() {
            Ok(checked)
        } else {
            Err(failures)
        }
    }
}

impl Rule {
    /// Whether this rule matches `command` — for an opaque command, only
    /// when its program is still known (a dynamic argument can never be
    /// proven to differ, so it matches a restrictive rule's prefix and
    /// not an allowing one's).
    pub fn matches_command(&self, command: &Command) -> bool {
        let Some(program) = command.program() else {
            return false;
        };
        if !self.program.names(program) {
            return false;
        }
        let restrictive = self.decision > Decision::Allow;
        let args = &command.argv[1.min(command.argv.len())..];
        let prefix = self
            .args
            .iter()
            .enumerate()
            .all(|(at, wanted)| match args.get(at) {
                Some(Word::Literal(arg)) => arg == wanted,
                Some(Word::Dynamic(_)) => restrictive,
                None => false,
            });
        let rest = args.get(self.args.len()..).unwrap_or(&[]);
        prefix
            && pattern::has_flags(&self.flags, rest, restrictive)
            && self
                .regex
                .as_ref()
                .is_none_or(|regex| regex.matches(rest, restrictive))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const RULES: &str = r#"{
        "default": "allow", "opaque": "ask",
        "rules": [
            {"program": "curl", "decision": "deny", "reason": "no downloads",
             "matches": ["curl x", "c\\url x", "bash -c \"curl y\"", "env A=1 curl z"],
             "notMatches": ["echo curl", "git status"]},
            {"program": "git", "args": ["push"], "decision": "ask", "reason": "pushing leaves the machine",
             "matches": ["git push origin main", "git push \"$REMOTE\""], "notMatches": ["git pull"]},
            {"program": "git", "decision": "allow"},
            {"program": "/usr/bin/rm", "decision": "deny"}
        ]
    }"#;

    fn rules() -> RuleSet {
        RuleSet::from_json(RULES).unwrap()
    }

    #[test]
    fn the_most_restrictive_decision_wins() {
        let rules = rules();
        assert_eq!(rules.decide("git status").decision, Decision::Allow);
        let push = rules.decide("git status && git push");
        assert_eq!(push.decision, Decision::Ask);
        assert_eq!(push.reason, "pushing leaves the machine");
        assert_eq!(push.rule, Some(1));
        let deny = rules.decide("git push; curl x");
        assert_eq!((deny.decision, deny.rule), (Decision::Deny, Some(0)));
        assert_eq!(rules.decide("ls -la").decision, Decision::Allow);
    }

    #[test]
    fn every_dodge_of_a_deny_is_refused_or_asked() {
        let rules = rules();
        for line in [
            "curl x",
            "c\\url x",
            "'cu'rl x",
            "bash -c \"curl x\"",
            "echo $(curl x)",
            "ls | xargs curl",
        ] {
            assert_eq!(rules.decide(line).decision, Decision::Deny, "{line}");
        }
        for line in [
            "${CURL}l x",
            "eval \"$x\"",
            "source f.sh",
            "x='a[$(curl x)]'; : $((x))",
        ] {
            let verdict = rules.decide(line);
            assert_eq!(
                verdict.decision,
                Decision::Ask,
                "{line}: the operator's opaque decision"
            );
            assert!(verdict.reason.contains("run time"), "{}", verdict.reason);
        }
        let broken = rules.decide("echo \"unterminated");
        assert_eq!(
            broken.decision,
            Decision::Deny,
            "unparsable defaults to deny"
        );
    }

    #[test]
    fn a_dynamic_argument_matches_a_restrictive_prefix_only() {
        let rules = rules();
        assert_eq!(rules.decide("git push \"$REMOTE\"").decision, Decision::Ask);
        let allow_log = RuleSet::from_json(
            r#"{"default": "deny", "rules": [{"program": "git", "args": ["log", "-1"], "decision": "allow"}]}"#,
        )
        .unwrap();
        assert_eq!(allow_log.decide("git log -1").decision, Decision::Allow);
        assert_eq!(allow_log.decide("git log \"$R\"").decision, Decision::Deny);
        // Where a dynamic argument may be an option that takes a command
        // (`--receive-pack=…`), the command is opaque: the operator decides.
        let push = allow_log.decide("git push \"$R\"");
        assert!(push.reason.contains("inline"), "{}", push.reason);
    }

    #[test]
    fn a_path_rule_matches_only_that_path_and_a_name_any_path() {
        let rules = rules();
        assert_eq!(rules.decide("/usr/bin/rm -rf x").decision, Decision::Deny);
        assert_eq!(rules.decide("rm -rf x").decision, Decision::Allow);
        assert_eq!(rules.decide("/opt/bin/curl x").decision, Decision::Deny);
    }

    #[test]
    fn examples_are_checked_and_failures_name_the_rule_and_line() {
        assert_eq!(rules().check_examples(), Ok(9));
        let wrong = RuleSet::from_json(
            r#"{"rules": [{"program": "curl", "decision": "deny", "matches": ["wget x"], "notMatches": ["curl y"]}]}"#,
        )
        .unwrap();
        let failures = wrong.check_examples().unwrap_err();
        assert_eq!(
            failures,
            [
                "rules[0] (curl): \"wget x\" should match but does not",
                "rules[0] (curl): \"curl y\" matches but should not",
            ]
        );
    }

    #[test]
    fn the_grants_of_every_matched_rule_add_up_and_apply_once() {
        let rules = RuleSet::from_json(
            r#"{"rules": [
                {"program": "git", "args": ["push"], "decision": "allow",
                 "grant": {"network": ["github.com:22"], "sockets": ["~/.ssh/agent.sock"]}},
                {"program": "npm", "decision": "ask",
                 "grant": {"network": ["*.npmjs.org:443"], "writableRoots": ["~/.npm"]}}
            ]}"#,
        )
        .unwrap();
        let verdict = rules.decide("git push && npm install");
        assert_eq!(verdict.decision, Decision::Ask);
        assert_eq!(verdict.grant.network, ["github.com:22", "*.npmjs.org:443"]);
        assert_eq!(verdict.grant.writable_roots, ["~/.npm"]);
        let mut policy = crate::sandbox_policy(crate::SandboxMode::WorkspaceWrite, "/ws");
        verdict.grant.apply(&mut policy);
        let once = policy.clone();
        verdict.grant.apply(&mut policy);
        assert_eq!(policy, once, "applying twice changes nothing");
        assert!(matches!(&policy.network, crate::Network::Allow(e) if e.len() == 2));
        assert!(rules.decide("ls").grant.is_empty());
        let everywhere = RuleSet::from_json(
            r#"{"grant": {"denyRead": ["~/.ssh"], "protected": ["secrets"]},
                "rules": [{"program": "aws", "decision": "allow", "grant": {"denyRead": ["~/.aws"]}}]}"#,
        )
        .unwrap();
        assert_eq!(everywhere.decide("ls").grant.deny_read, ["~/.ssh"]);
        assert_eq!(
            everywhere.decide("aws s3 ls").grant.deny_read,
            ["~/.ssh", "~/.aws"]
        );
        let mut policy = crate::sandbox_policy(crate::SandboxMode::ReadOnly, "/ws");
        everywhere.decide("ls").grant.apply(&mut policy);
        assert_eq!((policy.deny_read.len(), policy.protected.len()), (1, 1));
        assert!(RuleSet::from_json(r#"{"grant": {"denyRead": ["rel"]}}"#).is_err());
        for bad in [
            r#"{"rules": [{"program": "x", "decision": "allow", "grant": {"network": ["a:b"]}}]}"#,
            r#"{"rules": [{"program": "x", "decision": "allow", "grant": {"sockets": ["rel"]}}]}"#,
        ] {
            assert!(RuleSet::from_json(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn examples_may_be_written_match_and_not_match() {
        let rules = RuleSet::from_json(
            r#"{"rules": [{"program": "curl", "decision": "deny", "match": ["curl x"], "not_match": ["ls"]}]}"#,
        )
        .unwrap();
        assert_eq!(rules.check_examples(), Ok(2));
    }

    #[test]
    fn bad_rule_sets_are_refused_with_what_is_wrong() {
        for (json, says) in [
            (
                r#"{"rules": [{"program": " ", "decision": "deny"}]}"#,
                "rules[0].program is empty",
            ),
            (
                r#"{"rules": [{"program": "x", "args": [""], "decision": "deny"}]}"#,
                "empty word",
            ),
            (
                r#"{"rules": [{"program": "x", "decision": "maybe"}]}"#,
                "unknown variant",
            ),
            (
                r#"{"rules": [{"program": "x", "decision": "deny", "extra": 1}]}"#,
                "unknown field",
            ),
            (r#"{"default": "deny", "oops": true}"#, "unknown field"),
        ] {
            let err = RuleSet::from_json(json).unwrap_err();
            assert!(err.contains(says), "{json}: {err}");
        }
        let defaults = RuleSet::from_json("{}").unwrap();
        assert_eq!(
            (defaults.default, defaults.opaque, defaults.unparsable),
            (Decision::Allow, Decision::Ask, Decision::Deny)
        );
    }
}
