//! Git's code, kept read-only inside a writable root; git's data left
//! writable, so an agent can commit its work.
//!
//! A repository is data (objects, refs, the index, `HEAD`, logs, stash,
//! rebase and merge state, worktree admin files) that every git command
//! writes, and code that runs the next time anyone uses git there: hooks,
//! and keys of `config` (`core.hooksPath`, `core.fsmonitor`, aliases,
//! filter and diff drivers, …). Protecting the whole `.git` stops an agent
//! from committing; leaving it writable lets a command plant code that runs
//! unconfined later. So every gitdir found in a writable root keeps its
//! code read-only — `config`, `hooks`, `info` (attributes name drivers),
//! `commondir` (a gitdir that has one reads its config from where it
//! points) and `config.worktree` (where present, or where `config` turns
//! worktree configs on) — and the rest stays writable.
//!
//! Gitdirs are found in each writable root: its top-level `.git` (absent:
//! held, so `git init` stays refused there), the repositories nested below
//! it up to [`NESTED_DEPTH`] directories deep (at most [`SEARCH_BUDGET`]
//! entries read per root), the gitdir a `.git` *file* names (a worktree's
//! or a submodule's) and its common dir, the submodules' gitdirs under
//! `modules/` and the linked worktrees' admin dirs under `worktrees/`. A
//! repository made by the run itself, or one deeper than the search, is
//! the command's own like any file it writes.
//!
//! Names the operator may lift ([`crate::model::PROTECTED_DEFAULTS`]):
//! `.git` (all of it, and `git init` allowed), `.git/config` (with
//! `commondir` and `config.worktree`), `.git/hooks`, `.git/info`.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};

use super::launcher::prefix::starts_with;
use super::opened::Opened;

/// How many directories below a writable root nested repositories are
/// looked for (`root/a/b/c/.git` is found at 3).
pub const NESTED_DEPTH: usize = 3;

/// How many directory entries the search for nested repositories reads in
/// one root at most (a tree larger than this is searched only in part).
pub const SEARCH_BUDGET: usize = 4096;

/// How deep `modules/` nests submodules' gitdirs (a module's name may hold
/// slashes, and a submodule has submodules of its own).
const MODULES_DEPTH: usize = 8;

/// The lifted names, as the grant wrote them.
struct Lifted<'a>(&'a [String]);

impl Lifted<'_> {
    fn has(&self, name: &str) -> bool {
        self.0.iter().any(|n| n == name)
    }
}

/// The content of the placeholder that holds an absent git file, where a
/// directory would break git: git reads `commondir` and `config` when they
/// exist, so their placeholders are files git reads as absent would be
/// (`.`: the gitdir is its own common dir; an empty config).
pub fn placeholder_content(path: &Path) -> Option<&'static str> {
    match path.file_name()?.to_str()? {
        "commondir" => Some(".\n"),
        "config" | "config.worktree" => Some(""),
        _ => None,
    }
}

/// Every git path a run of a grant lifting `unprotected` must not write in
/// `writable`, each with the writable root it lies in.
pub fn wanted(
    writable: &[PathBuf],
    unprotected: &[String],
    opened: &Opened,
) -> Vec<(PathBuf, PathBuf)> {
    let lifted = Lifted(unprotected);
    if lifted.has(".git") {
        return vec![];
    }
    let mut gitdirs: Vec<PathBuf> = vec![];
    let mut wanted: Vec<PathBuf> = vec![];
    for root in writable {
        let top = root.join(".git");
        if opened.at(&top).symlink_metadata().is_err() {
            wanted.push(top);
        }
        for dot_git in repositories(root, opened) {
            match opened.at(&dot_git).symlink_metadata() {
                Ok(meta) if meta.is_dir() => gitdirs.push(dot_git),
                // A `.git` file names its gitdir; a link is held as a link.
                Ok(meta) if meta.is_file() => {
                    gitdirs.extend(named_gitdirs(&dot_git));
                    wanted.push(dot_git);
                }
                _ => wanted.push(dot_git),
            }
        }
    }
    let mut seen: Vec<PathBuf> = vec![];
    while let Some(gitdir) = gitdirs.pop() {
        if seen.contains(&gitdir) || !writable.iter().any(|r| starts_with(&gitdir, r)) {
            continue;
        }
        // A linked worktree's admin dir (named by its `.git` file) has a
        // `commondir` naming another dir, whose hooks and config it uses
        // (`.` is a placeholder's: the gitdir is its own common dir).
        let linked =
            std::fs::read_to_string(gitdir.join("commondir")).is_ok_and(|text| text.trim() != ".");
        if linked {
            wanted.extend(worktree_code(&gitdir, &lifted));
        } else {
            wanted.extend(code_of(&gitdir, &lifted));
            gitdirs.extend(modules(&gitdir));
            gitdirs.extend(worktrees(&gitdir));
        }
        seen.push(gitdir);
    }
    wanted
        .into_iter()
        .filter_map(|path| {
            let root = writable.iter().find(|r| starts_with(&path, r))?;
            Some((root.clone(), path))
        })
        .collect()
}

/// The code of one gitdir (see the module's docs), less what is lifted.
fn code_of(gitdir: &Path, lifted: &Lifted<'_>) -> Vec<PathBuf> {
    let mut code = vec![];
    if !lifted.has(".git/config") {
        code.extend(["config", "commondir"].map(|name| gitdir.join(name)));
        if worktree_config(gitdir, gitdir) {
            code.push(gitdir.join("config.worktree"));
        }
    }
    for name in ["hooks", "info"] {
        if !lifted.has(&format!(".git/{name}")) {
            code.push(gitdir.join(name));
        }
    }
    code
}

/// The code of a linked worktree's admin dir: where its common dir is and
/// its own config (its hooks and config are the common dir's).
fn worktree_code(admin: &Path, lifted: &Lifted<'_>) -> Vec<PathBuf> {
    if lifted.has(".git/config") {
        return vec![];
    }
    let common = std::fs::read_to_string(admin.join("commondir"))
        .map(|text| super::grant::normalize(&admin.join(text.trim())))
        .unwrap_or_else(|_| admin.to_path_buf());
    let mut code = vec![admin.join("commondir")];
    if worktree_config(admin, &common) {
        code.push(admin.join("config.worktree"));
    }
    code
}

/// Whether `gitdir`'s `config.worktree` counts: it exists, or the common
/// dir's config turns worktree configs on (then an absent one is held).
fn worktree_config(gitdir: &Path, common: &Path) -> bool {
    gitdir.join("config.worktree").symlink_metadata().is_ok()
        || std::fs::read_to_string(common.join("config"))
            .is_ok_and(|text| text.to_ascii_lowercase().contains("worktreeconfig"))
}

/// The submodules' gitdirs below `gitdir/modules` (a directory holding a
/// `HEAD` is one; any other is a step of a module's name).
fn modules(gitdir: &Path) -> Vec<PathBuf> {
    let mut found = vec![];
    let mut queue = VecDeque::from([(gitdir.join("modules"), 0)]);
    while let Some((dir, depth)) = queue.pop_front() {
        for sub in subdirs(&dir) {
            if sub.join("HEAD").is_file() {
                found.push(sub);
            } else if depth < MODULES_DEPTH {
                queue.push_back((sub, depth + 1));
            }
        }
    }
    found
}

/// The linked worktrees' admin dirs of `gitdir`.
fn worktrees(gitdir: &Path) -> Vec<PathBuf> {
    subdirs(&gitdir.join("worktrees"))
}

/// The directories in `dir` (not through a symlink).
fn subdirs(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return vec![];
    };
    entries
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .map(|e| e.path())
        .collect()
}

/// The `.git` entries in `root` and below it, breadth first, up to
/// [`NESTED_DEPTH`] directories deep and [`SEARCH_BUDGET`] entries read;
/// never into a `.git` or through a symlink.
fn repositories(root: &Path, opened: &Opened) -> Vec<PathBuf> {
    let mut found = vec![];
    let mut budget = SEARCH_BUDGET;
    let mut queue = VecDeque::from([(root.to_path_buf(), 0)]);
    while let Some((dir, depth)) = queue.pop_front() {
        // Listed through the open root (no walk of its path), named by
        // the path itself.
        let Ok(entries) = std::fs::read_dir(opened.at(&dir)) else {
            continue;
        };
        for entry in entries.flatten() {
            if budget == 0 {
                return found;
            }
            budget -= 1;
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            let path = dir.join(entry.file_name());
            if entry.file_name() == ".git" {
                found.push(path);
            } else if kind.is_dir() && depth < NESTED_DEPTH {
                queue.push_back((path, depth + 1));
            }
        }
    }
    found
}

/// The gitdir a `.git` *file* names (`gitdir: PATH`, a worktree's or a
/// submodule's), and that gitdir's common dir (`commondir`), absolute.
pub fn named_gitdirs(dot_git: &Path) -> Vec<PathBuf> {
    let Ok(text) = std::fs::read_to_string(dot_git) else {
        return vec![];
    };
    let Some(named) = text.lines().find_map(|l| l.strip_prefix("gitdir:")) else {
        return vec![];
    };
    let base = dot_git.parent().unwrap_or(Path::new("/"));
    let gitdir = super::grant::normalize(&base.join(named.trim()));
    let mut dirs = vec![gitdir.clone()];
    if let Ok(common) = std::fs::read_to_string(gitdir.join("commondir")) {
        dirs.push(super::grant::normalize(&gitdir.join(common.trim())));
    }
    dirs
}

#[cfg(test)]
mod tests {
    use super::*;

    fn repo(at: &Path) {
        for dir in ["hooks", "info", "objects", "refs"] {
            std::fs::create_dir_all(at.join(".git").join(dir)).unwrap();
        }
        std::fs::write(at.join(".git/HEAD"), "ref: refs/heads/main\n").unwrap();
        std::fs::write(at.join(".git/config"), "[core]\n").unwrap();
    }

    fn paths(writable: &[PathBuf], lifted: &[&str]) -> Vec<PathBuf> {
        let lifted: Vec<String> = lifted.iter().map(|s| s.to_string()).collect();
        // Through the open roots, as the grant's layout asks, and by path.
        let through = wanted(writable, &lifted, &Opened::open(writable));
        let by_path = wanted(writable, &lifted, &Opened::default());
        assert_eq!(through, by_path);
        through.into_iter().map(|(_, p)| p).collect()
    }

    #[test]
    fn a_repository_keeps_its_code_and_not_its_data() {
        let ws = tempfile::tempdir().unwrap();
        repo(ws.path());
        let got = paths(&[ws.path().into()], &[]);
        let git = ws.path().join(".git");
        for code in ["config", "commondir", "hooks", "info"] {
            assert!(got.contains(&git.join(code)), "{code}: {got:?}");
        }
        assert!(!got.contains(&git), "the gitdir itself is writable");
        assert!(
            !got.iter()
                .any(|p| p.ends_with("objects") || p.ends_with("HEAD"))
        );
        assert!(!got.contains(&git.join("config.worktree")));
    }

    #[test]
    fn an_absent_top_level_git_is_held_and_nested_ones_are_found() {
        let ws = tempfile::tempdir().unwrap();
        repo(&ws.path().join("a/b/c"));
        repo(&ws.path().join("a/b/c/d/e"));
        let got = paths(&[ws.path().into()], &[]);
        assert!(
            got.contains(&ws.path().join(".git")),
            "git init stays refused"
        );
        assert!(got.contains(&ws.path().join("a/b/c/.git/hooks")), "{got:?}");
        assert!(
            !got.iter().any(|p| p.starts_with(ws.path().join("a/b/c/d"))),
            "deeper than the search"
        );
    }

    #[test]
    fn submodules_worktrees_and_git_files_are_followed() {
        let ws = tempfile::tempdir().unwrap();
        repo(ws.path());
        let module = ws.path().join(".git/modules/lib/sub");
        std::fs::create_dir_all(module.join("hooks")).unwrap();
        std::fs::write(module.join("HEAD"), "x").unwrap();
        let admin = ws.path().join(".git/worktrees/wt");
        std::fs::create_dir_all(&admin).unwrap();
        std::fs::write(admin.join("commondir"), "../..\n").unwrap();
        std::fs::create_dir(ws.path().join("wt")).unwrap();
        std::fs::write(
            ws.path().join("wt/.git"),
            format!("gitdir: {}\n", admin.display()),
        )
        .unwrap();
        let got = paths(&[ws.path().into()], &[]);
        assert!(got.contains(&module.join("config")), "{got:?}");
        assert!(got.contains(&module.join("hooks")));
        assert!(got.contains(&admin.join("commondir")));
        assert!(got.contains(&ws.path().join("wt/.git")), "the link file");
        assert!(
            !got.contains(&admin.join("hooks")),
            "a worktree's hooks are common"
        );
    }

    #[test]
    fn lifting_by_name() {
        let ws = tempfile::tempdir().unwrap();
        repo(ws.path());
        let git = ws.path().join(".git");
        let got = paths(&[ws.path().into()], &[".git/hooks"]);
        assert!(!got.contains(&git.join("hooks")) && got.contains(&git.join("config")));
        let got = paths(&[ws.path().into()], &[".git/config"]);
        assert!(!got.contains(&git.join("config")) && !got.contains(&git.join("commondir")));
        assert!(paths(&[ws.path().into()], &[".git"]).is_empty());
    }

    #[test]
    fn worktree_configs_count_when_turned_on() {
        let ws = tempfile::tempdir().unwrap();
        repo(ws.path());
        std::fs::write(
            ws.path().join(".git/config"),
            "[extensions]\n\tworktreeConfig = true\n",
        )
        .unwrap();
        let got = paths(&[ws.path().into()], &[]);
        assert!(got.contains(&ws.path().join(".git/config.worktree")));
    }

    #[test]
    fn placeholders_git_reads_as_absent() {
        assert_eq!(
            placeholder_content(Path::new("/w/.git/commondir")),
            Some(".\n")
        );
        assert_eq!(placeholder_content(Path::new("/w/.git/config")), Some(""));
        assert_eq!(placeholder_content(Path::new("/w/.git/hooks")), None);
    }
}
