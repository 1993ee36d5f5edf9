//! Bounded capture of one output stream: the last `cap` bytes, byte-exact,
//! however much the command prints.

use std::collections::VecDeque;

/// Bytes kept in memory per stream (SPEC.md §3).
pub const DEFAULT_TAIL_BYTES: usize = 64_000;

/// Which stream a chunk came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stream {
    /// Standard output.
    Stdout,
    /// Standard error.
    Stderr,
}

/// Receives output as the command produces it (the CLI streams it to the
/// terminal). Called from the host's reader tasks; keep it quick.
pub trait OutputSink: Send + Sync {
    /// `bytes` arrived on `stream`.
    fn write(&self, stream: Stream, bytes: &[u8]);
}

/// The last `cap` bytes of a stream and how much was seen in all.
#[derive(Clone, Debug)]
pub struct Tail {
    cap: usize,
    bytes: VecDeque<u8>,
    total: u64,
}

impl Tail {
    /// An empty tail keeping at most `cap` bytes.
    pub fn new(cap: usize) -> Self {
        Tail {
            cap,
            bytes: VecDeque::with_capacity(cap.min(8192)),
            total: 0,
        }
    }

    /// Append `chunk`, dropping from the front beyond the cap.
    pub fn push(&mut self, chunk: &[u8]) {
        self.total += chunk.len() as u64;
        let keep = &chunk[chunk.len().saturating_sub(self.cap)..];
        let overflow = (self.bytes.len() + keep.len()).saturating_sub(self.cap);
        self.bytes.drain(..overflow);
        self.bytes.extend(keep);
    }

    /// Whether anything was dropped (exactly `cap` bytes is not truncated).
    pub fn truncated(&self) -> bool {
        self.total > self.cap as u64
    }

    /// The retained bytes.
    pub fn to_vec(&self) -> Vec<u8> {
        self.bytes.iter().copied().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_last_cap_bytes_exactly() {
        let mut tail = Tail::new(100);
        let data: Vec<u8> = (0..600u32).map(|i| (i % 251) as u8).collect();
        for chunk in data.chunks(37) {
            tail.push(chunk);
        }
        assert!(tail.truncated());
        assert_eq!(tail.to_vec(), &data[500..]);
    }

    #[test]
    fn exactly_the_cap_is_not_truncated() {
        let mut tail = Tail::new(100);
        tail.push(&[b'x'; 60]);
        tail.push(&[b'y'; 40]);
        assert!(!tail.truncated());
        assert_eq!(tail.to_vec().len(), 100);
        tail.push(b"z");
        assert!(tail.truncated());
        assert_eq!(tail.to_vec().last(), Some(&b'z'));
    }
}
