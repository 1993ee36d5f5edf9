//! Bounded capture of one output stream.
//!
//! A [`Capture`] keeps the last `cap` bytes in memory (byte-exact; exactly
//! `cap` bytes is not truncated) and, once the stream outgrows that, the
//! complete stream in a spill file up to the spill limit; past the limit the
//! spill is dropped and only the tail remains. Memory stays bounded however
//! much the command prints. A consuming reader (background tasks) reads the
//! delta since its last read; when it fell behind the tail the read is
//! *lossy* and returns the retained tail instead.

use std::collections::VecDeque;
use std::sync::Arc;

use super::spill::{SpillDir, SpillFile, SpillWriter};
use crate::model::{SpillHandle, StreamOutput};

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

    /// A descriptor that takes `stream`'s bytes exactly as they come, open
    /// for as long as this sink lives: the host then moves them from the
    /// command's pipe with `splice` (kernel to kernel, on Linux) instead of
    /// through [`write`](Self::write), and keeps neither tail nor spill of
    /// that stream (the result's text of it is empty, and `truncated` once
    /// anything passed). None (the default): every chunk through `write`.
    fn passthrough(&self, _stream: Stream) -> Option<std::os::fd::RawFd> {
        None
    }
}

/// The last `cap` bytes of a stream and how much was seen in all.
#[derive(Clone, Debug)]
pub struct Tail {
    cap: usize,
    bytes: VecDeque<u8>,
    total: u64,
}

impl Tail {
    /// Bytes seen in all.
    pub fn total(&self) -> u64 {
        self.total
    }
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

    /// Count `len` bytes that went by without being kept (a passthrough).
    pub fn skip(&mut self, len: usize) {
        self.total += len as u64;
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

/// One stream's capture: tail, spill, and the consuming reader's position.
#[derive(Debug)]
pub struct Capture {
    stream: Stream,
    tail: Tail,
    spill_dir: Option<Arc<SpillDir>>,
    spill_limit: u64,
    spill: Option<SpillWriter>,
    spill_done: bool,
    read_pos: u64,
}

/// What a consuming read returns for one stream.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Delta {
    /// New bytes since the last read (or the retained tail, when lossy).
    pub bytes: Vec<u8>,
    /// The reader fell behind the tail; bytes in between are only in the spill.
    pub lossy: bool,
}

impl Capture {
    /// An empty capture of `stream` keeping `tail_bytes` in memory and
    /// spilling into `spill_dir` up to `spill_limit` (no spill when there is
    /// no directory or the limit is 0).
    pub fn new(
        stream: Stream,
        tail_bytes: usize,
        spill_dir: Option<Arc<SpillDir>>,
        spill_limit: u64,
    ) -> Self {
        Capture {
            stream,
            tail: Tail::new(tail_bytes),
            spill_dir,
            spill_limit,
            spill: None,
            spill_done: false,
            read_pos: 0,
        }
    }

    /// Append a chunk the command wrote.
    pub fn push(&mut self, chunk: &[u8]) {
        let outgrows = self.tail.total + chunk.len() as u64 > self.tail.cap as u64;
        if outgrows && self.spill.is_none() && !self.spill_done && self.spill_limit > 0 {
            self.spill_done = true;
            // Nothing has been dropped from the tail yet: it holds the
            // whole stream so far, which opens the spill.
            self.spill = self.spill_dir.as_ref().and_then(|dir| {
                let mut writer = SpillWriter::create(dir, self.stream, self.spill_limit).ok()?;
                writer.append(&self.tail.to_vec()).ok()?.then_some(writer)
            });
        }
        if let Some(writer) = &mut self.spill
            && !writer.append(chunk).unwrap_or(false)
        {
            // Over the limit (or unwritable): the spill is dropped whole.
            self.spill = None;
        }
        self.tail.push(chunk);
    }

    /// Count `len` bytes the command wrote that went straight to a sink's
    /// descriptor ([`OutputSink::passthrough`]): neither kept nor spilled.
    pub fn passed(&mut self, len: usize) {
        self.tail.skip(len);
    }

    /// The retained tail.
    pub fn tail(&self) -> &Tail {
        &self.tail
    }

    /// The spill file, while there is one.
    pub fn spill(&self) -> Option<&Arc<SpillFile>> {
        self.spill.as_ref().map(SpillWriter::handle)
    }

    /// The stream as a result carries it: the tail as lossy UTF-8, and the
    /// spill file (kept alive by the result) when there is one.
    pub fn stream_output(&self) -> StreamOutput {
        let spill = self
            .spill()
            .map(|spill| spill.clone() as Arc<dyn SpillHandle>);
        StreamOutput::new(
            String::from_utf8_lossy(&self.tail.to_vec()).into_owned(),
            self.tail.truncated(),
            spill,
        )
    }

    /// Everything since the previous read (consuming). With `more_to_come`
    /// (the stream is still open), a UTF-8 character whose bytes have not
    /// all arrived yet is held back for the next read, so a reader that
    /// decodes each delta never splits one into replacement characters.
    pub fn read_delta(&mut self, more_to_come: bool) -> Delta {
        let total = self.tail.total;
        let tail_start = total - self.tail.bytes.len() as u64;
        let mut delta = if self.read_pos < tail_start {
            Delta {
                bytes: self.tail.to_vec(),
                lossy: true,
            }
        } else {
            let skip = (self.read_pos - tail_start) as usize;
            Delta {
                bytes: self.tail.bytes.iter().skip(skip).copied().collect(),
                lossy: false,
            }
        };
        let held = if more_to_come {
            incomplete_utf8_suffix(&delta.bytes)
        } else {
            0
        };
        delta.bytes.truncate(delta.bytes.len() - held);
        self.read_pos = total - held as u64;
        delta
    }
}

/// How many bytes at the end of `bytes` start a UTF-8 character that is
/// still missing bytes (0 when it ends on a character boundary, or with
/// bytes that can never become valid UTF-8).
fn incomplete_utf8_suffix(bytes: &[u8]) -> usize {
    let len = bytes.len();
    for back in 1..=len.min(3) {
        let byte = bytes[len - back];
        if byte & 0b1100_0000 == 0b1000_0000 {
            continue; // a continuation byte: its lead is further back
        }
        let needs = match byte {
            _ if byte & 0b1110_0000 == 0b1100_0000 => 2,
            _ if byte & 0b1111_0000 == 0b1110_0000 => 3,
            _ if byte & 0b1111_1000 == 0b1111_0000 => 4,
            _ => return 0,
        };
        return if back < needs { back } else { 0 };
    }
    0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unfinished_character_waits_for_its_last_bytes() {
        let mut capture = Capture::new(Stream::Stdout, 1_000, None, 0);
        capture.push("a\u{e9}".as_bytes().split_last().unwrap().1); // "a" + half of "é"
        assert_eq!(capture.read_delta(true).bytes, b"a");
        capture.push(&"\u{e9}".as_bytes()[1..]);
        capture.push("\u{1f600}".as_bytes().split_at(2).0); // half an emoji
        assert_eq!(capture.read_delta(true).bytes, "\u{e9}".as_bytes());
        // The stream ended: whatever is left comes out, undecodable or not.
        assert_eq!(
            capture.read_delta(false).bytes,
            &"\u{1f600}".as_bytes()[..2]
        );
    }

    #[test]
    fn only_a_valid_prefix_is_held_back() {
        assert_eq!(incomplete_utf8_suffix(b"abc"), 0);
        assert_eq!(incomplete_utf8_suffix("é".as_bytes()), 0);
        assert_eq!(incomplete_utf8_suffix(&"€".as_bytes()[..2]), 2);
        assert_eq!(incomplete_utf8_suffix(&[b'x', 0xff]), 0);
        assert_eq!(incomplete_utf8_suffix(&[0x80, 0x80, 0x80]), 0);
        assert_eq!(incomplete_utf8_suffix(b""), 0);
    }

    fn spilling(cap: usize, limit: u64) -> (tempfile::TempDir, Capture) {
        let parent = tempfile::tempdir().unwrap();
        let dir = SpillDir::under(parent.path());
        (parent, Capture::new(Stream::Stdout, cap, Some(dir), limit))
    }

    #[test]
    fn past_the_cap_the_spill_holds_everything() {
        let (_parent, mut capture) = spilling(100, 1 << 20);
        let data: Vec<u8> = (0..600u32).map(|i| (i % 251) as u8).collect();
        for chunk in data.chunks(33) {
            capture.push(chunk);
        }
        assert!(capture.tail().truncated());
        assert_eq!(capture.tail().to_vec(), &data[500..]);
        let spill = capture.spill().expect("spilled");
        assert_eq!(std::fs::read(spill.path()).unwrap(), data);
    }

    #[test]
    fn exactly_the_cap_neither_truncates_nor_spills() {
        let (_parent, mut capture) = spilling(100, 1 << 20);
        capture.push(&[b'a'; 100]);
        assert!(!capture.tail().truncated());
        assert!(capture.spill().is_none());
    }

    #[test]
    fn past_the_spill_limit_only_the_tail_remains() {
        let (_parent, mut capture) = spilling(10, 50);
        capture.push(&[b'a'; 30]);
        let path = capture.spill().unwrap().path().to_path_buf();
        capture.push(&[b'b'; 30]);
        assert!(capture.spill().is_none());
        assert!(!path.exists(), "a dropped spill is deleted");
        assert_eq!(capture.tail().to_vec(), [b'b'; 10]);
    }

    #[test]
    fn a_spill_limit_of_zero_makes_no_spill_file() {
        let (parent, mut capture) = spilling(10, 0);
        capture.push(&[b'a'; 30]);
        assert!(capture.spill().is_none());
        let files = walk(parent.path());
        assert!(files.is_empty(), "spill files made: {files:?}");
        assert_eq!(capture.tail().to_vec(), [b'a'; 10]);
        assert!(capture.tail().truncated());
    }

    /// Every file under `dir`, at any depth.
    fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
        let mut files = vec![];
        for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let path = entry.path();
            match path.is_dir() {
                true => files.extend(walk(&path)),
                false => files.push(path),
            }
        }
        files
    }

    #[test]
    fn consuming_reads_return_deltas_then_lossy_tails() {
        let (_parent, mut capture) = spilling(8, 1 << 20);
        capture.push(b"first\n");
        assert_eq!(
            capture.read_delta(false),
            Delta {
                bytes: b"first\n".to_vec(),
                lossy: false
            }
        );
        capture.push(b"second\n");
        assert_eq!(capture.read_delta(false).bytes, b"second\n");
        assert_eq!(capture.read_delta(false), Delta::default());
        capture.push(b"0123456789abcdef");
        let lossy = capture.read_delta(false);
        assert!(lossy.lossy);
        assert_eq!(lossy.bytes, b"89abcdef");
    }

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

    mod properties {
        use proptest::prelude::*;

        use super::*;

        fn chunks() -> impl Strategy<Value = Vec<Vec<u8>>> {
            prop::collection::vec(prop::collection::vec(any::<u8>(), 0..300), 0..40)
        }

        proptest! {
            #![proptest_config(ProptestConfig { cases: 512, failure_persistence: None, ..ProptestConfig::default() })]

            /// The tail is always exactly the stream's last `cap` bytes, and
            /// truncated exactly when the stream was longer.
            #[test]
            fn the_tail_is_the_exact_last_bytes(cap in 0usize..700, chunks in chunks()) {
                let mut tail = Tail::new(cap);
                let mut stream = Vec::new();
                for chunk in &chunks {
                    tail.push(chunk);
                    stream.extend_from_slice(chunk);
                }
                let start = stream.len().saturating_sub(cap);
                prop_assert_eq!(tail.to_vec(), stream[start..].to_vec());
                prop_assert_eq!(tail.total(), stream.len() as u64);
                prop_assert_eq!(tail.truncated(), stream.len() > cap);
            }

            /// A consuming reader that keeps up reads the stream whole, in
            /// order; one that fell behind is told so and gets the exact tail.
            #[test]
            fn consuming_reads_add_up_to_the_stream(
                cap in 1usize..700,
                chunks in chunks(),
                reads in prop::collection::vec(any::<bool>(), 0..40),
            ) {
                let mut capture = Capture::new(Stream::Stdout, cap, None, 0);
                let mut stream = Vec::new();
                let mut read = Vec::new();
                let mut lossy = false;
                for (i, chunk) in chunks.iter().enumerate() {
                    capture.push(chunk);
                    stream.extend_from_slice(chunk);
                    if reads.get(i).copied().unwrap_or(false) {
                        let delta = capture.read_delta(true);
                        if delta.lossy {
                            // The retained tail, less at most an unfinished
                            // character held back for the next read.
                            lossy = true;
                            let tail = &stream[stream.len().saturating_sub(cap)..];
                            prop_assert!(tail.starts_with(&delta.bytes));
                            prop_assert!(tail.len() - delta.bytes.len() <= 3);
                        }
                        read.extend(delta.bytes);
                    }
                }
                let last = capture.read_delta(false);
                lossy |= last.lossy;
                read.extend(last.bytes);
                if !lossy {
                    prop_assert_eq!(read, stream);
                }
            }
        }
    }
}
