//! Whether a path lies below another, compared as bytes where that gives
//! std's answer: a path of plain names (`/`, or `/` and names joined by
//! single slashes, none `.` or `..`) is below another exactly when its
//! bytes start with the other's and a `/` follows. `Path::starts_with`
//! and `strip_prefix` parse both paths component by component on every
//! call; a workspace 400 directories deep made the grant's layout (which
//! asks them hundreds of times a run) and the runner's anchors spend
//! milliseconds in that parsing alone.

use std::path::Path;

#[cfg(unix)]
use std::os::unix::ffi::OsStrExt;

/// `path.strip_prefix(dir)`: the same path as std's (as paths compare),
/// read as bytes where that is certain — `path` is `dir`'s bytes then a
/// `/` and a rest that does not start with one (or `.`), or both are plain
/// and it is not —, by components otherwise.
pub fn strip_prefix<'a>(path: &'a Path, dir: &Path) -> Option<&'a Path> {
    let (bytes, prefix) = (path.as_os_str().as_bytes(), dir.as_os_str().as_bytes());
    if let Some(rest) = rest_after(bytes, prefix) {
        return Some(Path::new(std::ffi::OsStr::from_bytes(rest)));
    }
    if plain(bytes) && plain(prefix) {
        return None;
    }
    path.strip_prefix(dir).ok()
}

/// What follows `prefix` in `bytes` when `bytes` is `prefix`, or `prefix`
/// and a `/` (none when `prefix` is `/` or ends with one), and what is left
/// starts with a name (std would trim a `/` or `.` leading it).
fn rest_after<'a>(bytes: &'a [u8], prefix: &[u8]) -> Option<&'a [u8]> {
    let rest = bytes.strip_prefix(prefix)?;
    let rest = match (prefix, rest) {
        (b"", _) => return None,
        (b"/", rest) | (_, rest @ b"") => rest,
        (_, [b'/', rest @ ..]) if !prefix.ends_with(b"/") => rest,
        _ => return None,
    };
    let leads = rest.starts_with(b"/") || rest == b"." || rest.starts_with(b"./");
    (!leads).then_some(rest)
}

/// [`strip_prefix`] of two paths already known [`plain`]: bytes only.
pub fn strip_plain<'a>(path: &'a Path, dir: &Path) -> Option<&'a Path> {
    let rest = rest_after(path.as_os_str().as_bytes(), dir.as_os_str().as_bytes())?;
    Some(Path::new(std::ffi::OsStr::from_bytes(rest)))
}

/// `path.starts_with(dir)`, as [`strip_prefix`] compares.
pub fn starts_with(path: &Path, dir: &Path) -> bool {
    strip_prefix(path, dir).is_some()
}

/// An absolute path of plain names: `/`, or `/` and names joined by
/// single slashes, none `.` or `..` (one pass over the bytes).
pub fn plain(path: &[u8]) -> bool {
    let [b'/', rest @ ..] = path else {
        return false;
    };
    if rest.is_empty() {
        return true;
    }
    // A name of no bytes, or of one or two dots only, is not plain.
    let odd = |len: usize, dots: usize| len == dots && len <= 2;
    let (mut len, mut dots) = (0, 0);
    for &byte in rest {
        if byte == b'/' {
            if odd(len, dots) {
                return false;
            }
            (len, dots) = (0, 0);
        } else {
            len += 1;
            dots += usize::from(byte == b'.');
        }
    }
    !odd(len, dots)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every path of up to four parts (`/`, `a`, `b`, `.`, `..`) against
    /// every other: the same answer as std's, as paths compare.
    #[test]
    fn strip_prefix_answers_as_std_does_for_every_short_path() {
        let parts = ["/", "a", "b", ".", ".."];
        let mut all = vec![String::new()];
        for _ in 0..4 {
            let longer: Vec<String> = all
                .iter()
                .flat_map(|p| parts.iter().map(move |part| format!("{p}{part}")))
                .collect();
            all.extend(longer);
        }
        all.sort();
        all.dedup();
        for path in &all {
            for dir in &all {
                let (path, dir) = (Path::new(path), Path::new(dir));
                assert_eq!(
                    strip_prefix(path, dir),
                    path.strip_prefix(dir).ok(),
                    "{path:?} {dir:?}"
                );
            }
        }
    }

    #[test]
    fn strip_prefix_answers_as_std_does() {
        let cases = [
            ("/a/b/c", "/a/b"),
            ("/a/b", "/a/b"),
            ("/a/bc", "/a/b"),
            ("/a/b", "/"),
            ("/", "/"),
            ("/a", "/a/b"),
            ("/a//b/./c", "/a/b"),
            ("/a/b/", "/a/b"),
            ("/a/b/c", "/a/b/"),
            ("a/b", "a"),
            ("/x/../y", "/x"),
        ];
        for (path, dir) in cases {
            let (path, dir) = (Path::new(path), Path::new(dir));
            assert_eq!(
                strip_prefix(path, dir),
                path.strip_prefix(dir).ok(),
                "{path:?} {dir:?}"
            );
            assert_eq!(starts_with(path, dir), path.starts_with(dir));
            if plain(path.as_os_str().as_bytes()) && plain(dir.as_os_str().as_bytes()) {
                assert_eq!(strip_plain(path, dir), path.strip_prefix(dir).ok());
            }
        }
    }

    #[test]
    fn a_plain_path_is_absolute_names_joined_by_single_slashes() {
        for yes in ["/", "/a", "/a/b", "/a/.b/..c"] {
            assert!(plain(yes.as_bytes()), "{yes}");
        }
        for no in [
            "", "a", "a/b", "//", "/a//b", "/a/", "/a/./b", "/a/../b", "/.",
        ] {
            assert!(!plain(no.as_bytes()), "{no}");
        }
    }
}
