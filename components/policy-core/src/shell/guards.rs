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
    let mut from = 0;
    while let Some(found) = text[from..].find("<<") {
        if open_substitution {
            return true;
        }
        // Every `<<` of a run of `<` and `-` reads the same delimiter:
        // what follows the run and its blanks (the run is read once).
        let mut at = from + found + 2;
        while matches!(bytes.get(at), Some(b'<' | b'-')) {
            at += 1;
        }
        from = at;
        while matches!(bytes.get(at), Some(b' ' | b'\t')) {
            at += 1;
        }
        match bytes.get(at) {
            None => return true,
            Some(b) if (b.is_ascii_control() && *b != b'\n') || b"<>()&;|".contains(b) => {
                return true;
            }
            Some(_) => {}
        }
    }
    false
}

/// Each here-document operator (`<<`, `<<-`) in the raw text: where it
/// starts and what follows it; a here-string's `<<<` is none.
fn heredoc_operators(text: &str) -> impl Iterator<Item = (usize, &str)> {
    text.match_indices("<<").filter_map(|(at, _)| {
        let after = &text[at + 2..];
        let here_string = after.starts_with('<') || text[..at].ends_with('<');
        (!here_string).then_some((at, after))
    })
}

/// Here-document operators read on one line at most: each is read from
/// its place to its line's end, so a line of thousands would be read
/// thousands of times over (quadratic; a command may be megabytes). A
/// line with more is refused; C++ in a body (`std::cout << a << b`), read
/// as operators too, stays far below it.
const MAX_OPERATORS_PER_LINE: usize = 32;

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
    if heredoc_operators(text).any(|(_, after)| delimiter_is_only_quotes(after)) {
        return Some("a here-document's delimiter is empty (only quotes)");
    }
    // The line each operator is on, read once from its start as far as
    // the operator (whether it is quoted), and how many were on it.
    let mut line = Line::default();
    for (at, after) in heredoc_operators(text) {
        if line.reach(text, at) {
            continue;
        }
        line.operators += 1;
        if line.operators > MAX_OPERATORS_PER_LINE {
            return Some("a line holds more than 32 here-document operators");
        }
        if let Some(reason) = operator_line_refused(after) {
            return Some(reason);
        }
    }
    None
}

/// Why the line after an unquoted here-document operator (`after`) is
/// refused, if it is (see [`heredoc_line_refused`]).
fn operator_line_refused(after: &str) -> Option<&'static str> {
    let Some(newline) = after.find('\n') else {
        return Some("a here-document has no body: no newline follows its operator");
    };
    // Read no further than the line's newline: a line read on past it
    // is carried, and the rest of the text need not be read.
    let line = Quotes::read(&after[..=newline], true);
    if line.carried || line.end > newline {
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
    None
}

/// The line [`heredoc_line_refused`] is on: how it reads as to quotes
/// from its start up to the last operator looked at, and how many
/// unquoted operators it holds so far. Operators come in order, so each
/// byte of the text is read once.
#[derive(Default)]
struct Line {
    quotes: Quotes,
    operators: usize,
}

impl Line {
    /// Move on to the operator at `at` (on this line or a later one);
    /// whether it is quoted (or in arithmetic): no operator.
    fn reach(&mut self, text: &str, at: usize) -> bool {
        let read = self.quotes.end;
        if let Some(newline) = text[read..at].rfind('\n') {
            *self = Line::default();
            self.quotes.end = read + newline + 1;
        }
        self.quotes.advance(text.as_bytes(), at, false);
        self.quotes.literal()
    }
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
/// It can be read on from where it stopped.
#[derive(Default)]
struct Quotes {
    /// What is open, innermost last (outside everything: nothing).
    open: Vec<Open>,
    /// Where it stopped: at the first newline outside everything (when
    /// asked to stop there), else where it was asked to.
    end: usize,
    /// Whether a newline inside something, or after a `\`, came first.
    carried: bool,
}

impl Quotes {
    /// Read `text` from outside everything; with `to_line_end`, only up to
    /// its first newline outside everything.
    fn read(text: &str, to_line_end: bool) -> Quotes {
        let mut quotes = Quotes::default();
        quotes.advance(text.as_bytes(), text.len(), to_line_end);
        quotes
    }

    /// Whether it stopped where a `<<` is no operator: in a quote or in
    /// arithmetic (`$((1 << 4))`).
    fn literal(&self) -> bool {
        matches!(
            self.open.last(),
            Some(Open::Single | Open::Double | Open::AnsiC | Open::Arithmetic)
        )
    }

    /// Read on from where it stopped up to `to` in `bytes` (with
    /// `to_line_end`, stopping at a newline outside everything).
    fn advance(&mut self, bytes: &[u8], to: usize, to_line_end: bool) {
        let mut at = self.end;
        while at < to {
            let top = self.open.last().copied().unwrap_or(Open::Plain);
            let next = bytes.get(at + 1).copied();
            match (top, bytes[at]) {
                (Open::Plain, b'\n') if self.open.is_empty() && to_line_end => break,
                (_, b'\n') => self.carried = true,
                (Open::Single, b'\'') | (Open::AnsiC, b'\'') | (Open::Double, b'"') => {
                    self.open.pop();
                }
                (Open::Backquote, b'`') | (Open::Plain, b')') if !self.open.is_empty() => {
                    self.open.pop();
                }
                (Open::Single, _) => {}
                (_, b'\\') => {
                    self.carried |= next == Some(b'\n');
                    at += 1;
                }
                (Open::AnsiC, _) => {}
                (Open::Plain | Open::Double | Open::Backquote, b'$') if next == Some(b'(') => {
                    let arithmetic = bytes.get(at + 2) == Some(&b'(');
                    self.open.push(match arithmetic {
                        true => Open::Arithmetic,
                        false => Open::Plain,
                    });
                    at += 1 + usize::from(arithmetic);
                }
                (Open::Plain, b'(') if next == Some(b'(') => {
                    self.open.push(Open::Arithmetic);
                    at += 1;
                }
                (Open::Arithmetic, b')') if next == Some(b')') => {
                    self.open.pop();
                    at += 1;
                }
                (Open::Plain | Open::Backquote, b'$') if next == Some(b'\'') => {
                    self.open.push(Open::AnsiC);
                    at += 1;
                }
                (Open::Plain | Open::Backquote, b'\'') => self.open.push(Open::Single),
                (Open::Plain | Open::Backquote, b'"') => self.open.push(Open::Double),
                (Open::Plain | Open::Arithmetic, b'(') => self.open.push(Open::Plain),
                (Open::Plain | Open::Double, b'`') => self.open.push(Open::Backquote),
                _ => {}
            }
            at += 1;
        }
        self.end = at.min(bytes.len());
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
    let bodies = Bodies::of(text);
    heredoc_operators(text).any(|(at, after)| {
        let tag: String = after
            .trim_start_matches('-')
            .trim_start_matches([' ', '\t'])
            .chars()
            .take_while(|c| !c.is_whitespace() && !";&|()<>".contains(*c))
            .filter(|c| !matches!(c, '\'' | '"' | '\\'))
            .collect();
        let Some(newline) = after.find('\n') else {
            return false;
        };
        bodies.closes_before_tag(at + 2 + newline, &tag)
    })
}

/// The text's lines, indexed once, so that each here-document's body is
/// looked up instead of read (a command of thousands of here-documents
/// with no delimiter line would be read once per operator: quadratic).
struct Bodies<'a> {
    /// Where each newline of the text is.
    newlines: Vec<usize>,
    /// The text's lines (as `str::lines` splits them).
    lines: usize,
    /// For each line (and one past the last), the first line from it on
    /// that starts with `)` (after blanks); `lines` when none does.
    next_close: Vec<usize>,
    /// Each line (without its leading tabs) and where it appears, in order.
    tags: std::collections::HashMap<&'a str, Vec<usize>>,
}

impl<'a> Bodies<'a> {
    fn of(text: &'a str) -> Bodies<'a> {
        let lines: Vec<&str> = text.lines().collect();
        let mut next_close = vec![lines.len(); lines.len() + 1];
        for (index, line) in lines.iter().enumerate().rev() {
            next_close[index] = match line.trim_start().starts_with(')') {
                true => index,
                false => next_close[index + 1],
            };
        }
        let mut tags: std::collections::HashMap<&str, Vec<usize>> = Default::default();
        for (index, line) in lines.iter().enumerate() {
            tags.entry(line.trim_start_matches('\t'))
                .or_default()
                .push(index);
        }
        Bodies {
            newlines: text.match_indices('\n').map(|(at, _)| at).collect(),
            lines: lines.len(),
            next_close,
            tags,
        }
    }

    /// Whether the body that starts after the newline at `newline` has a
    /// line starting with `)` before its delimiter line `tag` (or has one
    /// and no delimiter line).
    fn closes_before_tag(&self, newline: usize, tag: &str) -> bool {
        // The body's first line is the one after this newline's.
        let first = self.newlines.partition_point(|&at| at <= newline);
        let Some(&close) = self.next_close.get(first) else {
            return false;
        };
        let ends = self.tags.get(tag).and_then(|at| {
            let from = at.partition_point(|&index| index < first);
            at.get(from).copied()
        });
        close < ends.unwrap_or(self.lines)
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Commands of hundreds of kilobytes shaped to make a guard read the
    /// text once per here-document operator (each took seconds when the
    /// guards did), and what each guard says of them.
    fn shapes() -> Vec<(&'static str, String, bool)> {
        let body = "std::cout << a << b << c;\n".repeat(16_000);
        vec![
            (
                "operators on one line",
                "cat <<EOF ".repeat(40_000) + "\n",
                true,
            ),
            (
                "operators on lines without delimiters",
                "echo $(x)\n".to_owned() + &"cat <<EOF\n".repeat(40_000),
                false,
            ),
            (
                "quoted operators",
                format!("echo \"{}\"", "<< a ".repeat(80_000)),
                false,
            ),
            (
                "C++ in a body",
                format!("cat <<'EOF' > a.cpp\n{body}EOF\n"),
                false,
            ),
            (
                "substitutions with delimiters",
                "echo \"$(cat <<'EOF'\nx\nEOF\n)\"\n".repeat(20_000),
                false,
            ),
        ]
    }

    #[test]
    fn the_here_document_guards_read_a_long_command_in_linear_time() {
        for (name, text, refused) in shapes() {
            let started = std::time::Instant::now();
            let line = heredoc_line_refused(&text);
            let swallows = heredoc_swallows_substitution_end(&text);
            let took = started.elapsed();
            // Linear: tens of milliseconds unoptimised; once per operator
            // it was minutes.
            assert!(
                took < std::time::Duration::from_secs(15),
                "{name}: {} bytes took {took:?}",
                text.len()
            );
            assert_eq!(line.is_some(), refused, "{name}: {line:?}");
            assert!(!swallows, "{name}");
        }
    }

    #[test]
    fn a_long_run_of_operator_characters_is_read_once() {
        // Each `<<` of the run was read to the run's end: 100 KB took 2 s.
        for text in ["<".repeat(400_000) + "x", "<-".repeat(200_000) + "x"] {
            let started = std::time::Instant::now();
            assert!(!heredoc_without_tag(&text));
            let took = started.elapsed();
            assert!(took < std::time::Duration::from_secs(15), "{took:?}");
        }
        assert!(heredoc_without_tag(&("<".repeat(1_000) + " (")));
        assert!(heredoc_without_tag(&("<".repeat(1_000) + "  ")));
        assert!(!heredoc_without_tag("cat <<-  EOF"));
        assert!(heredoc_without_tag("cat <<-  \r"));
    }

    #[test]
    fn a_line_of_more_operators_than_the_bound_is_refused_and_says_the_bound() {
        let at_bound = "cat <<EOF ".repeat(MAX_OPERATORS_PER_LINE) + "\nEOF\n";
        assert_eq!(heredoc_line_refused(&at_bound), None);
        let over = "cat <<EOF ".repeat(MAX_OPERATORS_PER_LINE + 1) + "\nEOF\n";
        let reason = heredoc_line_refused(&over).unwrap();
        assert!(
            reason.contains(&MAX_OPERATORS_PER_LINE.to_string()),
            "{reason}"
        );
        // Quoted ones are no operators, however many.
        let quoted = format!(
            "echo \"{}\" <<EOF\nx\nEOF\n",
            "<< a ".repeat(MAX_OPERATORS_PER_LINE * 4)
        );
        assert_eq!(heredoc_line_refused(&quoted), None);
    }

    #[test]
    fn a_body_is_found_swallowing_the_substitutions_end_after_other_bodies() {
        let ends_first = "echo \"$(cat <<'EOF'\nx\nEOF\n)\" \"$(cat <<A\ny\nA\n)\"";
        assert!(!heredoc_swallows_substitution_end(ends_first));
        let swallows = "echo \"$(cat <<'EOF'\nx\nEOF\n)\" \"$(cat <<A\ny\n)\nA\n\"";
        assert!(heredoc_swallows_substitution_end(swallows));
        let no_tag = "echo $(cat <<A\ny\n)";
        assert!(heredoc_swallows_substitution_end(no_tag));
        let tabbed = "echo $(cat <<-A\n\ty\n\tA\n)";
        assert!(!heredoc_swallows_substitution_end(tabbed));
    }
}
