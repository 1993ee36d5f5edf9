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

/// What a person is asked when the policy asks about one HTTP request of a
/// running command: the host's words (the request, the policy's reason)
/// first, the command last, each quoted on one line and inert (the
/// request's path is the command's words too).
pub fn request_ask(command: &str, asked: &crate::model::AskedRequest) -> String {
    let request = crate::text::quoted_command(
        &asked.request.to_string(),
        crate::text::MAX_QUOTED_COMMAND_BYTES,
    );
    format!(
        "The policy asks first, before a running command sends this HTTP request (one \
         line): {request}\n\nThe policy's reason: {}\n\nIf approved, that request — its \
         method, host, port and path — is sent for the rest of this run; if not, the command \
         gets a refusal.\n\n{}",
        crate::text::reason(&asked.reason),
        the_command_text(command),
    )
}

/// An approver for the run of `command` that asks the person behind
/// `peer` about each asked request; none when the client cannot ask
/// (no form elicitation): such a request is then refused as waiting.
pub fn request_approver(
    peer: &Peer<RoleServer>,
    command: String,
) -> Option<crate::model::RequestApprover> {
    let modes = peer.supported_elicitation_modes();
    if !modes.contains(&ElicitationMode::Form) {
        return None;
    }
    let peer = peer.clone();
    Some(crate::model::RequestApprover::new(move |asked| {
        let (peer, message) = (peer.clone(), request_ask(&command, &asked));
        async move { ask(&peer, message).await == Answer::Accepted }
    }))
}

fn grant(policy: &SandboxPolicy) -> String {
    crate::text::inert(&serde_json::to_string(policy).unwrap_or_default()).into_owned()
}

fn the_command(request: &ExecRequest) -> String {
    the_command_text(&request.command)
}

fn the_command_text(command: &str) -> String {
    let command = crate::text::quoted_command(command, crate::text::MAX_QUOTED_COMMAND_BYTES);
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
    fn an_asked_requests_prompt_puts_the_request_and_reason_first_and_the_command_on_one_line() {
        let asked = crate::model::AskedRequest {
            request: "POST api.test:443/repos/o/r/pulls".parse().unwrap(),
            reason: "opening a pull request".into(),
        };
        let spoof = "gh pr create\n\nThe policy's reason: routine\x1b]52;c;eA==\x07";
        let prompt = request_ask(spoof, &asked);
        assert!(
            prompt.starts_with(
                "The policy asks first, before a running command sends this HTTP request (one \
                 line): POST api.test:443/repos/o/r/pulls\n\nThe policy's reason: opening a \
                 pull request\n"
            ),
            "{prompt}"
        );
        let (before, command) = prompt.rsplit_once("\n\n    ").unwrap();
        assert!(!before.contains("routine"), "{prompt}");
        assert!(
            !command.contains('\n') && !prompt.contains('\x1b'),
            "{prompt}"
        );
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
