//! Text for a person's terminal or a model: bounded, and inert.
//!
//! What a policy component says (a deny or ask reason, its `render` text)
//! and what a command prints reach a terminal or a model through cordon.
//! Neither may steer them: an escape sequence could set the operator's
//! clipboard (OSC 52), forge a link (OSC 8), recolour or erase what is
//! shown; a Unicode direction override could reorder it; an 8 MiB reason
//! would flood the screen and the model's context. So every such text is
//!
//! * **inert** ([`inert`]): C0 controls other than newline and tab, DEL,
//!   C1 controls and the bidirectional overrides are shown escaped
//!   (`\x1b`, `\u{9b}`, `\u{202e}`) — visible, never acted on;
//! * **bounded** ([`bounded`]): at most a documented number of bytes, the
//!   cut said in the text ([`MAX_REASON_BYTES`] for a reason,
//!   [`MAX_RENDERED_BYTES`] for a component's `render` text);
//! * a command quoted inside cordon's own words ([`quoted_command`]) is one
//!   line: its newlines shown as `\n`, so it cannot pose as the paragraph
//!   that follows it.
//!
//! [`Neutraliser`] does the same to a byte stream (a command's output
//! streamed to a terminal), across chunk boundaries.

use std::borrow::Cow;

/// Bytes of a policy's deny or ask reason that reach a terminal or a model.
pub const MAX_REASON_BYTES: usize = 2048;
/// Bytes of a component's `render` text that reach a model.
pub const MAX_RENDERED_BYTES: usize = 64 << 10;
/// Bytes of a command quoted in an approval prompt.
pub const MAX_QUOTED_COMMAND_BYTES: usize = 512;

/// Whether `c` must not reach a terminal or a model as itself.
fn is_active(c: char) -> bool {
    matches!(c, '\0'..='\x08' | '\x0b'..='\x1f' | '\x7f'..='\u{9f}')
        || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// Push `c` escaped: `\xNN` below 0x80, `\u{…}` above.
fn push_escaped(out: &mut String, c: char) {
    if (c as u32) < 0x80 {
        out.push_str(&format!("\\x{:02x}", c as u32));
    } else {
        out.push_str(&format!("\\u{{{:x}}}", c as u32));
    }
}

/// `text` with every control but newline and tab (and every direction
/// override) shown escaped.
pub fn inert(text: &str) -> Cow<'_, str> {
    if !text.chars().any(is_active) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        match is_active(c) {
            true => push_escaped(&mut out, c),
            false => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// `text` cut to at most `max` bytes (at a character boundary), the cut
/// said at its end.
pub fn bounded(text: &str, max: usize) -> Cow<'_, str> {
    if text.len() <= max {
        return Cow::Borrowed(text);
    }
    let cut = (0..=max)
        .rev()
        .find(|&i| text.is_char_boundary(i))
        .unwrap_or(0);
    Cow::Owned(format!(
        "{}… [{} more bytes cut]",
        &text[..cut],
        text.len() - cut
    ))
}

/// A policy's reason as cordon passes it on: inert, at most
/// [`MAX_REASON_BYTES`].
pub fn reason(text: &str) -> String {
    bounded(&inert(text), MAX_REASON_BYTES).into_owned()
}

/// A component's `render` text as a model reads it: inert, at most
/// [`MAX_RENDERED_BYTES`].
pub fn rendered(text: &str) -> String {
    bounded(&inert(text), MAX_RENDERED_BYTES).into_owned()
}

/// A command quoted in cordon's own words (an approval prompt, a list):
/// one line — newlines and tabs shown as `\n` and `\t` —, inert, at most
/// `max` bytes of the command.
pub fn quoted_command(command: &str, max: usize) -> String {
    let one_line = command.replace('\n', "\\n").replace('\t', "\\t");
    bounded(&inert(&one_line), max).into_owned()
}

/// Makes a byte stream inert for a terminal: what [`inert`] does to text,
/// plus bytes that are not UTF-8 shown as `\xNN` (a lone `0x9b` is a CSI
/// to a terminal in 8-bit mode). An incomplete UTF-8 sequence at a chunk's
/// end waits for the next chunk.
#[derive(Debug, Default)]
pub struct Neutraliser {
    pending: Vec<u8>,
}

impl Neutraliser {
    /// The inert text of `chunk` (and whatever of the previous chunk was
    /// waiting).
    pub fn feed(&mut self, chunk: &[u8]) -> String {
        let mut bytes = std::mem::take(&mut self.pending);
        bytes.extend_from_slice(chunk);
        let mut out = String::with_capacity(bytes.len());
        let mut rest = bytes.as_slice();
        loop {
            match std::str::from_utf8(rest) {
                Ok(text) => {
                    out.push_str(&inert(text));
                    break;
                }
                Err(err) => {
                    let (valid, after) = rest.split_at(err.valid_up_to());
                    // The first `valid_up_to` bytes are UTF-8.
                    out.push_str(&inert(std::str::from_utf8(valid).unwrap_or_default()));
                    match err.error_len() {
                        Some(bad) => {
                            for byte in &after[..bad] {
                                out.push_str(&format!("\\x{byte:02x}"));
                            }
                            rest = &after[bad..];
                        }
                        None => {
                            self.pending = after.to_vec();
                            break;
                        }
                    }
                }
            }
        }
        out
    }

    /// Whatever was still waiting at the stream's end, shown escaped.
    pub fn finish(&mut self) -> String {
        std::mem::take(&mut self.pending)
            .iter()
            .map(|byte| format!("\\x{byte:02x}"))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_are_shown_not_acted_on() {
        let osc52 = "copy\x1b]52;c;ZXZpbA==\x07 me";
        assert_eq!(inert(osc52), "copy\\x1b]52;c;ZXZpbA==\\x07 me");
        assert_eq!(inert("a\u{9b}31mb"), "a\\u{9b}31mb");
        assert_eq!(inert("abc\u{202e}fed"), "abc\\u{202e}fed");
        assert_eq!(inert("keep\nlines\tand tabs"), "keep\nlines\tand tabs");
        assert_eq!(inert("cr\rdel\x7f"), "cr\\x0ddel\\x7f");
        assert!(matches!(inert("plain"), Cow::Borrowed(_)));
    }

    #[test]
    fn long_text_is_cut_and_says_so() {
        let long = "é".repeat(5000);
        let cut = reason(&long);
        assert!(cut.len() < MAX_REASON_BYTES + 40, "{}", cut.len());
        assert!(cut.ends_with("more bytes cut]"), "{cut}");
        assert_eq!(bounded("short", 10), "short");
        let eight_mib = "x".repeat(8 << 20);
        assert!(rendered(&eight_mib).len() < MAX_RENDERED_BYTES + 40);
    }

    #[test]
    fn a_quoted_command_is_one_line() {
        let spoof = format!("true{}The policy asks first: fine", "\n".repeat(80));
        let quoted = quoted_command(&spoof, MAX_QUOTED_COMMAND_BYTES);
        assert!(!quoted.contains('\n'), "{quoted}");
        assert!(quoted.starts_with("true\\n\\n"), "{quoted}");
        assert!(quoted_command(&"y".repeat(4096), 512).len() < 560);
    }

    #[test]
    fn a_stream_is_neutralised_across_chunks() {
        let mut n = Neutraliser::default();
        let mut out = n.feed(b"red \x1b[31m");
        // A UTF-8 C1 control split across two chunks.
        out += &n.feed(b"x\xc2");
        out += &n.feed(b"\x9by \xff\xe2\x82");
        out += &n.feed(b"\xac done");
        out += &n.finish();
        assert_eq!(out, "red \\x1b[31mx\\u{9b}y \\xff€ done");
        let mut cut = Neutraliser::default();
        assert_eq!(cut.feed(b"a\xe2\x82"), "a");
        assert_eq!(cut.finish(), "\\xe2\\x82");
    }
}
