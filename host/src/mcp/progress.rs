//! Progress of a long foreground call: MCP `notifications/progress` with
//! the seconds so far and the last bit of output, for clients that gave a
//! progress token (and cut tool calls that stay silent too long).

use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use rmcp::model::{ProgressNotificationParam, ProgressToken};
use rmcp::{Peer, RoleServer};

use crate::process::{OutputSink, Stream};

/// How often a running call reports.
pub const EVERY: Duration = Duration::from_secs(2);

/// Bytes of the latest output a progress message carries.
const RECENT_BYTES: usize = 160;

/// The latest output of a run, kept for progress messages.
#[derive(Debug, Default)]
pub struct Recent(Mutex<VecDeque<u8>>);

impl OutputSink for Recent {
    fn write(&self, _stream: Stream, bytes: &[u8]) {
        let mut recent = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let bytes = &bytes[bytes.len().saturating_sub(RECENT_BYTES)..];
        let over = (recent.len() + bytes.len()).saturating_sub(RECENT_BYTES);
        let over = over.min(recent.len());
        recent.drain(..over);
        recent.extend(bytes);
    }
}

impl Recent {
    /// The last line (or part of one) printed, inert.
    fn last_line(&self) -> String {
        let recent = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let (a, b) = recent.as_slices();
        let text = String::from_utf8_lossy(&[a, b].concat()).into_owned();
        let line = text
            .trim_end()
            .rsplit('\n')
            .next()
            .unwrap_or_default()
            .to_owned();
        crate::text::inert(&line).into_owned()
    }
}

/// Tells one client how a call is going.
pub struct Reporter {
    peer: Peer<RoleServer>,
    token: ProgressToken,
    started: Instant,
}

impl Reporter {
    /// A reporter for the call that gave `token`.
    pub fn new(peer: Peer<RoleServer>, token: ProgressToken) -> Reporter {
        Reporter {
            peer,
            token,
            started: Instant::now(),
        }
    }

    /// Send one notification: seconds so far, and the latest output.
    pub async fn report(&self, recent: &Recent) {
        let seconds = self.started.elapsed().as_secs_f64().floor();
        let line = recent.last_line();
        let message = match line.is_empty() {
            true => format!("running for {seconds} s"),
            false => format!("running for {seconds} s; last output: {line}"),
        };
        let param =
            ProgressNotificationParam::new(self.token.clone(), seconds).with_message(message);
        // A client gone meanwhile is the call's cancellation's business.
        let _ = self.peer.notify_progress(param).await;
    }
}
