//! Splitting a connection's input into request lines, never holding more
//! than the longest line the server accepts.

use std::io;

use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};

/// One line of input.
pub(super) enum Line {
    /// The line's bytes, without the newline.
    Text(Vec<u8>),
    /// A line past the bound, skipped up to its newline.
    TooLong,
}

/// Splits input into lines, never holding more than `max` bytes of one.
pub(super) struct LineReader<R> {
    input: BufReader<R>,
    max: usize,
}

impl<R: AsyncRead + Unpin> LineReader<R> {
    /// A reader of `input` that refuses lines longer than `max` bytes.
    pub(super) fn new(input: R, max: usize) -> Self {
        LineReader {
            input: BufReader::with_capacity(64 << 10, input),
            max,
        }
    }

    /// The next line; None at EOF (a last line without a newline counts).
    pub(super) async fn next(&mut self) -> Option<io::Result<Line>> {
        let mut line = Vec::new();
        let mut too_long = false;
        loop {
            let available = match self.input.fill_buf().await {
                Ok(available) => available,
                Err(err) => return Some(Err(err)),
            };
            if available.is_empty() {
                return match (line.is_empty() && !too_long, too_long) {
                    (true, _) => None,
                    (false, true) => Some(Ok(Line::TooLong)),
                    (false, false) => Some(Ok(Line::Text(line))),
                };
            }
            let (chunk, found) = match available.iter().position(|&b| b == b'\n') {
                Some(end) => (&available[..end], Some(end + 1)),
                None => (available, None),
            };
            if !too_long && line.len() + chunk.len() > self.max {
                too_long = true;
                line = Vec::new();
            }
            if !too_long {
                line.extend_from_slice(chunk);
            }
            let used = found.unwrap_or(available.len());
            self.input.consume(used);
            if found.is_some() {
                return Some(Ok(if too_long {
                    Line::TooLong
                } else {
                    Line::Text(line)
                }));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAX: usize = 1 << 10;

    async fn lines(input: &[u8]) -> Vec<Option<Vec<u8>>> {
        let mut reader = LineReader::new(input, MAX);
        let mut out = vec![];
        while let Some(line) = reader.next().await {
            out.push(match line.unwrap() {
                Line::Text(text) => Some(text),
                Line::TooLong => None,
            });
        }
        out
    }

    #[tokio::test]
    async fn lines_split_on_newlines_and_keep_a_last_unterminated_one() {
        assert_eq!(
            lines(b"a\n\nbc\nd").await,
            vec![
                Some(b"a".to_vec()),
                Some(vec![]),
                Some(b"bc".to_vec()),
                Some(b"d".to_vec())
            ]
        );
        assert!(lines(b"").await.is_empty());
    }

    #[tokio::test]
    async fn an_overlong_line_is_refused_and_the_next_one_read() {
        let mut input = vec![b'x'; MAX + 1];
        input.extend_from_slice(b"\nok\n");
        assert_eq!(lines(&input).await, vec![None, Some(b"ok".to_vec())]);
    }
}
