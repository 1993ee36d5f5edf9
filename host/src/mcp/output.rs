//! How much of a command's output a model reads in one tool result: its
//! head and its tail, around one line saying how much was cut.
//!
//! Why a cap of cordon's own: agents cut large tool results themselves —
//! Codex from the middle, Claude Code to a short preview — so a result
//! past their cut loses its end, where the exit line, the error and the
//! sandbox markers are. A result cordon keeps under every agent's cut
//! arrives whole: the start (what the command began with) and most of the
//! end (what it failed with), one note between.

use std::io::Read;
use std::path::Path;

use crate::model::StreamOutput;

/// Bytes of output one tool result carries by default (both streams): under
/// the cut of the agents cordon is tested in (Codex cuts past 10 KiB or
/// 256 lines).
pub const DEFAULT_OUTPUT_BYTES: usize = 8 << 10;

/// The fewest bytes an operator may set (the markers and a few lines).
pub const MIN_OUTPUT_BYTES: usize = 1 << 10;

/// Lines one tool result carries at most (head and tail together).
pub const MAX_OUTPUT_LINES: usize = 200;

/// `text` — the last bytes of a stream of `total` bytes, all of it when
/// the lengths agree — cut to `budget` bytes and the line bound: a quarter
/// for the head (`start`, the stream's first bytes, when `text` is only
/// its tail), the rest for the tail, and a note of what was cut between.
pub fn head_and_tail(text: &str, start: Option<&str>, total: u64, budget: usize) -> String {
    let whole = total == text.len() as u64;
    if whole && text.len() <= budget && text.lines().count() <= MAX_OUTPUT_LINES {
        return text.to_owned();
    }
    let head_budget = budget / 4;
    let head_source = if whole { text } else { start.unwrap_or("") };
    let head = head_of(head_source, head_budget, MAX_OUTPUT_LINES / 4);
    let tail = tail_of(
        text,
        budget - head_budget,
        MAX_OUTPUT_LINES - MAX_OUTPUT_LINES / 4,
    );
    let cut = total.saturating_sub((head.len() + tail.len()) as u64);
    let mut out = String::with_capacity(budget + 128);
    out.push_str(head);
    if !head.is_empty() && !head.ends_with('\n') {
        out.push('\n');
    }
    out.push_str(&format!(
        "[… {cut} bytes of output cut here: the first and the last parts are shown …]\n"
    ));
    out.push_str(tail);
    out
}

/// One stream of a finished run, cut for a model: its first bytes come
/// from its spill file when memory kept only the tail.
pub fn stream(stream: &StreamOutput, budget: usize) -> String {
    let (start, total) = match (&stream.spill_path, stream.truncated) {
        (Some(path), true) => spilled_start(path, budget / 4),
        _ => (None, stream.text.len() as u64),
    };
    let total = total.max(stream.text.len() as u64);
    head_and_tail(&stream.text, start.as_deref(), total, budget)
}

/// The first `bytes` of a spill file, as text, and the file's size.
fn spilled_start(path: &Path, bytes: usize) -> (Option<String>, u64) {
    let Ok(file) = std::fs::File::open(path) else {
        return (None, 0);
    };
    let size = file.metadata().map(|m| m.len()).unwrap_or(0);
    let mut head = Vec::with_capacity(bytes);
    if file.take(bytes as u64).read_to_end(&mut head).is_err() {
        return (None, size);
    }
    (Some(String::from_utf8_lossy(&head).into_owned()), size)
}

/// At most `bytes` and `lines` from the start of `text`, ending at a line's
/// end where one is in reach.
fn head_of(text: &str, bytes: usize, lines: usize) -> &str {
    let mut end = floor_char(text, bytes.min(text.len()));
    if let Some((at, _)) = text[..end].match_indices('\n').nth(lines.saturating_sub(1)) {
        end = at + 1;
    } else if end < text.len()
        && let Some(at) = text[..end].rfind('\n')
    {
        end = at + 1;
    }
    &text[..end]
}

/// At most `bytes` and `lines` from the end of `text`, starting at a line's
/// start where one is in reach.
fn tail_of(text: &str, bytes: usize, lines: usize) -> &str {
    let mut start = ceil_char(text, text.len().saturating_sub(bytes));
    let body = text[start..].strip_suffix('\n').unwrap_or(&text[start..]);
    if let Some((at, _)) = body.rmatch_indices('\n').nth(lines.saturating_sub(1)) {
        start += at + 1;
    } else if start > 0
        && let Some(at) = text[start..].find('\n')
        && start + at + 1 < text.len()
    {
        start += at + 1;
    }
    &text[start..]
}

fn floor_char(text: &str, mut at: usize) -> usize {
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    at
}

fn ceil_char(text: &str, mut at: usize) -> usize {
    while !text.is_char_boundary(at) {
        at += 1;
    }
    at
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_that_fits_is_whole() {
        let text = "a\nb\n";
        assert_eq!(head_and_tail(text, None, 4, 1024), text);
    }

    #[test]
    fn a_long_output_keeps_its_start_and_its_end() {
        let text: String = (0..5000).map(|i| format!("line {i}\n")).collect();
        let shown = head_and_tail(&text, None, text.len() as u64, 8 << 10);
        assert!(shown.len() <= (8 << 10) + 128, "{}", shown.len());
        assert!(shown.starts_with("line 0\nline 1\n"));
        assert!(shown.ends_with("line 4999\n"));
        assert!(shown.lines().count() <= MAX_OUTPUT_LINES + 1);
        assert!(shown.contains("bytes of output cut here"));
    }

    #[test]
    fn many_short_lines_are_cut_by_lines() {
        let text: String = (0..1000).map(|i| format!("{i}\n")).collect();
        let shown = head_and_tail(&text, None, text.len() as u64, 1 << 20);
        assert!(shown.lines().count() <= MAX_OUTPUT_LINES + 1, "{shown}");
        assert!(shown.starts_with("0\n1\n"));
        assert!(shown.ends_with("998\n999\n"));
    }

    #[test]
    fn a_tail_only_stream_takes_its_head_from_the_start_given() {
        let shown = head_and_tail("…end\n", Some("start\n"), 1 << 20, 1024);
        assert!(shown.starts_with("start\n[… "), "{shown}");
        assert!(shown.ends_with("…end\n"), "{shown}");
        let without = head_and_tail("…end\n", None, 1 << 20, 1024);
        assert!(without.starts_with("[… "), "{without}");
    }

    #[test]
    fn cuts_never_split_a_character() {
        let text = "é".repeat(10_000);
        let shown = head_and_tail(&text, None, text.len() as u64, 1001);
        assert!(shown.contains("cut here"));
    }
}
