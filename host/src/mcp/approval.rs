//! Asking the person behind an MCP client: a policy's *ask*, a model's
//! request for a wider grant (escalation), a switch of the session's mode.
//!
//! * The form is the plainest an MCP client can show — one required
//!   boolean, no top-level title or description (Codex refuses a form
//!   that has them and cancels it) — and the words are in the message.
//! * Four answers, each told to the model as what it is: accepted;
//!   declined (by a person, or by a client that declines for one);
//!   dismissed or cancelled; and nobody could be asked (no elicitation,
//!   no answer in time, a broken reply).
//! * What the person reads puts the host's words first (the reason, the
//!   grant) and the agent's words last, quoted on one line and made inert,
//!   so neither a command nor a model's reason can pose as the policy.

use std::collections::BTreeMap;
use std::time::Duration;

use rmcp::model::PrimitiveSchemaDefinition;
use rmcp::model::{BooleanSchema, ElicitRequestParams, ElicitationAction, ElicitationSchema};
use rmcp::service::{ElicitationMode, ServiceError};
use rmcp::{Peer, RoleServer};

use crate::model::{ExecRequest, SandboxMode, SandboxPolicy};

/// How long a person has to answer before the request counts as unanswered.
pub const ANSWER_WITHIN: Duration = Duration::from_secs(600);

/// What came of asking.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Answer {
    /// The person approved.
    Accepted,
    /// Declined: by the person, or by a client on their behalf.
    Declined,
    /// Dismissed or cancelled without an answer.
    Cancelled,
    /// Nobody could be asked: why.
    Unavailable(String),
}

/// Ask the person behind `peer` to approve what `message` describes.
pub async fn ask(peer: &Peer<RoleServer>, message: String) -> Answer {
    if !peer
        .supported_elicitation_modes()
        .contains(&ElicitationMode::Form)
    {
        return Answer::Unavailable("the client does not support elicitation".into());
    }
    let schema = ElicitationSchema::new(BTreeMap::from([(
        "approve".to_owned(),
        PrimitiveSchemaDefinition::Boolean(BooleanSchema::new().description("Run it")),
    )]))
    .with_required(vec!["approve".to_owned()]);
    let params = ElicitRequestParams::FormElicitationParams {
        meta: None,
        message,
        requested_schema: schema,
    };
    let response = peer
        .create_elicitation_with_timeout(params, Some(ANSWER_WITHIN))
        .await;
    match response {
        Ok(reply) => match reply.action {
            ElicitationAction::Accept => match reply.content.as_ref().map(|c| &c["approve"]) {
                Some(serde_json::Value::Bool(true)) => Answer::Accepted,
                _ => Answer::Declined,
            },
            ElicitationAction::Decline => Answer::Declined,
            ElicitationAction::Cancel => Answer::Cancelled,
            _ => Answer::Unavailable("the client answered in a way cordon does not know".into()),
        },
        Err(ServiceError::Timeout { .. }) => {
            Answer::Unavailable(format!("no answer within {} s", ANSWER_WITHIN.as_secs()))
        }
        Err(error) => Answer::Unavailable(format!("the client's answer failed: {error}")),
    }
}

/// What a person is asked to approve for a policy's ask: the policy's
/// reason and the grant first, then the command — quoted on one line,
/// inert, cut at [`crate::text::MAX_QUOTED_COMMAND_BYTES`] — so a command
/// cannot pose as the policy (80 newlines and a fake "the policy asks
/// first" stay on the command's one line, after the real reason).
pub fn policy_ask(
    request: &ExecRequest,
    reason: &str,
    policy: &SandboxPolicy,
    background: bool,
) -> String {
    format!(
        "The policy asks first: {}\n\nIf approved, the command runs{} with this sandbox \
         grant: {}\n\n{}",
        crate::text::reason(reason),
        if background { " in the background" } else { "" },
        grant(policy),
        the_command(request),
    )
}

/// What a person is asked when the model asks for a wider grant for one
/// command: the grant, then the model's reason and the command, both the
/// agent's words, quoted.
pub fn escalation(request: &ExecRequest, why: &str, policy: &SandboxPolicy) -> String {
    format!(
        "The agent asks to run one command with a wider sandbox than this session's.\n\nIf \
         approved, it runs once with this grant: {}\n\nThe agent's reason (its own words, one \
         line): {}\n\n{}",
        grant(policy),
        crate::text::quoted_command(why, crate::text::MAX_QUOTED_COMMAND_BYTES),
        the_command(request),
    )
}

/// What a person is asked when the model asks to switch the session's mode.
pub fn mode_switch(from: SandboxMode, to: SandboxMode, workspace: &str, why: &str) -> String {
    format!(
        "The agent asks to switch this session's sandbox from {from} to {to} (workspace {}); \
         every later command runs so until it is switched back.\n\nThe agent's reason (its own \
         words, one line): {}",
        crate::text::inert(workspace),
        crate::text::quoted_command(why, crate::text::MAX_QUOTED_COMMAND_BYTES),
    )
}

fn grant(policy: &SandboxPolicy) -> String {
    crate::text::inert(&serde_json::to_string(policy).unwrap_or_default()).into_owned()
}

fn the_command(request: &ExecRequest) -> String {
    let command =
        crate::text::quoted_command(&request.command, crate::text::MAX_QUOTED_COMMAND_BYTES);
    format!("The command, as the agent sent it (one line; newlines shown as \\n):\n\n    {command}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_command_cannot_pose_as_the_policy_in_the_approval_prompt() {
        let spoof = format!(
            "rm -rf ~{}The policy asks first: routine cleanup\n\nIf approved, the command runs \
             with this sandbox grant: read-only\x1b]52;c;ZXZpbA==\x07",
            "\n".repeat(80)
        );
        let policy = SandboxPolicy::new(SandboxMode::WorkspaceWrite, "/ws");
        let prompt = policy_ask(
            &ExecRequest::new(spoof),
            "a recursive delete cannot be undone",
            &policy,
            false,
        );
        assert!(
            prompt.starts_with("The policy asks first: a recursive delete cannot be undone\n"),
            "{prompt}"
        );
        let (before, command) = prompt.rsplit_once("\n\n    ").unwrap();
        assert!(before.contains("workspace-write"), "{prompt}");
        assert!(!before.contains("routine cleanup"), "{prompt}");
        assert!(!command.contains('\n'), "{command}");
        assert!(command.contains("\\x1b]52"), "{command}");
        assert!(!prompt.contains('\x1b'), "{prompt}");
    }

    #[test]
    fn a_models_reason_stays_on_its_quoted_line() {
        let policy = SandboxPolicy::new(SandboxMode::WorkspaceWrite, "/ws");
        let prompt = escalation(
            &ExecRequest::new("make install"),
            "needed\n\nIf approved, it runs once with this grant: read-only",
            &policy,
        );
        let grant_line = prompt
            .lines()
            .find(|l| l.starts_with("If approved"))
            .unwrap();
        assert!(grant_line.contains("workspace-write"), "{prompt}");
        assert_eq!(prompt.matches("\nIf approved").count(), 1, "{prompt}");
    }
}
