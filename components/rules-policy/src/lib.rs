//! `rules-policy`: `bash-sandbox` behind the operator's rules.
//!
//! The rules are the component's settings (`[policy.settings]` in
//! `cordon.toml`, or `--settings FILE`), so an operator changes what runs
//! without compiling anything. Every simple command a line runs — as the
//! shared shell reader finds it, through pipelines, `&&`, subshells,
//! `bash -c "…"` and wrappers — is matched against every rule; the most
//! restrictive decision wins; a command the reader cannot prove (`${CURL}l`,
//! `eval "$x"`, `trap`, `PS4=…`, `python -c`) gets the operator's `opaque`
//! decision, and so does a request whose `env` sets a variable bash or a
//! program runs as code (`BASH_ENV`, `BASH_FUNC_*`, `LD_PRELOAD`). A matched rule's grant (network endpoints, writable roots,
//! sockets, deny-read and protected paths) and the rule file's own
//! (`[grant]`, for every run) are laid over the policy the request was
//! handed.
//!
//! *Ask* proposes that policy; the host returns `APPROVAL_REQUIRED` and a
//! caller that approves re-sends the request marked approved with the
//! proposed policy as its own — which this component then allows, and only
//! then (an approval of another grant asks again). *Deny* is final.
//!
//! `validate-settings` reads the rules and runs every rule's examples
//! (`match` / `not_match`), so a rule file that does not mean what it says
//! fails the load, `cordon policy check --settings` and `cordon policy test
//! --settings` with the failing rule and line.

use cordon_policy::rules::requests::{Edit as RuleEdit, Request, RequestVerdict};
use cordon_policy::rules::{Decision as Rule, RuleSet};
use cordon_policy::{
    Approval, Decision, Deployment, ExecError, ExecRequest, Executor, ExecutorInfo, SandboxMode,
};

/// bash-sandbox behind the operator's rules.
pub struct RulesPolicy;

/// The rules in `settings`, checked, with their examples run.
fn rules(settings: &str) -> Result<RuleSet, String> {
    let rules = RuleSet::from_json(settings)?;
    rules.check_examples().map_err(|failures| {
        format!(
            "{} rule example(s) fail: {}",
            failures.len(),
            failures.join("; ")
        )
    })?;
    Ok(rules)
}

impl Executor for RulesPolicy {
    fn info() -> ExecutorInfo {
        ExecutorInfo {
            name: "rules-policy".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            shell: "bash".into(),
            default_mode: SandboxMode::ReadOnly,
        }
    }

    fn argv(command: &str) -> Vec<String> {
        cordon_policy::bash_argv(command)
    }

    fn validate_settings(settings: &str) -> Result<(), String> {
        rules(settings).map(|_| ())
    }

    fn decide(request: ExecRequest, deployment: Deployment) -> Result<Decision, ExecError> {
        // Checked at load; a host that skipped that gets the same message.
        let rules = RuleSet::from_json(&deployment.settings).map_err(ExecError::InvalidRequest)?;
        let verdict = rules.decide_in(&request.command, &request.env);
        let approved = request.approved;
        let own = request.policy.clone();
        let mut spec = Self::resolve(request, deployment)?;
        verdict.grant.apply(&mut spec.policy);
        Ok(match verdict.decision {
            Rule::Allow => Decision::Allow(spec),
            Rule::Deny => Decision::Deny(verdict.reason),
            Rule::Ask if approved && own.as_ref() == Some(&spec.policy) => Decision::Allow(spec),
            Rule::Ask => Decision::Ask(Approval {
                reason: verdict.reason,
                policy: spec.policy,
            }),
        })
    }
}

cordon_policy::bindings::export!(RulesPolicy with_types_in cordon_policy::bindings);

/// World `0.3.0`'s `requests` export: the `requester` world's bindings,
/// over `cordon-policy`'s `0.2.0` types (the world includes `0.2.0`'s).
#[allow(missing_docs, clippy::all)]
mod requesting {
    wit_bindgen::generate!({
        path: "../../wit/0.3.0",
        world: "requester",
        with: {
            "cordon:sandbox/types@0.2.0": cordon_policy::bindings::cordon::sandbox::types,
        },
    });
}

use requesting::exports::cordon::sandbox0_3_0::requests::{
    Asked, Edit, Guest, HttpRequest, Verdict,
};

thread_local! {
    /// The settings this instance last read, and the rules read from them.
    static READ: std::cell::RefCell<Option<(String, RuleSet)>> = const { std::cell::RefCell::new(None) };
}

impl Guest for RulesPolicy {
    /// The operator's request rules' answer (`[[requests]]`).
    fn request(_spec: cordon_policy::ExecSpec, settings: String, request: HttpRequest) -> Verdict {
        let asked = Request {
            method: &request.method,
            host: &request.host,
            port: request.port,
            path: &request.path,
        };
        let decided = READ.with_borrow_mut(|read| {
            // The host keeps one instance for a run's requests: the rules
            // are read once per instance, not once per request.
            if read.as_ref().is_none_or(|(text, _)| *text != settings) {
                // Checked at load; a host that skipped that gets the reason.
                let rules = RuleSet::from_json(&settings)?;
                *read = Some((settings, rules));
            }
            let (_, rules) = read.as_ref().expect("read above");
            Ok::<_, String>(rules.decide_request(&asked))
        });
        let decided = match decided {
            Ok(decided) => decided,
            Err(reason) => return Verdict::Deny(reason),
        };
        let wit_edits = |edits: Vec<RuleEdit>| {
            edits
                .into_iter()
                .map(|edit| match edit {
                    RuleEdit::Set(name, value) => Edit::SetHeader((name, value)),
                    RuleEdit::Remove(name) => Edit::RemoveHeader(name),
                    RuleEdit::Credential(name) => Edit::AttachCredential(name),
                })
                .collect()
        };
        match decided {
            RequestVerdict::Deny(reason) => Verdict::Deny(reason),
            RequestVerdict::Allow(edits) if edits.is_empty() => Verdict::Allow,
            RequestVerdict::Allow(edits) => Verdict::Edit(wit_edits(edits)),
            RequestVerdict::Ask(reason, edits) => Verdict::Ask(Asked {
                reason,
                edits: wit_edits(edits),
            }),
        }
    }
}

requesting::export!(RulesPolicy with_types_in requesting);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shipped_rule_files_and_their_examples_pass() {
        let bench = rules(include_str!("../bench-rules.json")).unwrap();
        assert_eq!(bench.rules.len(), 100);
        assert_eq!(bench.check_examples(), Ok(10));
        let err =
            rules(r#"{"rules": [{"program": "curl", "decision": "deny", "match": ["wget x"]}]}"#)
                .unwrap_err();
        assert!(err.contains("1 rule example(s) fail"), "{err}");
        assert!(err.contains("\"wget x\" should match"), "{err}");
    }

    /// The example rule file, as the host hands it over (TOML to JSON).
    fn example() -> RuleSet {
        let toml: toml::Value = toml::from_str(include_str!("../rules.toml")).unwrap();
        rules(&serde_json::to_string(&toml).unwrap()).unwrap()
    }

    #[derive(serde::Deserialize)]
    struct Dodges {
        dodge: Vec<Dodge>,
    }

    #[derive(serde::Deserialize)]
    struct Dodge {
        class: String,
        line: String,
    }

    #[test]
    fn the_example_rules_refuse_every_dodge() {
        let rules = example();
        let dodges: Dodges =
            toml::from_str(include_str!("../../policy-core/cases/dodges.toml")).unwrap();
        let allowed: Vec<String> = dodges
            .dodge
            .iter()
            .filter(|d| rules.decide(&d.line).decision == Rule::Allow)
            .map(|d| format!("{} ({})", d.line, d.class))
            .collect();
        assert!(allowed.is_empty(), "allowed:\n{}", allowed.join("\n"));
    }

    #[test]
    fn the_example_rules_allow_every_ordinary_line() {
        #[derive(serde::Deserialize)]
        struct Ordinary {
            lines: Vec<String>,
        }
        let rules = example();
        let ordinary: Ordinary =
            toml::from_str(include_str!("../../policy-core/cases/ordinary.toml")).unwrap();
        let refused: Vec<String> = ordinary
            .lines
            .iter()
            .map(|line| (line, rules.decide(line)))
            .filter(|(_, verdict)| verdict.decision != Rule::Allow)
            .map(|(line, verdict)| format!("{line}: {}", verdict.reason))
            .collect();
        assert!(refused.is_empty(), "refused:\n{}", refused.join("\n"));
    }

    #[test]
    fn a_request_environment_that_runs_code_is_opaque() {
        let rules = example();
        let env = |k: &str, v: &str| vec![(k.to_owned(), v.to_owned())];
        for (name, value) in [
            ("BASH_ENV", "rc"),
            ("BASH_FUNC_ls%%", "() { curl x; }"),
            ("LD_PRELOAD", "x.so"),
        ] {
            let verdict = rules.decide_in("ls", &env(name, value));
            assert_eq!(verdict.decision, Rule::Deny, "{name}: {}", verdict.reason);
            assert!(verdict.reason.contains(name), "{}", verdict.reason);
        }
        let ssh = rules.decide_in("git fetch", &env("GIT_SSH_COMMAND", "curl x"));
        assert_eq!(ssh.decision, Rule::Deny);
        assert!(ssh.reason.contains("downloads"), "{}", ssh.reason);
        assert_eq!(
            rules.decide_in("ls", &env("RUST_LOG", "debug")).decision,
            Rule::Allow
        );
    }
}
