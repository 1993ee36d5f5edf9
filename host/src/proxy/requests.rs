//! A request decision: what the component is shown of one HTTP request,
//! and how its verdict is applied.
//!
//! The proxy asks for every request it can read — plain HTTP, and every
//! request inside an inspected connection — once the host's bounds and the
//! component's `connect` allowed its target ([`super::admit`]). The
//! component sees the method, target, path, query and headers, never a
//! credential's value ([`crate::model::WITHHELD`]); it answers allow, deny with a reason,
//! or allow with edits. An edit the host will not make (a header that
//! frames or routes the message, a value that is not a header value, a
//! credential no operator bound to the host) refuses the request rather
//! than send it half-edited. Every decision is recorded for the run's facts
//! and the audit log — no query, no header values.

use std::sync::Mutex;

use hyper::Request;
use hyper::header::{HeaderMap, HeaderName, HeaderValue};

use crate::model::{DecidedRequest, HeaderEdit, HttpRequest, RequestVerdict, shown_header_value};

use super::{Gate, Recorded, locked, note};
use crate::credentials::RunCredentials;
use crate::text::reason as bounded_text;

/// The most edits of one request the facts list.
const MAX_LISTED_EDITS: usize = 16;

/// Headers no edit may touch: they frame the message or name where it goes
/// (the host checked `host` against the decided target).
const FIXED_HEADERS: &[&str] = &[
    "host",
    "content-length",
    "transfer-encoding",
    "connection",
    "upgrade",
    "te",
    "trailer",
];

/// The decided target of a request and how it is reached.
pub(super) struct Target<'a> {
    /// `http`, or `https` inside an inspected connection.
    pub scheme: &'static str,
    /// The host, as the command named it.
    pub host: &'a str,
    /// The port.
    pub port: u16,
}

/// Ask the component about `request` (when its world decides requests),
/// put the run's credentials in it (where it carries a placeholder or the
/// verdict attaches one), and record the decision: the request to send, or
/// the reason it is refused (recorded among the refusals too) with the
/// request, whose body the caller may still read off the client. A request
/// neither asked about nor carrying a placeholder goes as it is, unrecorded.
pub(super) async fn decide<B>(
    mut request: Request<B>,
    target: &Target<'_>,
    (gate, record): (&Gate, &Mutex<Recorded>),
) -> Result<Request<B>, (String, Request<B>)> {
    let held = gate.credentials.as_deref();
    let carries = held.is_some_and(|held| carries_placeholder(&request, held));
    if gate.decide_request.is_none() && !carries {
        return Ok(request);
    }
    let shown = shown(&request, target);
    let mut decided = DecidedRequest {
        method: shown.method.clone(),
        scheme: shown.scheme.clone(),
        host: shown.host.clone(),
        port: shown.port,
        path: shown.path.clone(),
        allowed: true,
        asked: false,
        reason: None,
        edits: vec![],
    };
    let verdict = match gate.decide_request.clone() {
        None => RequestVerdict::Allow,
        Some(ask) => tokio::task::spawn_blocking(move || ask(&shown))
            .await
            .unwrap_or_else(|_| RequestVerdict::Deny("the request decision failed".into())),
    };
    let mut edit = |edits: Vec<HeaderEdit>, decided: &mut DecidedRequest| {
        // What the component named is its text: bounded like its reasons.
        let listed = edits.iter().take(MAX_LISTED_EDITS);
        decided.edits = listed.map(|edit| bounded_text(&edit.to_string())).collect();
        edited(&mut request, &edits, (held, target)).map_err(|reason| bounded_text(&reason))
    };
    let outcome = match verdict {
        RequestVerdict::Allow => Ok(()),
        RequestVerdict::Deny(reason) => Err(reason),
        RequestVerdict::Edit(edits) => edit(edits, &mut decided),
        RequestVerdict::Ask { reason, edits } => {
            decided.asked = true;
            let approval = decided.approval();
            let answer = match gate.approved_requests.contains(&approval) {
                true => Some(true),
                false => answer_of_approver(gate, record, approval, &reason).await,
            };
            match answer {
                Some(true) => edit(edits, &mut decided),
                Some(false) => Err(format!("no person approved it ({reason})")),
                None => Err(awaits_approval(&reason, &decided)),
            }
        }
    };
    let outcome = outcome.and_then(|()| match held {
        Some(held) => with_credentials(&mut request, held, target, &mut decided.edits),
        None => Ok(()),
    });
    if let Err(reason) = &outcome {
        decided.allowed = false;
        decided.reason = Some(reason.clone());
        let said = format!("{} {}: {reason}", decided.method, decided.path);
        note(record, target.host, target.port, &said);
    }
    locked(record).decided(decided);
    match outcome {
        Ok(()) => Ok(request),
        Err(reason) => Err((reason, request)),
    }
}

/// Whether the run's approver approves `request` (none: the run has no
/// one to ask), asked once per run: a request it answered before gets that
/// answer again.
async fn answer_of_approver(
    gate: &Gate,
    record: &Mutex<Recorded>,
    request: crate::model::ApprovedRequest,
    reason: &str,
) -> Option<bool> {
    let approver = gate.approver.as_ref()?;
    let before = locked(record).answered.get(&request).copied();
    if let Some(answer) = before {
        return Some(answer);
    }
    let asked = crate::model::AskedRequest {
        request: request.clone(),
        reason: reason.to_owned(),
    };
    let answer = approver.ask(asked).await;
    locked(record).answered.insert(request, answer);
    Some(answer)
}

/// Why an asked request is refused when the run has no one to ask: the
/// component's reason and the approval that would send it.
fn awaits_approval(reason: &str, decided: &DecidedRequest) -> String {
    format!(
        "it waits for a person's approval ({reason}): {} is sent only in a run approved for it",
        decided.approval()
    )
}

/// Whether `request`'s target or a header carries one of the run's
/// placeholders.
fn carries_placeholder<B>(request: &Request<B>, held: &RunCredentials) -> bool {
    let uri = request.uri().to_string();
    let mut texts = std::iter::once(uri.as_str()).chain(
        request
            .headers()
            .values()
            .filter_map(|value| value.to_str().ok()),
    );
    texts.any(|text| held.named_in(text).next().is_some())
}

/// Replace in `request` every placeholder it carries (in its target or a
/// header) by its credential's value — each credential bound to
/// the target, else the request is refused naming it. Each replaced
/// credential is listed in `edits` by name.
fn with_credentials<B>(
    request: &mut Request<B>,
    held: &RunCredentials,
    target: &Target<'_>,
    edits: &mut Vec<String>,
) -> Result<(), String> {
    let at = (target.host, target.port);
    let refused = |name: String| {
        format!(
            "it carries the placeholder of the credential {name}, which the operator did not \
             bind to {}:{}",
            target.host, target.port
        )
    };
    // `text` filled in, when it carries a placeholder; each credential used
    // is listed once.
    let mut fill = |text: &str| -> Result<Option<String>, String> {
        let (filled, names) = held.substituted(text, at).map_err(refused)?;
        for name in &names {
            let listed = format!("credential {name}");
            if !edits.contains(&listed) {
                edits.push(listed);
            }
        }
        Ok((!names.is_empty()).then_some(filled))
    };
    if let Some(filled) = fill(&request.uri().to_string())? {
        *request.uri_mut() = filled
            .parse()
            .map_err(|_| "the credential's value does not fit in a URL".to_owned())?;
    }
    for value in request.headers_mut().values_mut() {
        let Ok(text) = value.to_str() else { continue };
        let Some(filled) = fill(text)? else { continue };
        let mut filled = HeaderValue::from_str(&filled)
            .map_err(|_| "the credential's value does not fit in a header".to_owned())?;
        filled.set_sensitive(true);
        *value = filled;
    }
    Ok(())
}

/// What the component is shown of `request`.
fn shown<B>(request: &Request<B>, target: &Target<'_>) -> HttpRequest {
    let uri = request.uri();
    HttpRequest {
        method: request.method().as_str().to_owned(),
        scheme: target.scheme.to_owned(),
        host: target.host.to_ascii_lowercase(),
        port: target.port,
        path: match uri.path() {
            "" => "/".to_owned(),
            path => path.to_owned(),
        },
        query: uri.query().map(str::to_owned),
        headers: shown_headers(request.headers()),
    }
}

/// The headers in order, a credential's value withheld.
fn shown_headers(headers: &HeaderMap) -> Vec<(String, String)> {
    headers
        .iter()
        .map(|(name, value)| {
            let shown = shown_header_value(name.as_str(), value.as_bytes());
            (name.as_str().to_owned(), shown)
        })
        .collect()
}

/// Apply `edits` to `request` in order, or say why the host will not send
/// it so. A credential is attached only when the run holds it and it is
/// bound to the target.
fn edited<B>(
    request: &mut Request<B>,
    edits: &[HeaderEdit],
    (held, target): (Option<&RunCredentials>, &Target<'_>),
) -> Result<(), String> {
    let headers = request.headers_mut();
    for edit in edits {
        match edit {
            HeaderEdit::Set(name, value) => {
                let name = editable(name)?;
                let value = HeaderValue::from_str(value)
                    .map_err(|_| format!("the policy set {name} to a value no header may carry"))?;
                headers.insert(name, value);
            }
            HeaderEdit::Remove(name) => {
                headers.remove(editable(name)?);
            }
            HeaderEdit::AttachCredential(name) => {
                let credential = held.and_then(|held| held.named(name));
                let Some(credential) = credential.filter(|c| c.bound_to(target.host, target.port))
                else {
                    return Err(format!(
                        "the policy attached the credential {name:?}, which the operator \
                         did not declare or bind to {}:{}",
                        target.host, target.port
                    ));
                };
                let header = HeaderName::from_bytes(credential.header.as_bytes())
                    .map_err(|_| format!("the credential {name}'s header is not a header name"))?;
                let mut value = HeaderValue::from_str(&credential.attached())
                    .map_err(|_| format!("the credential {name} does not fit in a header"))?;
                value.set_sensitive(true);
                headers.insert(header, value);
            }
        }
    }
    Ok(())
}

/// `name` as a header an edit may set or remove.
fn editable(name: &str) -> Result<HeaderName, String> {
    let parsed = HeaderName::from_bytes(name.as_bytes())
        .map_err(|_| format!("the policy edited {name:?}, which is not a header name"))?;
    if FIXED_HEADERS.contains(&parsed.as_str()) {
        return Err(format!(
            "the policy edited {parsed}, which frames or routes the request; no edit may"
        ));
    }
    Ok(parsed)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request() -> Request<()> {
        Request::builder()
            .method("POST")
            .uri("http://api.test:8080/repos/x/pulls?token=abc")
            .header("Host", "api.test:8080")
            .header("Authorization", "Bearer s3cret")
            .header("Cookie", "id=s3cret")
            .header("X-Trace", "1")
            .body(())
            .unwrap()
    }

    #[test]
    fn the_component_sees_the_request_but_never_a_credentials_value() {
        let target = Target {
            scheme: "http",
            host: "API.test",
            port: 8080,
        };
        let shown = shown(&request(), &target);
        assert_eq!(shown.method, "POST");
        assert_eq!(shown.host, "api.test");
        assert_eq!(shown.path, "/repos/x/pulls");
        assert_eq!(shown.query.as_deref(), Some("token=abc"));
        let text = format!("{:?}", shown.headers);
        assert!(!text.contains("s3cret"), "{text}");
        assert!(
            shown
                .headers
                .contains(&("authorization".into(), crate::model::WITHHELD.into()))
        );
        assert!(shown.headers.contains(&("x-trace".into(), "1".into())));
    }

    fn held() -> RunCredentials {
        let credential = |name: &str, host: &str| {
            std::sync::Arc::new(crate::credentials::Credential {
                name: name.into(),
                value: crate::credentials::Secret::new(format!("{name}-value")),
                hosts: vec![crate::model::Endpoint::at(host, 8080)],
                env: Some(name.to_ascii_uppercase()),
                source_var: None,
                header: "x-api-key".into(),
                format: "key={}".into(),
            })
        };
        RunCredentials::issue(&[
            credential("api", "api.test"),
            credential("other", "other.test"),
        ])
    }

    #[test]
    fn a_placeholder_becomes_the_value_only_for_a_bound_target_and_an_attached_one_likewise() {
        let held = held();
        let placeholder = |name: &str| {
            let env = held.env();
            env.into_iter().find(|(var, _)| var == name).unwrap().1
        };
        let api = Target {
            scheme: "http",
            host: "api.test",
            port: 8080,
        };
        let carrying = Request::builder()
            .uri(format!("http://api.test:8080/x?key={}", placeholder("API")))
            .header("Authorization", format!("Bearer {}", placeholder("API")))
            .body(())
            .unwrap();
        assert!(carries_placeholder(&carrying, &held));
        let mut edits = vec![];
        let mut sent = carrying;
        with_credentials(&mut sent, &held, &api, &mut edits).unwrap();
        assert_eq!(sent.headers()["authorization"], "Bearer api-value");
        assert!(sent.headers()["authorization"].is_sensitive());
        assert_eq!(sent.uri().query(), Some("key=api-value"));
        assert_eq!(edits, ["credential api"]);
        // Another credential's placeholder to this target: refused.
        let elsewhere = Request::builder()
            .uri("http://api.test:8080/")
            .header("x-token", placeholder("OTHER"))
            .body(())
            .unwrap();
        let err = with_credentials(&mut { elsewhere }, &held, &api, &mut vec![]).unwrap_err();
        assert!(
            err.contains("credential other, which the operator did not bind to api.test:8080"),
            "{err}"
        );
        // Attached by the policy: only where bound.
        let attach = [HeaderEdit::AttachCredential("api".into())];
        let plain = || Request::builder().uri("/").body(()).unwrap();
        let mut sent = plain();
        edited(&mut sent, &attach, (Some(&held), &api)).unwrap();
        assert_eq!(sent.headers()["x-api-key"], "key=api-value");
        let other = Target {
            host: "other.test",
            ..api
        };
        let err = edited(&mut plain(), &attach, (Some(&held), &other)).unwrap_err();
        assert!(
            err.contains("did not declare or bind to other.test:8080"),
            "{err}"
        );
        assert!(edited(&mut plain(), &attach, (None, &api)).is_err());
    }

    #[test]
    fn edits_apply_in_order_and_one_the_host_will_not_make_refuses_the_request() {
        let edits = [
            HeaderEdit::Set("x-added".into(), "yes".into()),
            HeaderEdit::Remove("cookie".into()),
            HeaderEdit::Set("X-Trace".into(), "2".into()),
        ];
        let target = Target {
            scheme: "http",
            host: "api.test",
            port: 8080,
        };
        let mut sent = request();
        edited(&mut sent, &edits, (None, &target)).unwrap();
        assert_eq!(sent.headers()["x-added"], "yes");
        assert_eq!(sent.headers()["x-trace"], "2");
        assert!(!sent.headers().contains_key("cookie"));
        for (edit, why) in [
            (
                HeaderEdit::Set("Host".into(), "evil.test".into()),
                "frames or routes",
            ),
            (
                HeaderEdit::Remove("content-length".into()),
                "frames or routes",
            ),
            (
                HeaderEdit::Set("x".into(), "a\nb".into()),
                "no header may carry",
            ),
            (
                HeaderEdit::Set("bad name".into(), "v".into()),
                "not a header name",
            ),
            (
                HeaderEdit::AttachCredential("gh".into()),
                "did not declare or bind",
            ),
        ] {
            let edits = std::slice::from_ref(&edit);
            let err = edited(&mut request(), edits, (None, &target)).unwrap_err();
            assert!(err.contains(why), "{edit:?}: {err}");
        }
        assert_eq!(
            HeaderEdit::Set("x-a".into(), "secret".into()).to_string(),
            "set x-a",
            "a recorded edit names the header, never its value"
        );
    }
}
