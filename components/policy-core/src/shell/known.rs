//! The closed grammar's small parts: the expansions, arithmetic and
//! variable names whose meaning this reader can prove before bash runs.
//! Each check answers *known* only for shapes it can prove; the reader
//! makes everything else opaque. A check that says "no" to an ordinary
//! shape costs an operator's decision; one that says "yes" to a shape
//! bash evaluates lets a command run unseen — so they say "yes" rarely.
//!
//! What bash evaluates that a reader of words does not see: an array
//! subscript or an arithmetic expression evaluates the *text* of every
//! variable it names as arithmetic again, and arithmetic runs the command
//! substitutions in that text (`x='a[$(curl …)]'; echo $((x))`); an
//! operand of `${…}` is expanded even inside single quotes when the
//! expansion is double-quoted (`"${x:-'$(curl …)'}"`); `${x@P}` expands a
//! prompt; indirection (`${!x}`) reads a name from a value.

use brush_parser::word::{Parameter, ParameterExpr};

/// Variables whose value bash or the programs it starts run as code, or
/// that change how bash reads code: assigning one makes the line opaque.
/// (`PS4` with `set -x`, `BASH_ENV` for every non-interactive bash,
/// exported functions, the dynamic loader's preloads, git's injected
/// configuration.)
pub(super) fn runs_as_code(name: &str) -> bool {
    matches!(
        name,
        "PS0"
            | "PS1"
            | "PS2"
            | "PS3"
            | "PS4"
            | "PROMPT_COMMAND"
            | "BASH_ENV"
            | "ENV"
            | "SHELLOPTS"
            | "BASHOPTS"
            | "BASH_LOADABLES_PATH"
            | "IFS"
            | "GCONV_PATH"
            | "GIT_CONFIG_PARAMETERS"
            | "GIT_CONFIG_COUNT"
            | "GIT_CONFIG"
            | "GIT_CONFIG_GLOBAL"
            | "GIT_CONFIG_SYSTEM"
            | "GIT_EXEC_PATH"
            | "GIT_TEMPLATE_DIR"
            | "LESSOPEN"
            | "LESSCLOSE"
    ) || ["BASH_FUNC_", "LD_", "GIT_CONFIG_KEY_", "GIT_CONFIG_VALUE_"]
        .iter()
        .any(|prefix| name.starts_with(prefix))
}

/// Variables whose value a program runs as a command line (`sh -c
/// "$EDITOR …"`, git's `GIT_SSH_COMMAND`): a literal value is read as a
/// script, one known only at run time is opaque.
pub(super) fn runs_value(name: &str) -> bool {
    matches!(
        name,
        "EDITOR"
            | "VISUAL"
            | "PAGER"
            | "MANPAGER"
            | "BROWSER"
            | "GIT_EDITOR"
            | "GIT_SEQUENCE_EDITOR"
            | "GIT_PAGER"
            | "GIT_SSH"
            | "GIT_SSH_COMMAND"
            | "GIT_EXTERNAL_DIFF"
            | "GIT_ASKPASS"
            | "GIT_PROXY_COMMAND"
            | "SSH_ASKPASS"
            | "SUDO_ASKPASS"
    )
}

/// A value for `PATH` that keeps every directory it had, first (`$PATH:…`,
/// `"${PATH}:…"`): a program found before is found the same. Any other
/// value may put a directory the line wrote in front (`PATH=.:$PATH git`
/// runs `./git`), so the program a name stands for is not known.
pub(super) fn path_appends(raw: &str) -> bool {
    let bare = raw.trim_start_matches('"');
    ["$PATH:", "${PATH}:"].iter().any(|p| bare.starts_with(p))
        || matches!(bare.trim_end_matches('"'), "$PATH" | "${PATH}")
}

/// A shell variable name: a letter or `_`, then letters, digits or `_`.
pub(super) fn is_name(text: &str) -> bool {
    let mut chars = text.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// An array subscript bash cannot evaluate into anything else: a number
/// (an associative array's key would be safe too, but which kind of array
/// a name is, is only known at run time).
fn literal_index(index: &str) -> bool {
    let digits = index.strip_prefix('-').unwrap_or(index);
    !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())
}

/// The variable a builtin's operand assigns or names (`NAME`,
/// `NAME=value`, `NAME+=value`, `NAME[2]=value`), when it is one this
/// reader can prove; `None` for a subscript bash would evaluate
/// (`a[$(…)]`, `a[x]`) or anything that is not a name.
pub(super) fn target(text: &str) -> Option<&str> {
    let left = text.split_once('=').map_or(text, |(left, _)| left);
    let left = left.strip_suffix('+').unwrap_or(left);
    let name = match left.split_once('[') {
        Some((name, rest)) => {
            let index = rest.strip_suffix(']')?;
            literal_index(index).then_some(name)?
        }
        None => left,
    };
    is_name(name).then_some(name)
}

fn parameter_known(parameter: &Parameter) -> bool {
    match parameter {
        Parameter::Positional(_)
        | Parameter::Special(_)
        | Parameter::Named(_)
        | Parameter::NamedWithAllIndices { .. } => true,
        Parameter::NamedWithIndex { index, .. } => literal_index(index),
    }
}

/// An operand (`${x:-OPERAND}`, a pattern, a replacement) that expands to
/// nothing but itself: no expansion, substitution, quote or escape in it.
fn operand_known(text: &str) -> bool {
    !text.contains(['$', '`', '\\', '\'', '"', '(', ')', '<', '>', '{', '}'])
}

/// Whether bash's expansion of `expr` is a value and nothing more: a
/// parameter (no indirection, a subscript only a number), its length, or
/// a default, alternative, pattern removal, case change or replacement
/// whose operands are plain text. Transformations (`${x@P}`), indirection
/// (`${!x}`) and operands that expand are not.
pub(super) fn expansion(expr: &ParameterExpr) -> bool {
    use ParameterExpr as E;
    let plain = |parameter: &Parameter, indirect: &bool| !indirect && parameter_known(parameter);
    let operand = |text: &Option<String>| text.as_deref().is_none_or(operand_known);
    match expr {
        E::Parameter {
            parameter,
            indirect,
        }
        | E::ParameterLength {
            parameter,
            indirect,
        } => plain(parameter, indirect),
        E::UseDefaultValues {
            parameter,
            indirect,
            default_value: text,
            ..
        }
        | E::UseAlternativeValue {
            parameter,
            indirect,
            alternative_value: text,
            ..
        }
        | E::IndicateErrorIfNullOrUnset {
            parameter,
            indirect,
            error_message: text,
            ..
        }
        | E::RemoveSmallestSuffixPattern {
            parameter,
            indirect,
            pattern: text,
        }
        | E::RemoveLargestSuffixPattern {
            parameter,
            indirect,
            pattern: text,
        }
        | E::RemoveSmallestPrefixPattern {
            parameter,
            indirect,
            pattern: text,
        }
        | E::RemoveLargestPrefixPattern {
            parameter,
            indirect,
            pattern: text,
        }
        | E::UppercaseFirstChar {
            parameter,
            indirect,
            pattern: text,
        }
        | E::UppercasePattern {
            parameter,
            indirect,
            pattern: text,
        }
        | E::LowercaseFirstChar {
            parameter,
            indirect,
            pattern: text,
        }
        | E::LowercasePattern {
            parameter,
            indirect,
            pattern: text,
        } => plain(parameter, indirect) && operand(text),
        E::AssignDefaultValues {
            parameter,
            indirect,
            default_value,
            ..
        } => {
            let assignable = matches!(parameter, Parameter::Named(name)
                if !runs_as_code(name) && !runs_value(name));
            !indirect && assignable && operand(default_value)
        }
        E::ReplaceSubstring {
            parameter,
            indirect,
            pattern,
            replacement,
            ..
        } => plain(parameter, indirect) && operand_known(pattern) && operand(replacement),
        E::Substring {
            parameter,
            indirect,
            offset,
            length,
        } => {
            plain(parameter, indirect)
                && arithmetic(&offset.value)
                && length.as_ref().is_none_or(|l| arithmetic(&l.value))
        }
        E::Transform { .. } => false,
        E::VariableNames { .. } | E::MemberKeys { .. } => true,
    }
}

/// Whether the arithmetic `expr` evaluates to a number and nothing more:
/// numbers (`10`, `0x1f`, `16#ff`), operators, parentheses, and the
/// special parameters that are always numbers (`$#`, `$?`, `$$`, `$!`).
/// A name (`x`, `$x`, `a[i]`) is not: bash evaluates its text as
/// arithmetic again, command substitutions in subscripts included.
pub(super) fn arithmetic(expr: &str) -> bool {
    let mut chars = expr.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '0'..='9' => {
                while chars
                    .next_if(|c| c.is_ascii_alphanumeric() || matches!(c, '#' | '_' | '@'))
                    .is_some()
                {}
            }
            '$' => {
                if chars
                    .next_if(|c| matches!(c, '#' | '?' | '$' | '!'))
                    .is_none()
                {
                    return false;
                }
            }
            c if c.is_whitespace() => {}
            '+' | '-' | '*' | '/' | '%' | '<' | '>' | '=' | '!' | '&' | '|' | '^' | '~' | '?'
            | ':' | '(' | ')' | ',' => {}
            _ => return false,
        }
    }
    true
}

/// A word `[[ … -eq … ]]` compares as arithmetic that is a number and
/// nothing more: an integer, or `$#`/`$?`/`$$`/`$!`, quoted or not.
pub(super) fn number_word(raw: &str) -> bool {
    let bare = raw
        .strip_prefix('"')
        .and_then(|r| r.strip_suffix('"'))
        .unwrap_or(raw);
    literal_index(bare) || matches!(bare, "$#" | "$?" | "$$" | "$!")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_numbers_and_operators_are_known_arithmetic() {
        for known in [
            "1 + 2",
            "(3*4) % 5",
            "0x1f | 16#ff",
            "$# > 0",
            "$? == 0",
            "1 ? 2 : 3",
        ] {
            assert!(arithmetic(known), "{known}");
        }
        for not in [
            "x",
            "$x + 1",
            "a[$(curl x)]",
            "i++",
            "$((1))x",
            "`id`",
            "$(id)",
            "_",
        ] {
            assert!(!arithmetic(not), "{not}");
        }
    }

    #[test]
    fn a_target_is_a_name_or_a_numbered_element() {
        assert_eq!(target("PATH=/bin"), Some("PATH"));
        assert_eq!(target("a+=x"), Some("a"));
        assert_eq!(target("a[3]=x"), Some("a"));
        assert_eq!(target("line"), Some("line"));
        for not in ["a[$(curl x)]", "a[i]=1", "1x", "a[", "", "-v"] {
            assert_eq!(target(not), None, "{not}");
        }
    }

    #[test]
    fn hooks_are_named() {
        for hook in [
            "PS4",
            "BASH_ENV",
            "BASH_FUNC_ls%%",
            "LD_PRELOAD",
            "IFS",
            "GIT_CONFIG_KEY_0",
        ] {
            assert!(runs_as_code(hook), "{hook}");
        }
        for plain in ["HOME", "PATH", "RUST_LOG", "CI"] {
            assert!(!runs_as_code(plain) && !runs_value(plain), "{plain}");
        }
        assert!(runs_value("GIT_SSH_COMMAND") && runs_value("EDITOR"));
    }
}
