//! What a rule says about a command's words, beyond a prefix: the
//! programs it names (a name, a path, a glob; one or a list), flags in
//! any order and spelling, and a regular expression over the arguments.
//!
//! Each matcher answers for a *restrictive* rule (ask, deny) and an
//! *allowing* one differently where the command is not fully known: a
//! word known only at run time may be any flag and any text, so it
//! matches a restrictive rule and never an allowing one; a long option
//! abbreviated as getopt allows (`--rec` for `--recursive`) matches a
//! restrictive rule, and an allowing one only as written.

use serde::{Deserialize, Deserializer};

use crate::shell::Word;

/// The programs a rule names: `"curl"` (the name, on any path),
/// `"/usr/bin/rm"` (that path only), `"./scripts/*"` (a glob: `*` is any
/// text, `/` included), or a list of them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Programs(pub Vec<String>);

impl<'de> Deserialize<'de> for Programs {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum OneOrMany {
            One(String),
            Many(Vec<String>),
        }
        Ok(Programs(match OneOrMany::deserialize(deserializer)? {
            OneOrMany::One(one) => vec![one],
            OneOrMany::Many(many) => many,
        }))
    }
}

impl Programs {
    /// Whether `program` (as the command names it) is one of these.
    pub fn names(&self, program: &str) -> bool {
        let base = program.rsplit('/').next().unwrap_or(program);
        self.0.iter().any(|wanted| {
            let subject = if wanted.contains('/') { program } else { base };
            glob(wanted, subject)
        })
    }

    /// The first, for a rule's label.
    pub fn first(&self) -> &str {
        self.0.first().map_or("", String::as_str)
    }
}

/// `pattern` with `*` as any text matches all of `text`.
fn glob(pattern: &str, text: &str) -> bool {
    let mut parts = pattern.split('*');
    let first = parts.next().unwrap_or("");
    let Some(mut rest) = text.strip_prefix(first) else {
        return false;
    };
    let parts: Vec<&str> = parts.collect();
    let Some((last, middle)) = parts.split_last() else {
        return rest.is_empty();
    };
    for part in middle {
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    rest.len() >= last.len() && rest.ends_with(last)
}

/// A regular expression a rule's arguments must match; compiled when the
/// rules are read, so a bad one fails the load with the engine's words.
#[derive(Clone, Debug)]
pub struct Pattern(pub regex_lite::Regex);

impl PartialEq for Pattern {
    fn eq(&self, other: &Self) -> bool {
        self.0.as_str() == other.0.as_str()
    }
}

impl Eq for Pattern {}

impl<'de> Deserialize<'de> for Pattern {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        regex_lite::Regex::new(&text)
            .map(Pattern)
            .map_err(|err| serde::de::Error::custom(format!("regex {text:?}: {err}")))
    }
}

impl Pattern {
    /// Whether the arguments, joined by single spaces, match (searched,
    /// not anchored: write `^…$` to anchor). An argument known only at
    /// run time matches a restrictive rule and never an allowing one.
    pub fn matches(&self, args: &[Word], restrictive: bool) -> bool {
        if args.iter().any(|arg| arg.literal().is_none()) {
            return restrictive;
        }
        let joined = args.iter().map(Word::text).collect::<Vec<_>>().join(" ");
        self.0.is_match(&joined)
    }
}

/// Whether every entry of `flags` (each a flag's spellings joined by `|`:
/// `"-r|-R|--recursive"`) is among the options in `args` — before a `--`,
/// in any order, a short one alone or in a cluster (`-rf`, `-fr`, `-vrf`),
/// a long one as written or with `=value`.
pub fn has_flags(flags: &[String], args: &[Word], restrictive: bool) -> bool {
    let options: Vec<&Word> = args
        .iter()
        .take_while(|arg| arg.literal() != Some("--"))
        .collect();
    flags.iter().all(|spellings| {
        options.iter().any(|arg| match arg.literal() {
            None => restrictive,
            Some(arg) => spellings
                .split('|')
                .any(|spelling| spelled(spelling.trim(), arg, restrictive)),
        })
    })
}

/// Whether the option word `arg` carries the flag spelled `spelling`.
fn spelled(spelling: &str, arg: &str, restrictive: bool) -> bool {
    if let Some(long) = spelling.strip_prefix("--") {
        let Some(given) = arg.strip_prefix("--") else {
            return false;
        };
        let name = given.split_once('=').map_or(given, |(name, _)| name);
        return name == long || (restrictive && !name.is_empty() && long.starts_with(name));
    }
    let (Some(letter), true) = (spelling.strip_prefix('-'), spelling.chars().count() == 2) else {
        return arg == spelling;
    };
    arg.starts_with('-')
        && !arg.starts_with("--")
        && arg[1..].chars().all(|c| c.is_ascii_alphanumeric())
        && arg[1..].contains(letter)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(line: &str) -> Vec<Word> {
        line.split(' ')
            .map(|w| Word::Literal(w.to_owned()))
            .collect()
    }

    #[test]
    fn flags_match_in_any_order_and_spelling() {
        let flags = ["-r|-R|--recursive".to_owned(), "-f|--force".to_owned()];
        for line in [
            "-rf x",
            "-r -f x",
            "-fr x",
            "-R -f x",
            "--recursive --force x",
            "-v -rf x",
            "-f --recursive=yes x",
            "-rfv x",
        ] {
            assert!(has_flags(&flags, &words(line), false), "{line}");
        }
        for line in ["-r x", "-f x", "x -- -rf", "-rx", "--recursive x"] {
            assert!(!has_flags(&flags, &words(line), true), "{line}");
        }
        // Abbreviated long options: a restrictive rule only.
        assert!(has_flags(&flags, &words("--rec --for x"), true));
        assert!(!has_flags(&flags, &words("--rec --for x"), false));
        let dynamic = [Word::Dynamic("$opts".into()), Word::Literal("x".into())];
        assert!(has_flags(&flags, &dynamic, true));
        assert!(!has_flags(&flags, &dynamic, false));
    }

    #[test]
    fn programs_are_names_paths_or_globs() {
        let programs = Programs(vec![
            "curl".into(),
            "./scripts/*".into(),
            "/usr/bin/rm".into(),
        ]);
        for program in [
            "curl",
            "/opt/bin/curl",
            "./scripts/test.sh",
            "./scripts/ci/run",
            "/usr/bin/rm",
        ] {
            assert!(programs.names(program), "{program}");
        }
        for program in ["rm", "/bin/rm", "scripts/test.sh", "./scripts", "curly"] {
            assert!(!programs.names(program), "{program}");
        }
        assert!(glob("a*b*c", "aXbYc") && !glob("a*b*c", "aXbY") && glob("*", ""));
    }

    #[test]
    fn a_regex_searches_the_joined_arguments() {
        let pattern: Pattern = serde_json::from_str(r#""(^| )--force( |$)""#).unwrap();
        assert!(pattern.matches(&words("push --force origin"), false));
        assert!(!pattern.matches(&words("push --force-with-lease"), true));
        let dynamic = [Word::Dynamic("$x".into())];
        assert!(pattern.matches(&dynamic, true) && !pattern.matches(&dynamic, false));
        let bad = serde_json::from_str::<Pattern>(r#""(""#).unwrap_err();
        assert!(bad.to_string().contains("regex"), "{bad}");
    }
}
