//! The log's hash chain: each record's `prev` is the SHA-256 of the line
//! before it, and each file opens with a `genesis` record whose `prev` is
//! the head of the file before (all zeros for the first). A record changed,
//! removed or inserted breaks the chain at the next one: [`verify`] names
//! it. What the chain alone cannot show is a writer who rewrites every
//! record after the change too (the hashes are anyone's to compute) — that
//! is what a `seal` is for: signed with the operator's key at rotation, it
//! fixes a file's head where that key's holder alone could have made it (a
//! head recorded elsewhere does the same for the live file).

use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::registry::PublicKey;

/// The `prev` of the first genesis of a log.
pub const ORIGIN: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// The chain's hash of one record's line (without its newline).
pub fn hash(line: &[u8]) -> String {
    let digest = Sha256::digest(line);
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// Where an open log's chain stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Head {
    /// The length of its whole records (a fragment after them is cut).
    pub len: u64,
    /// The next record's number.
    pub seq: u64,
    /// The hash of the last record (the next one's `prev`).
    pub prev: String,
    /// Bytes cut off its end: a record a crash left half-written.
    pub fragment: u64,
    /// Its last record carries no chain (a log from before cordon chained
    /// its records): the next record is a genesis continuing from it.
    pub unchained: bool,
}

/// Read where the chain of `file` (of `len` bytes) stands, from its last
/// whole line. A last line without its newline is a fragment: it is not
/// part of the chain ([`Head::fragment`] says how long it is; the caller
/// cuts it). A last record without `seq` (a log from before the chain)
/// leaves the next record to start a chain of its own.
pub fn head(file: &mut File, len: u64) -> io::Result<Head> {
    let whole = match last_newline(file, len)? {
        Some(at) => at + 1,
        None => 0,
    };
    if whole == 0 {
        return Ok(Head {
            len: 0,
            seq: 0,
            prev: ORIGIN.to_owned(),
            fragment: len,
            unchained: false,
        });
    }
    let start = match last_newline(file, whole - 1)? {
        Some(at) => at + 1,
        None => 0,
    };
    let mut line = vec![0u8; usize::try_from(whole - 1 - start).unwrap_or(0)];
    file.seek(SeekFrom::Start(start))?;
    file.read_exact(&mut line)?;
    let seq = serde_json::from_slice::<Value>(&line)
        .ok()
        .and_then(|record| record.get("seq")?.as_u64());
    Ok(Head {
        len: whole,
        seq: seq.map_or(0, |seq| seq + 1),
        prev: hash(&line),
        fragment: len - whole,
        unchained: seq.is_none(),
    })
}

/// The offset of the last `\n` in the first `end` bytes of `file`.
fn last_newline(file: &mut File, end: u64) -> io::Result<Option<u64>> {
    const BLOCK: u64 = 64 << 10;
    let mut upto = end;
    let mut buf = vec![0u8; BLOCK as usize];
    while upto > 0 {
        let from = upto.saturating_sub(BLOCK);
        let chunk = &mut buf[..(upto - from) as usize];
        file.seek(SeekFrom::Start(from))?;
        file.read_exact(chunk)?;
        if let Some(at) = chunk.iter().rposition(|&b| b == b'\n') {
            return Ok(Some(from + at as u64));
        }
        upto = from;
    }
    Ok(None)
}

/// A chain that holds: what [`verify`] read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verified {
    /// Records read (genesis and seal records included).
    pub records: u64,
    /// Files read.
    pub files: usize,
    /// The `prev` the first genesis names (all zeros: the log's first).
    pub origin: String,
    /// The hash of the last record.
    pub head: String,
    /// Seals whose signature verified under the key given.
    pub seals: u64,
    /// Records before the chain's first genesis (written before cordon
    /// chained its log): not covered by the chain.
    pub unchained: u64,
}

/// Where a chain breaks.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}: line {line} (record {seq}): {reason}", file.display())]
pub struct Broken {
    /// The file.
    pub file: PathBuf,
    /// The line, from 1.
    pub line: u64,
    /// The record's number as the chain expected it.
    pub seq: u64,
    /// What is wrong.
    pub reason: String,
}

/// Check the chain through `files`, in order (a log's rotated files, then
/// the live one): every line a whole record, numbered one after the other,
/// each `prev` the hash of the line before, each file opening with a
/// genesis that continues the one before; with `key`, every seal's
/// signature verifies under it (and a file must end in one, but the last).
pub fn verify(files: &[PathBuf], key: Option<&PublicKey>) -> Result<Verified, Broken> {
    let mut walk = Walk::default();
    for (index, path) in files.iter().enumerate() {
        let last_file = index + 1 == files.len();
        let text = std::fs::read(path).map_err(|err| Broken {
            file: path.clone(),
            line: 0,
            seq: walk.seq,
            reason: format!("cannot read it: {err}"),
        })?;
        walk.file(path, &text, key, last_file)?;
    }
    Ok(Verified {
        records: walk.records,
        files: files.len(),
        origin: walk.origin.unwrap_or_else(|| ORIGIN.to_owned()),
        head: walk.prev.unwrap_or_else(|| ORIGIN.to_owned()),
        seals: walk.seals,
        unchained: walk.unchained,
    })
}

/// The state of a [`verify`] between records.
#[derive(Debug, Default)]
struct Walk {
    unchained: u64,
    /// The hash of the last unchained record, before the chain began.
    after_unchained: Option<String>,
    records: u64,
    seq: u64,
    prev: Option<String>,
    origin: Option<String>,
    seals: u64,
}

impl Walk {
    /// Check one file's records.
    fn file(
        &mut self,
        path: &Path,
        text: &[u8],
        key: Option<&PublicKey>,
        last_file: bool,
    ) -> Result<(), Broken> {
        let broken = |line: u64, seq: u64, reason: String| Broken {
            file: path.to_path_buf(),
            line,
            seq,
            reason,
        };
        if !text.is_empty() && !text.ends_with(b"\n") {
            let line = text.iter().filter(|&&b| b == b'\n').count() as u64 + 1;
            return Err(broken(
                line,
                self.seq,
                "a record without its end (cut off)".into(),
            ));
        }
        let mut last_event = String::new();
        let body = text.strip_suffix(b"\n").unwrap_or(text);
        let lines = body.split(|&b| b == b'\n').filter(|_| !body.is_empty());
        for (index, line) in lines.enumerate() {
            let number = index as u64 + 1;
            last_event = self
                .record(line, index == 0, key)
                .map_err(|reason| broken(number, self.seq, reason))?;
        }
        if key.is_some() && !last_file && last_event != "seal" {
            return Err(broken(
                0,
                self.seq,
                "a rotated file that does not end in a seal".into(),
            ));
        }
        Ok(())
    }

    /// Check one record (`first`: of its file); returns its event.
    fn record(
        &mut self,
        line: &[u8],
        first: bool,
        key: Option<&PublicKey>,
    ) -> Result<String, String> {
        let record: Value = serde_json::from_slice(line)
            .map_err(|err| format!("not a JSON record ({err}): the line was changed"))?;
        let event = record
            .get("event")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let (Some(seq), Some(prev)) = (
            record.get("seq").and_then(Value::as_u64),
            record.get("prev").and_then(Value::as_str),
        ) else {
            // Only before the chain began (an older cordon's records).
            if self.prev.is_none() {
                self.unchained += 1;
                self.after_unchained = Some(hash(line));
                return Ok(String::new());
            }
            return Err(
                "it carries no seq and prev: a record inside the chain without its \
                        link (inserted, or changed)"
                    .into(),
            );
        };
        if self.prev.is_none() && self.after_unchained.is_some() {
            if event != "genesis" {
                return Err(format!(
                    "the chain after older records must open with a genesis, not {event:?}"
                ));
            }
            if Some(prev) != self.after_unchained.as_deref() {
                return Err(
                    "the genesis does not name the record before it: records were \
                            removed or changed"
                        .into(),
                );
            }
        } else if first != (event == "genesis") {
            return Err(match first {
                true => format!("a file must open with a genesis record, not {event:?}"),
                false => "a genesis record inside a file".into(),
            });
        }
        match &self.prev {
            None => {
                self.origin = Some(prev.to_owned());
                self.seq = seq;
            }
            Some(expected) => {
                if seq != self.seq {
                    return Err(format!(
                        "its number is {seq} where {} follows: records were removed or inserted",
                        self.seq
                    ));
                }
                if prev != expected {
                    return Err(format!(
                        "its prev is not the hash of record {}: that record was changed, or \
                         records were removed or inserted before this one",
                        self.seq.saturating_sub(1)
                    ));
                }
            }
        }
        if event == "seal" {
            self.seal(&record, prev, key)?;
        }
        self.prev = Some(hash(line));
        self.seq = seq + 1;
        self.records += 1;
        Ok(event.to_owned())
    }

    /// Check a seal's signature over the head it names, under `key`.
    fn seal(&mut self, record: &Value, head: &str, key: Option<&PublicKey>) -> Result<(), String> {
        let Some(key) = key else {
            return Ok(());
        };
        let signature = record
            .get("signature")
            .and_then(Value::as_str)
            .ok_or("a seal without a signature")?;
        key.verify(&super::record::seal_payload(head), signature)
            .map_err(|why| format!("the seal's signature does not verify under the key: {why}"))?;
        self.seals += 1;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chain(lines: &[&str]) -> Vec<u8> {
        let mut prev = ORIGIN.to_owned();
        let mut text = Vec::new();
        for (seq, event) in lines.iter().enumerate() {
            let line = format!(r#"{{"seq":{seq},"prev":"{prev}","event":"{event}"}}"#);
            prev = hash(line.as_bytes());
            text.extend_from_slice(line.as_bytes());
            text.push(b'\n');
        }
        text
    }

    fn verify_text(text: &[u8]) -> Result<Verified, Broken> {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("audit.jsonl");
        std::fs::write(&file, text).unwrap();
        verify(&[file], None)
    }

    #[test]
    fn an_intact_chain_verifies_and_every_tampering_is_named() {
        let text = chain(&["genesis", "run", "refusal", "task"]);
        let ok = verify_text(&text).unwrap();
        assert_eq!((ok.records, ok.origin.as_str()), (4, ORIGIN));
        // One byte of record 1 changed: record 2 names it.
        let mut changed = text.clone();
        let at = changed.windows(5).position(|w| w == b"\"run\"").unwrap();
        changed[at + 1] = b'R';
        let err = verify_text(&changed).unwrap_err();
        assert_eq!((err.line, err.seq), (3, 2), "{err}");
        assert!(err.reason.contains("hash of record 1"), "{err}");
        // Record 2 removed.
        let lines: Vec<&[u8]> = text.split(|&b| b == b'\n').collect();
        let removed = [lines[0], lines[1], lines[3], b""].join(&b'\n');
        let err = verify_text(&removed).unwrap_err();
        assert!(err.reason.contains("removed or inserted"), "{err}");
        // A fragment at the end.
        let mut cut = text.clone();
        cut.extend_from_slice(b"{\"seq\":4");
        assert!(verify_text(&cut).unwrap_err().reason.contains("cut off"));
    }

    #[test]
    fn the_head_is_read_back_and_a_fragment_is_measured() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log");
        let mut text = chain(&["genesis", "run"]);
        let whole = text.len() as u64;
        std::fs::write(&path, &text).unwrap();
        let mut file = File::open(&path).unwrap();
        let head = head(&mut file, whole).unwrap();
        assert_eq!((head.len, head.seq, head.fragment), (whole, 2, 0));
        let last = text[..text.len() - 1]
            .rsplit(|&b| b == b'\n')
            .next()
            .unwrap();
        assert_eq!(head.prev, hash(last));
        text.extend_from_slice(b"{\"half");
        std::fs::write(&path, &text).unwrap();
        let mut file = File::open(&path).unwrap();
        let cut = super::head(&mut file, text.len() as u64).unwrap();
        assert_eq!((cut.len, cut.fragment), (whole, 6));
        let empty = dir.path().join("empty");
        std::fs::write(&empty, b"").unwrap();
        let head = super::head(&mut File::open(&empty).unwrap(), 0).unwrap();
        assert_eq!((head.seq, head.prev.as_str()), (0, ORIGIN));
    }
}
