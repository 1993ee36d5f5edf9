//! `rules-policy`: `bash-sandbox` behind the operator's prefix rules.
//!
//! The rules are the component's settings (`[policy.settings]` in
//! `cordon.toml`, or `--settings FILE`), so an operator changes what runs
//! without compiling anything. Every simple command a line runs — as the
//! shared shell reader finds it, through pipelines, `&&`, subshells,
//! `bash -c "…"` and wrappers — is matched against every rule; the most
//! restrictive decision wins; a command whose program is only known at run
//! time (`${CURL}l`, `eval`, `source`) gets the operator's `opaque`
//! decision. A matched rule's grant (network endpoints, writable roots,
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
        let verdict = rules.decide(&request.command);
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
}
