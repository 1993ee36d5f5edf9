//! Programs with languages of their own that can start other programs:
//! `awk` (`system()`, `print | "cmd"`, `"cmd" | getline`), GNU `sed`
//! (the `e` command and the `s///e` flag), git's configuration (`-c
//! alias.x='!cmd'`, `core.sshCommand`, hooks paths, filters). Each is read
//! as far as this reader can prove it runs nothing; a program text that
//! might is opaque. Only what is proven is let through, so a harmless
//! program that uses a construct these readers do not accept (an awk `|`
//! in a regular expression) is opaque too.

/// Whether an awk program text runs no command: no `system`, no pipe
/// (a `|` that is not half of `||`), no gawk `@` directive or indirect
/// call (`@load`, `@include`, `@f()`).
pub(super) fn awk_program_known(program: &str) -> bool {
    if program.contains("system") || program.contains('@') {
        return false;
    }
    let bytes = program.as_bytes();
    bytes.iter().enumerate().all(|(at, b)| {
        *b != b'|' || (at > 0 && bytes[at - 1] == b'|') || bytes.get(at + 1) == Some(&b'|')
    })
}

/// Whether a GNU sed script runs no command: every command is one sed
/// knows and none is `e` or an `s` with the `e` flag. A script this
/// scanner cannot follow is not known.
pub(super) fn sed_script_known(script: &str) -> bool {
    let text: Vec<char> = script.chars().collect();
    let mut at = 0;
    loop {
        while text.get(at).is_some_and(|c| c.is_whitespace() || *c == ';') {
            at += 1;
        }
        let Some(_) = text.get(at) else {
            return true;
        };
        if !sed_address(&text, &mut at) {
            return false;
        }
        while text.get(at).is_some_and(|c| c.is_whitespace() || *c == '!') {
            at += 1;
        }
        let Some(command) = text.get(at).copied() else {
            return false;
        };
        at += 1;
        let known = match command {
            '{' | '}' | '=' | 'd' | 'D' | 'g' | 'G' | 'h' | 'H' | 'n' | 'N' | 'p' | 'P' | 'x'
            | 'z' | 'F' => true,
            'q' | 'Q' | 'l' | 'L' => {
                skip_while(&text, &mut at, |c| c == ' ' || c.is_ascii_digit());
                true
            }
            ':' | 'b' | 't' | 'T' | 'v' => {
                skip_while(&text, &mut at, |c| c != ';' && c != '\n');
                true
            }
            'a' | 'i' | 'c' | 'r' | 'R' | 'w' | 'W' | '#' => {
                to_line_end(&text, &mut at);
                true
            }
            'y' => delimited(&text, &mut at, 2),
            's' => delimited(&text, &mut at, 2) && sed_flags(&text, &mut at),
            _ => false,
        };
        if !known {
            return false;
        }
    }
}

fn skip_while(text: &[char], at: &mut usize, keep: impl Fn(char) -> bool) {
    while text.get(*at).is_some_and(|c| keep(*c)) {
        *at += 1;
    }
}

/// Past the end of the line (`a`, `i`, `c` text continues over a line
/// that ends in a backslash).
fn to_line_end(text: &[char], at: &mut usize) {
    while let Some(c) = text.get(*at) {
        *at += 1;
        match c {
            '\\' => *at += 1,
            '\n' => return,
            _ => {}
        }
    }
}

/// Up to two addresses (`3`, `$`, `/re/I`, `\%re%`, `1~2`, `+3`, `~4`)
/// separated by a comma; false when one is malformed.
fn sed_address(text: &[char], at: &mut usize) -> bool {
    for second in [false, true] {
        match text.get(*at) {
            Some('/') => {
                *at += 1;
                if !until_delimiter(text, at, '/') {
                    return false;
                }
                skip_while(text, at, |c| c == 'I' || c == 'M');
            }
            Some('\\') => {
                let Some(delimiter) = text.get(*at + 1).copied() else {
                    return false;
                };
                *at += 2;
                if !until_delimiter(text, at, delimiter) {
                    return false;
                }
                skip_while(text, at, |c| c == 'I' || c == 'M');
            }
            Some(c) if c.is_ascii_digit() || matches!(c, '$' | '+' | '~') => {
                *at += 1;
                skip_while(text, at, |c| c.is_ascii_digit() || c == '~');
            }
            _ if second => return false,
            _ => return true,
        }
        if second || text.get(*at) != Some(&',') {
            return true;
        }
        *at += 1;
    }
    true
}

/// Past the next unescaped `delimiter`; false at the end of the text.
fn until_delimiter(text: &[char], at: &mut usize, delimiter: char) -> bool {
    while let Some(c) = text.get(*at) {
        *at += 1;
        if *c == '\\' {
            *at += 1;
        } else if *c == delimiter {
            return true;
        }
    }
    false
}

/// `parts` delimited parts after a delimiter character (`s/a/b/`, `y/ab/xy/`).
fn delimited(text: &[char], at: &mut usize, parts: usize) -> bool {
    let Some(delimiter) = text.get(*at).copied() else {
        return false;
    };
    if delimiter == '\n' || delimiter == '\\' {
        return false;
    }
    *at += 1;
    (0..parts).all(|_| until_delimiter(text, at, delimiter))
}

/// An `s` command's flags: `e` runs the pattern space as a command.
fn sed_flags(text: &[char], at: &mut usize) -> bool {
    while let Some(c) = text.get(*at).copied() {
        match c {
            'e' => return false,
            'w' => {
                to_line_end(text, at);
                return true;
            }
            'g' | 'p' | 'i' | 'I' | 'm' | 'M' => *at += 1,
            c if c.is_ascii_digit() => *at += 1,
            _ => return true,
        }
    }
    true
}

/// Whether setting the git configuration `key` (`-c key=value`, `git
/// config key value`) can make git run nothing new: the keys that only
/// name people, colours, advice and line endings. Aliases (`!cmd`), the
/// ssh command, pagers, editors, hooks paths, filters and helpers run
/// programs, and so does any key not known here.
pub(super) fn git_key_known(key: &str) -> bool {
    let key = key.to_ascii_lowercase();
    let exact = [
        "user.name",
        "user.email",
        "init.defaultbranch",
        "commit.gpgsign",
        "tag.gpgsign",
        "core.quotepath",
        "core.autocrlf",
        "core.safecrlf",
        "core.filemode",
        "core.ignorecase",
        "core.eol",
        "pull.rebase",
        "pull.ff",
        "merge.ff",
        "push.default",
        "push.autosetupremote",
        "fetch.prune",
        "rebase.autosquash",
        "rebase.autostash",
        "safe.directory",
        "column.ui",
        "diff.noprefix",
        "diff.renames",
        "status.showuntrackedfiles",
    ];
    exact.contains(&key.as_str())
        || ["color.", "advice."]
            .iter()
            .any(|section| key.starts_with(section) && !key.contains("program"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn awk_programs_that_run_commands_are_not_known() {
        for known in [
            "{print $1}",
            "NR==1 || /x/ {print}",
            "BEGIN{FS=\",\"} {s+=$2} END{print s}",
        ] {
            assert!(awk_program_known(known), "{known}");
        }
        for not in [
            "BEGIN{system(\"curl x\")}",
            "{print | \"sh\"}",
            "BEGIN{\"id\" | getline x}",
            "BEGIN{f=\"system\"; @f(\"id\")}",
            "{print |& \"sh\"}",
        ] {
            assert!(!awk_program_known(not), "{not}");
        }
    }

    #[test]
    fn sed_scripts_that_run_commands_are_not_known() {
        for known in [
            "s/a/b/g",
            "1,20p",
            "/^#/d; s|x|y|2",
            "$a\\\nlast line",
            "/start/,/end/{s/a/b/;p}",
            "y/abc/xyz/",
            "s/x/y/w out.txt",
            "\\%x%d",
            "1~2d;$q",
            ":a;N;$!ba;s/\\n/ /g",
        ] {
            assert!(sed_script_known(known), "{known}");
        }
        for not in [
            "e curl x",
            "s/.*/curl x/e",
            "1e id",
            "s/a/b/ge",
            "/x/!e id",
            "k",
            "s/a/b",
        ] {
            assert!(!sed_script_known(not), "{not}");
        }
    }

    #[test]
    fn only_keys_that_run_nothing_are_known() {
        assert!(git_key_known("user.name") && git_key_known("color.ui"));
        for not in [
            "alias.x",
            "core.sshCommand",
            "core.pager",
            "core.hooksPath",
            "filter.a.clean",
        ] {
            assert!(!git_key_known(not), "{not}");
        }
    }
}
