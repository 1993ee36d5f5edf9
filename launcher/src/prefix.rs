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
/// single slashes, none `.` or `..`.
///
/// Asked of every cover's path several times a run: written without a
/// branch per byte (each pattern — `//`, `/./`, `/../` — folded over the
/// bytes), which the compiler makes vector code: a path 2 KB long (400
/// directories deep) is read in a quarter of a microsecond instead of 1.6.
pub fn plain(path: &[u8]) -> bool {
    let [b'/', rest @ ..] = path else {
        return false;
    };
    if rest.is_empty() {
        return true;
    }
    // A last name of no bytes, or of one or two dots only.
    if path.ends_with(b"/") || path.ends_with(b"/.") || path.ends_with(b"/..") {
        return false;
    }
    let slash = |byte: &u8| u8::from(*byte == b'/');
    let dot = |byte: &u8| u8::from(*byte == b'.');
    let from = |start: usize| path.get(start..).unwrap_or_default();
    let pairs = path.iter().zip(from(1));
    let empty = pairs.fold(0, |bad, (a, b)| bad | (slash(a) & slash(b)));
    let triples = path.iter().zip(from(1)).zip(from(2));
    let one_dot = triples.fold(0, |bad, ((a, b), c)| bad | (slash(a) & dot(b) & slash(c)));
    let quads = path.iter().zip(from(1)).zip(from(2)).zip(from(3));
    let two_dots = quads.fold(0, |bad, (((a, b), c), d)| {
        bad | (slash(a) & dot(b) & dot(c) & slash(d))
    });
    empty | one_dot | two_dots == 0
}

/// How many components `Path::components` counts in `path`, from its bytes
/// when it is [`plain`] (`/` is one; each name one more).
pub fn depth(path: &Path) -> usize {
    let bytes = path.as_os_str().as_bytes();
    match bytes {
        b"/" => 1,
        _ if plain(bytes) => 1 + bytes.iter().filter(|&&byte| byte == b'/').count(),
        _ => path.components().count(),
    }
}

/// Sort `items` by their paths, shallowest first and those of one depth
/// in std's path order (a stable sort, as `sort_by_cached_key(|p|
/// (p.components().count(), p.clone()))` sorts). Where every path is
/// [`plain`], each key is made once from the bytes — each `/` made a NUL,
/// which sorts below any byte of a name (none holds a NUL), so the bytes
/// compare as std compares the names one by one — instead of parsing both
/// paths, 400 components deep, at every comparison.
pub fn sort_shallowest_first<T>(items: &mut [T], path: impl Fn(&T) -> &Path) {
    let plain_all = items
        .iter()
        .all(|item| plain(path(item).as_os_str().as_bytes()));
    if plain_all {
        items.sort_by_cached_key(|item| {
            let bytes = path(item).as_os_str().as_bytes();
            let key: Vec<u8> = bytes
                .iter()
                .map(|&b| if b == b'/' { 0 } else { b })
                .collect();
            (depth(path(item)), key)
        });
    } else {
        items.sort_by_cached_key(|item| {
            let path = path(item);
            (path.components().count(), path.to_path_buf())
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every path made of up to `most` of `parts`, each once, sorted.
    fn every_path(parts: &[&str], most: usize) -> Vec<String> {
        let mut all = vec![String::new()];
        for _ in 0..most {
            let longer: Vec<String> = all
                .iter()
                .flat_map(|p| parts.iter().map(move |part| format!("{p}{part}")))
                .collect();
            all.extend(longer);
        }
        all.sort();
        all.dedup();
        all
    }

    /// Every path of up to four parts (`/`, `a`, `b`, `.`, `..`) against
    /// every other: the same answer as std's, as paths compare.
    #[test]
    fn strip_prefix_answers_as_std_does_for_every_short_path() {
        let parts = ["/", "a", "b", ".", ".."];
        let all = every_path(&parts, 4);
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

    /// Every path of up to four parts, sorted as std's `(components, path)`
    /// key sorts them; and every plain pair compares as std compares.
    #[test]
    fn shallowest_first_sorts_as_std_does_for_every_short_path() {
        let parts = ["/", "a", "b", "ab", "a.b", ".", ".."];
        let all = every_path(&parts, 4);
        fn std_sorted(mut paths: Vec<&Path>) -> Vec<&Path> {
            paths.sort_by_cached_key(|p| (p.components().count(), p.to_path_buf()));
            paths
        }
        for path in &all {
            assert_eq!(
                depth(Path::new(path)),
                Path::new(path).components().count(),
                "{path:?}"
            );
        }
        let plain_paths: Vec<&Path> = all
            .iter()
            .map(Path::new)
            .filter(|p| plain(p.as_os_str().as_bytes()))
            .collect();
        let mut ours = plain_paths.clone();
        sort_shallowest_first(&mut ours, |p| *p);
        assert_eq!(ours, std_sorted(plain_paths));
        // Not all plain: std's own key.
        let every: Vec<&Path> = all.iter().map(Path::new).collect();
        let mut ours = every.clone();
        sort_shallowest_first(&mut ours, |p| *p);
        assert_eq!(ours, std_sorted(every));
    }

    /// Every path of up to five parts: plain exactly as a name-by-name
    /// reading says (no name empty, `.` or `..`; absolute).
    #[test]
    fn plain_reads_every_short_path_as_a_name_by_name_reading_does() {
        fn by_names(path: &[u8]) -> bool {
            let [b'/', rest @ ..] = path else {
                return false;
            };
            rest.is_empty()
                || rest
                    .split(|&byte| byte == b'/')
                    .all(|name| !matches!(name, b"" | b"." | b".."))
        }
        let parts = ["/", "a", ".", "..", "a.", ".a"];
        let all = every_path(&parts, 5);
        for path in &all {
            assert_eq!(
                plain(path.as_bytes()),
                by_names(path.as_bytes()),
                "{path:?}"
            );
        }
    }
}
