//! Guards in front of the parser: shapes of a line on which
//! `brush-parser` 0.4 panics, allocates without bound or backtracks
//! exponentially (each found by the `shell` fuzz target). A line one of
//! them refuses is `unparsable`; bash refuses most of them too.

use super::ParseError;

/// A redirection's file descriptor too large for the parser, which
/// panics on one (`brush-parser` 0.4 unwraps it into an `i32`; found by
/// the `shell` fuzz target): a word of digits before a `<` or `>`
/// operator whose number overflows. The line is refused before the parser
/// sees its tokens. (The parser also asks that nothing lie between the
/// two; this asks nothing of the kind, and refuses a little more.)
fn oversized_fd(tokens: &[brush_parser::Token]) -> Option<&str> {
    use brush_parser::Token;
    tokens.windows(2).find_map(|pair| match pair {
        [Token::Word(word, _), Token::Operator(op, _)]
            if op.starts_with(['<', '>'])
                && word.bytes().all(|b| b.is_ascii_digit())
                && word.parse::<i32>().is_err() =>
        {
            Some(word.as_str())
        }
        _ => None,
    })
}

/// How deep parentheses, and separately compound commands, may nest in
/// one script: deeper, the parser's backtracking grows exponentially
/// (`((((…` or `case x in x) case …` left open: seconds at 24 levels,
/// found by the `shell` fuzz target). A component's call would end at its
/// deadline and fail the run; refusing the line fails it at once.
pub const MAX_NESTING: usize = 12;

/// What in `tokens` nests deeper than [`MAX_NESTING`]: parentheses
/// (subshells, arithmetic, patterns) or compound commands (`if`, `case`,
/// loops, `{`). Words are counted wherever they stand — an argument
/// `if` counts too — so a line may be refused that would have parsed.
fn too_deep(tokens: &[brush_parser::Token]) -> Option<&'static str> {
    use brush_parser::Token;
    let (mut parens, mut compounds) = (0usize, 0usize);
    for token in tokens {
        match token {
            Token::Operator(op, _) => match op.as_str() {
                "(" => parens += 1,
                "((" => parens += 2,
                ")" => parens = parens.saturating_sub(1),
                "))" => parens = parens.saturating_sub(2),
                _ => {}
            },
            Token::Word(word, _) => match word.as_str() {
                "if" | "case" | "while" | "until" | "for" | "select" | "{" => compounds += 1,
                "fi" | "esac" | "done" | "}" => compounds = compounds.saturating_sub(1),
                _ => {}
            },
        }
        if parens > MAX_NESTING {
            return Some("parentheses");
        }
        if compounds > MAX_NESTING {
            return Some("compound commands");
        }
    }
    None
}

/// A here-document operator (`<<`, `<<-`) with no delimiter before the
/// end of the text, or whose delimiter starts, after blanks, with an
/// operator character (`$(<< <a )`) or a control character other than a
/// newline (`\r`, `\f`…): on `$(<<  `, `$(<< <a…)` or
/// `<< \r< ` brush-parser's tokenizer allocates without bound (gigabytes
/// in two seconds; found by the `shell` fuzz target), and so on any
/// here-document in a `$(` left open (`$(x << <a `). bash refuses each
/// as a syntax error. The raw text is scanned, quotes and all: such
/// a line is refused before it is tokenized.
fn heredoc_without_tag(text: &str) -> bool {
    let bytes = text.as_bytes();
    // Inside a `$(` left open, any here-document can do it (`$(x << <a `).
    let open_substitution = text.matches("$(").count() > text.matches(')').count();
    bytes.windows(2).enumerate().any(|(at, pair)| {
        if pair != b"<<" {
            return false;
        }
        if open_substitution {
            return true;
        }
        let mut rest = bytes[at + 2..]
            .iter()
            .skip_while(|b| matches!(b, b'<' | b'-'));
        loop {
            match rest.next() {
                None => return true,
                Some(b' ' | b'\t') => {}
                Some(b) => {
                    return (b.is_ascii_control() && *b != b'\n') || b"<>()&;|".contains(b);
                }
            }
        }
    })
}

/// What follows each here-document operator (`<<`, `<<-`) in the raw
/// text; a here-string's `<<<` is none.
fn heredoc_operators(text: &str) -> impl Iterator<Item = &str> {
    text.match_indices("<<").filter_map(|(at, _)| {
        let after = &text[at + 2..];
        let here_string = after.starts_with('<') || text[..at].ends_with('<');
        (!here_string).then_some(after)
    })
}

/// A here-document operator's line that holds a `$(`, `$[` or `${`
/// after the operator, or that a quote or a `\` carries on past its
/// newline. While brush-parser's tokenizer waits for the body, it takes
/// such an expansion apart: `cat <<EOF > "$(curl x)"` comes out as a
/// redirection to `curl` and the words `x` and `"$()"`, the
/// substitution's command gone from what the reader reports — a line that
/// would hide a command from the rules; so does one whose line runs on
/// (`cat <<EOF "a⏎$(curl x)"`, `cat <<EOF x\⏎$(curl x)`). In the
/// delimiter itself (`cat <<a$( <<  `, `<<$[ <\f<$[ <\f<  `) the tokenizer
/// allocates without bound, and with a parenthesis or a quote left open
/// into the body it panics (each found by the `shell` fuzz target); so it
/// does on an operator no newline follows inside a substitution
/// (`8$(<(<<  ea<)`), and such a here-document has no body to read at all.
/// The reason, when one is refused. A `<<` in quotes on its own line is no
/// operator (`echo "a << b"`); a here-document after the expansion on its
/// line (`cat > "$(mktemp)" <<EOF`), or in a substitution
/// (`"$(cat <<'EOF'⏎…⏎EOF⏎)"`), still reads.
fn heredoc_line_refused(text: &str) -> Option<&'static str> {
    if heredoc_operators(text).any(delimiter_is_only_quotes) {
        return Some("a here-document's delimiter is empty (only quotes)");
    }
    let operators = heredoc_operators(text).filter(|after| {
        let at = text.len() - after.len() - 2;
        let line_start = text[..at].rfind('\n').map_or(0, |newline| newline + 1);
        !Quotes::read(&text[line_start..at], false).literal
    });
    for after in operators {
        if !after.contains('\n') {
            return Some("a here-document has no body: no newline follows its operator");
        }
        let line = Quotes::read(after, true);
        if line.carried {
            return Some("a quote or a `\\` carries a here-document's line on past its end");
        }
        let expands = ["$(", "$[", "${"];
        if expands
            .iter()
            .any(|opening| after[..line.end].contains(opening))
        {
            return Some(
                "a here-document's line holds a `$(`, `$[` or `${` after its operator; \
                 put the expansion before the `<<`",
            );
        }
    }
    None
}

/// Whether the here-document delimiter at the start of `after` (past the
/// operator's `-` and blanks) is quotes and nothing else (`<<""`,
/// `<<''`): bash ends such a body at the first empty line, but
/// brush-parser's tokenizer, given no newline after it, allocates without
/// bound (found by the `shell` fuzz target). The word ends at an unquoted
/// blank, newline or operator character.
fn delimiter_is_only_quotes(after: &str) -> bool {
    let word = after
        .trim_start_matches('-')
        .trim_start_matches([' ', '\t']);
    let (mut quote, mut escaped, mut seen, mut kept) = (None, false, false, false);
    for c in word.chars() {
        match (quote, c) {
            _ if escaped => (escaped, kept) = (false, true),
            (Some(open), _) if c == open => quote = None,
            (Some(_), _) => kept = true,
            (None, '\\') => escaped = true,
            (None, '\'' | '"') => (quote, seen) = (Some(c), true),
            (None, ' ' | '\t' | '\n' | ';' | '&' | '|' | '<' | '>' | '(' | ')') => break,
            (None, _) => kept = true,
        }
    }
    seen && !kept
}

/// What is open at a point of a line: plain text, a quote, a
/// substitution, arithmetic or a backquote, innermost last.
#[derive(Clone, Copy, PartialEq)]
enum Open {
    Plain,
    Arithmetic,
    Single,
    Double,
    AnsiC,
    Backquote,
}

/// How a stretch of text reads as to quotes (as bash reads them, roughly:
/// enough to tell an operator from quoted text and to find a line's end).
struct Quotes {
    /// Where it ended: at the first newline outside everything (when
    /// asked to stop there), else the text's end.
    end: usize,
    /// Whether a newline inside something, or after a `\`, came first.
    carried: bool,
    /// Whether it ended where a `<<` is no operator: in a quote or in
    /// arithmetic (`$((1 << 4))`).
    literal: bool,
}

impl Quotes {
    /// Read `text` from outside everything; with `to_line_end`, only up to
    /// its first newline outside everything.
    fn read(text: &str, to_line_end: bool) -> Quotes {
        let bytes = text.as_bytes();
        let (mut open, mut carried, mut at) = (vec![Open::Plain], false, 0);
        while at < bytes.len() {
            let top = *open.last().unwrap_or(&Open::Plain);
            let next = bytes.get(at + 1).copied();
            match (top, bytes[at]) {
                (Open::Plain, b'\n') if open.len() == 1 && to_line_end => break,
                (_, b'\n') => carried = true,
                (Open::Single, b'\'') | (Open::AnsiC, b'\'') | (Open::Double, b'"') => {
                    open.pop();
                }
                (Open::Backquote, b'`') | (Open::Plain, b')') if open.len() > 1 => {
                    open.pop();
                }
                (Open::Single, _) => {}
                (_, b'\\') => {
                    carried |= next == Some(b'\n');
                    at += 1;
                }
                (Open::AnsiC, _) => {}
                (Open::Plain | Open::Double | Open::Backquote, b'$') if next == Some(b'(') => {
                    if bytes.get(at + 2) == Some(&b'(') {
                        open.push(Open::Arithmetic);
                        at += 1;
                    } else {
                        open.push(Open::Plain);
                    }
                    at += 1;
                }
                (Open::Plain, b'(') if next == Some(b'(') => {
                    open.push(Open::Arithmetic);
                    at += 1;
                }
                (Open::Arithmetic, b')') if next == Some(b')') => {
                    open.pop();
                    at += 1;
                }
                (Open::Plain | Open::Backquote, b'$') if next == Some(b'\'') => {
                    open.push(Open::AnsiC);
                    at += 1;
                }
                (Open::Plain | Open::Backquote, b'\'') => open.push(Open::Single),
                (Open::Plain | Open::Backquote, b'"') => open.push(Open::Double),
                (Open::Plain | Open::Arithmetic, b'(') => open.push(Open::Plain),
                (Open::Plain | Open::Double, b'`') => open.push(Open::Backquote),
                _ => {}
            }
            at += 1;
        }
        let top = *open.last().unwrap_or(&Open::Plain);
        Quotes {
            end: at.min(text.len()),
            carried,
            literal: matches!(
                top,
                Open::Single | Open::Double | Open::AnsiC | Open::Arithmetic
            ),
        }
    }
}

/// A here-document (in a line with a `$(`) whose body has a line starting
/// with `)` before its delimiter line: in a command substitution the body
/// swallows the `)` that closes it, and brush-parser's tokenizer panics
/// (found by the `shell` fuzz target). The common
/// `"$(cat <<'EOF' … EOF\n)"` ends its body first and still reads.
fn heredoc_swallows_substitution_end(text: &str) -> bool {
    if !text.contains("$(") {
        return false;
    }
    heredoc_operators(text).any(|after| {
        let tag: String = after
            .trim_start_matches('-')
            .trim_start_matches([' ', '\t'])
            .chars()
            .take_while(|c| !c.is_whitespace() && !";&|()<>".contains(*c))
            .filter(|c| !matches!(c, '\'' | '"' | '\\'))
            .collect();
        let Some((_, body)) = after.split_once('\n') else {
            return false;
        };
        for line in body.lines() {
            if line.trim_start_matches('\t') == tag {
                return false;
            }
            if line.trim_start().starts_with(')') {
                return true;
            }
        }
        false
    })
}

/// How deep `(` and `[` nest in the raw text, counting every `(`, `[`,
/// `)` and `]` alike — in quotes, here-document bodies and substitutions
/// too, where the token-level bound ([`too_deep`]) does not look but the
/// word parser backtracks just the same (`((((…` in a `$(` in a
/// here-document's body, with or without words between; `$[$[$[…` left
/// open, twice as long a level: 65 ms at 16, seconds at 24; each found by
/// the `shell` fuzz target).
fn bracket_depth(text: &str) -> usize {
    let (mut deepest, mut depth) = (0usize, 0usize);
    for c in text.chars() {
        match c {
            '(' | '[' => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            ')' | ']' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    deepest
}

/// A number the word parser would overflow on: digits (after an optional
/// sign) right after a `~` (the directory stack's `~N`, `~+N`, `~-N`) or
/// a `{` or `.` (a brace sequence's `{A..B..C}`), beyond `u32` — the
/// parser unwraps them into a `usize` (32 bits in a component) or an
/// `i64`, and panics (found by the `shell` fuzz target). Such a word is
/// read as one only run time knows, as a word that does not parse is.
pub(super) fn overflowing_number(text: &str) -> bool {
    let bytes = text.as_bytes();
    let mut at = 0;
    while at < bytes.len() {
        if !bytes[at].is_ascii_digit() {
            at += 1;
            continue;
        }
        let start = at;
        while at < bytes.len() && bytes[at].is_ascii_digit() {
            at += 1;
        }
        let mut before = start;
        if before > 0 && matches!(bytes[before - 1], b'+' | b'-') {
            before -= 1;
        }
        let after_opener = before > 0 && matches!(bytes[before - 1], b'~' | b'{' | b'.');
        if after_opener && text[start..at].parse::<u32>().is_err() {
            return true;
        }
    }
    false
}

/// The tokens of `text`, after every guard that looks at the raw text
/// and at the tokens.
pub(super) fn tokens(text: &str) -> Result<Vec<brush_parser::Token>, ParseError> {
    if heredoc_swallows_substitution_end(text) {
        return Err(ParseError(
            "a here-document's body reaches past the `)` of its command substitution".into(),
        ));
    }
    if bracket_depth(text) > MAX_NESTING {
        return Err(ParseError(format!(
            "parentheses and brackets nest more than {MAX_NESTING} deep"
        )));
    }
    if let Some(reason) = heredoc_line_refused(text) {
        return Err(ParseError(reason.into()));
    }
    if heredoc_without_tag(text) {
        return Err(ParseError(
            "a here-document has no delimiter, or one starting with a control character".into(),
        ));
    }
    let options = brush_parser::ParserOptions::default();
    let tokens = brush_parser::uncached_tokenize_str(text, &options.tokenizer_options())
        .map_err(|err| ParseError(err.to_string()))?;
    if let Some(number) = oversized_fd(&tokens) {
        return Err(ParseError(format!(
            "the redirection's file descriptor {number} is out of range"
        )));
    }
    if let Some(what) = too_deep(&tokens) {
        return Err(ParseError(format!(
            "{what} nest more than {MAX_NESTING} deep"
        )));
    }
    Ok(tokens)
}
