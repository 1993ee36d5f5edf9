//! The reader's cases: the case file, and the properties a rule needs.

use super::*;

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Cases {
    case: Vec<Case>,
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Case {
    #[serde(default)]
    name: Option<String>,
    line: String,
    #[serde(default)]
    expect: Vec<Expected>,
    #[serde(default)]
    error: bool,
}

#[derive(Debug, PartialEq, Eq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Expected {
    argv: Vec<String>,
    #[serde(default)]
    wrappers: Vec<String>,
    #[serde(default)]
    opaque: Option<String>,
}

/// A command in the case file's notation.
fn written(command: &Command) -> Expected {
    Expected {
        argv: command
            .argv
            .iter()
            .map(|word| match word {
                Word::Literal(value) => value.clone(),
                Word::Dynamic(text) => format!("~{text}"),
            })
            .collect(),
        wrappers: command.wrappers.clone(),
        opaque: command.opaque.as_ref().map(|why| {
            match why {
                Opaque::DynamicProgram(_) => "dynamic-program",
                Opaque::RunsCode(_) => "runs-code",
                Opaque::RunsPrograms(_) => "runs-programs",
                Opaque::UnknownWrapperOption(_) => "unknown-wrapper-option",
                Opaque::Arithmetic(_) => "arithmetic",
                Opaque::Expansion(_) => "expansion",
                Opaque::HookVariable(_) => "hook-variable",
                Opaque::CodeBuiltin(_) => "code-builtin",
                Opaque::Function(_) => "function",
                Opaque::InlineCode(_) => "inline-code",
                Opaque::Unreadable(_) => "unreadable",
                Opaque::TooDeep => "too-deep",
            }
            .to_owned()
        }),
    }
}

#[test]
fn every_case_of_the_case_file_reads_as_written() {
    let cases: Cases = toml::from_str(include_str!("../../cases/shell.toml")).unwrap();
    assert!(cases.case.len() > 40);
    let mut wrong = vec![];
    for case in &cases.case {
        let label = case.name.clone().unwrap_or_else(|| case.line.clone());
        match (commands(&case.line), case.error) {
            (Err(_), true) => {}
            (Ok(found), true) => wrong.push(format!("{label}: parsed as {found:?}")),
            (Err(err), false) => wrong.push(format!("{label}: {err}")),
            (Ok(found), false) => {
                let found: Vec<Expected> = found.iter().map(written).collect();
                if found != case.expect {
                    wrong.push(format!(
                        "{label}:\n  expected {:?}\n  found    {found:?}",
                        case.expect
                    ));
                }
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "{} cases differ:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
}

#[test]
fn a_program_is_known_only_when_literal() {
    let found = commands("timeout 5 git push origin \"$BRANCH\"").unwrap();
    assert_eq!(found[0].program(), Some("git"));
    assert_eq!(found[0].literal_args(), ["push", "origin"]);
    let found = commands("${GIT} push").unwrap();
    assert_eq!(found[0].program(), None);
}

#[test]
fn a_wrapper_whose_last_option_lacks_its_value_is_opaque() {
    // Found by fuzz `shell`: the value's place was read past the line's end.
    for line in ["timeout -s", "sudo -u", "nice -n", "env -u", "xargs -I"] {
        let found = commands(line).unwrap();
        assert!(found[0].opaque.is_some(), "{line}: {found:?}");
    }
    let found = commands("$CMD $'x~63urlx' \u{c}; timeout -s ").unwrap();
    assert!(found.iter().any(|c| c.opaque.is_some()), "{found:?}");
}

#[test]
fn scripts_nest_no_deeper_than_the_bound() {
    let mut line = "curl x".to_owned();
    for _ in 0..=MAX_DEPTH {
        line = format!("eval {}", shell_quote(&line));
    }
    let found = commands(&line).unwrap();
    assert!(
        found.iter().any(|c| c.opaque == Some(Opaque::TooDeep)),
        "{found:?}"
    );
}

/// The authoring guide's example, as written there.
fn refuses(line: &str) -> Option<String> {
    let Ok(commands) = commands(line) else {
        return Some("the command line does not parse".into());
    };
    for command in &commands {
        if command.opaque.is_some() {
            return Some(format!("cannot tell what this runs: {:?}", command.opaque));
        }
        if matches!(command.program(), Some("curl" | "wget")) {
            return Some("network downloads are not allowed here".into());
        }
    }
    None
}

#[test]
fn the_guides_example_refuses_every_dodge_and_allows_the_rest() {
    for dodge in [
        "curl x",
        "${CURL}l x",
        "c\\url x",
        "$'\\x63url' x",
        "eval \"$(printf curl) x\"",
        "bash -c \"curl x\"",
        "echo $(wget y)",
        "env A=1 curl x",
        "git status && curl x",
    ] {
        assert!(refuses(dodge).is_some(), "{dodge} got through");
    }
    for fine in ["git status", "cargo test --workspace", "echo curl"] {
        assert_eq!(refuses(fine), None, "{fine}");
    }
}

fn shell_quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', "'\\''"))
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Dodges {
    dodge: Vec<Dodge>,
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Dodge {
    class: String,
    line: String,
    #[serde(default = "yes")]
    #[allow(dead_code)]
    bash: bool,
}

fn yes() -> bool {
    true
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Ordinary {
    lines: Vec<String>,
}

/// Whether the reader sees `program` run by `line`, or marks it opaque.
fn sees(line: &str, programs: &[&str]) -> bool {
    let Ok(found) = commands(line) else {
        return true;
    };
    found.iter().any(|c| {
        c.opaque.is_some()
            || c.program()
                .is_some_and(|p| programs.contains(&p.rsplit('/').next().unwrap_or(p)))
    })
}

#[test]
fn every_dodge_is_seen_or_opaque() {
    let dodges: Dodges = toml::from_str(include_str!("../../cases/dodges.toml")).unwrap();
    assert!(dodges.dodge.len() >= 100);
    let missed: Vec<String> = dodges
        .dodge
        .iter()
        .filter(|d| !sees(&d.line, &["curl", "rm"]))
        .map(|d| format!("{} ({}): {:?}", d.line, d.class, commands(&d.line)))
        .collect();
    assert!(
        missed.is_empty(),
        "{} missed:\n{}",
        missed.len(),
        missed.join("\n")
    );
}

#[test]
fn every_ordinary_line_is_known() {
    let ordinary: Ordinary = toml::from_str(include_str!("../../cases/ordinary.toml")).unwrap();
    assert!(ordinary.lines.len() >= 200);
    let opaque: Vec<String> = ordinary
        .lines
        .iter()
        .filter_map(|line| match commands(line) {
            Err(err) => Some(format!("{line}: {err}")),
            Ok(found) => found
                .iter()
                .find_map(|c| c.opaque.as_ref())
                .map(|why| format!("{line}: {why}")),
        })
        .collect();
    assert!(
        opaque.is_empty(),
        "{} opaque:\n{}",
        opaque.len(),
        opaque.join("\n")
    );
}
