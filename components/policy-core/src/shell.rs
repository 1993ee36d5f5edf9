//! What a bash command line would run: every simple command in it, each
//! with its program and arguments where they are known before the shell
//! runs, and marked *opaque* where they are not.
//!
//! A rule on a command line is only as good as its reading of the line: a
//! word filter that refuses `curl` is dodged by `${CURL}l`, `c\url`,
//! `$'\x63url'`, `bash -c "curl …"` or `echo $(curl …)`. This module
//! parses the line with a real shell grammar (`brush-parser`, the parser of
//! the brush shell) and walks everything that would execute: pipelines,
//! `&&`, `||`, `;`, `&`, subshells, brace groups, `if`/`while`/`until`/
//! `for`/`case` bodies, function bodies, coprocesses, command and process
//! substitutions (in arguments, assignments, redirections, here-documents,
//! `[[ … ]]` tests), and the scripts of `bash -c 'literal'` and
//! `eval literal`. Wrappers that run their argument as a program
//! (`command`, `exec`, `env`, `nohup`, `nice`, `time`, `timeout`, `sudo`,
//! …) are looked through to the program they run.
//!
//! Anything whose meaning depends on run time is [`Opaque`]: a program
//! name built from an expansion, a script from an expansion or a file
//! (`source`, `.`), an arithmetic expression with a substitution, a
//! wrapper with options this reader does not know, programs run from input
//! (`xargs`, `find -exec`). A caller decides what an opaque command means;
//! `rules-policy` gives it the operator's `opaque` decision. A line that
//! does not parse is an error: the shell would refuse it too, or read it
//! in a way this module cannot know.

use brush_parser::ast;
use brush_parser::word::WordPiece;

/// How deep scripts inside scripts (`bash -c`, `eval`, `$( )`) are read;
/// beyond that a command is opaque.
pub const MAX_DEPTH: usize = 8;

/// A word of a command, as far as it is known before the shell runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Word {
    /// Its value after quote removal: the same whatever the environment.
    Literal(String),
    /// It depends on run time (an expansion, a substitution, a glob);
    /// the text as written.
    Dynamic(String),
}

impl Word {
    /// The value, when it is literal.
    pub fn literal(&self) -> Option<&str> {
        match self {
            Word::Literal(value) => Some(value),
            Word::Dynamic(_) => None,
        }
    }

    /// The text as written (dynamic) or the value (literal).
    pub fn text(&self) -> &str {
        match self {
            Word::Literal(value) | Word::Dynamic(value) => value,
        }
    }
}

/// Why a command's meaning is not known before it runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Opaque {
    /// The program's name is built at run time (`$CMD`, `${CURL}l`, `*`).
    DynamicProgram(String),
    /// It runs shell code that is not literal here (`eval "$x"`,
    /// `bash -c "$s"`, `source file`, `. file`).
    RunsCode(String),
    /// It runs programs named at run time (`xargs`, `find -exec`).
    RunsPrograms(String),
    /// A wrapper (`env`, `sudo`, `timeout`, …) with an option this reader
    /// does not know, so the program it runs is not certain.
    UnknownWrapperOption(String),
    /// An arithmetic expression that substitutes a command.
    Arithmetic(String),
    /// Scripts nested deeper than [`MAX_DEPTH`].
    TooDeep,
}

impl std::fmt::Display for Opaque {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Opaque::DynamicProgram(text) => write!(f, "the program {text} is built at run time"),
            Opaque::RunsCode(text) => write!(f, "{text} runs shell code that is not literal here"),
            Opaque::RunsPrograms(text) => write!(f, "{text} runs programs named at run time"),
            Opaque::UnknownWrapperOption(program) => {
                write!(f, "{program} has an option that hides what it runs")
            }
            Opaque::Arithmetic(expr) => write!(f, "the arithmetic {expr} runs a command"),
            Opaque::TooDeep => write!(f, "scripts are nested deeper than {MAX_DEPTH}"),
        }
    }
}

/// One simple command the line would run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Command {
    /// The program and its arguments, wrappers looked through (empty for a
    /// command that only assigns or redirects).
    pub argv: Vec<Word>,
    /// The wrappers looked through to reach `argv`, outermost first.
    pub wrappers: Vec<String>,
    /// Set when what it runs is not known before the shell runs.
    pub opaque: Option<Opaque>,
}

impl Command {
    /// The program, when it is known.
    pub fn program(&self) -> Option<&str> {
        match self.opaque {
            Some(Opaque::DynamicProgram(_)) | Some(Opaque::UnknownWrapperOption(_)) => None,
            _ => self.argv.first().and_then(Word::literal),
        }
    }

    /// The literal arguments after the program, up to the first one that
    /// is not literal.
    pub fn literal_args(&self) -> Vec<&str> {
        self.argv.iter().skip(1).map_while(Word::literal).collect()
    }
}

/// The line could not be parsed as bash.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseError(pub String);

impl std::fmt::Display for ParseError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "cannot parse the command line: {}", self.0)
    }
}

/// Every simple command `line` would run, in source order (the commands of
/// a substitution come before the command that uses its output).
pub fn commands(line: &str) -> Result<Vec<Command>, ParseError> {
    let mut reader = Reader {
        found: vec![],
        depth: 0,
    };
    reader.script(line)?;
    Ok(reader.found)
}

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

/// A here-document (in a line with a `$(`) whose body has a line starting
/// with `)` before its delimiter line: in a command substitution the body
/// swallows the `)` that closes it, and brush-parser's tokenizer panics
/// (found by the `shell` fuzz target). The common
/// `"$(cat <<'EOF' … EOF\n)"` ends its body first and still reads.
fn heredoc_swallows_substitution_end(text: &str) -> bool {
    if !text.contains("$(") {
        return false;
    }
    text.match_indices("<<").any(|(at, _)| {
        let after = &text[at + 2..];
        if after.starts_with('<') || text[..at].ends_with('<') {
            return false;
        }
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

/// How deep `(` nests in the raw text, counting every `(` and `)` —
/// in quotes, here-document bodies and substitutions too, where the
/// token-level bound ([`too_deep`]) does not look but the word parser
/// backtracks just the same (`((((…` in a `$(` in a here-document's
/// body, with or without words between; found by the `shell` fuzz target).
fn paren_depth(text: &str) -> usize {
    let (mut deepest, mut depth) = (0usize, 0usize);
    for c in text.chars() {
        match c {
            '(' => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            ')' => depth = depth.saturating_sub(1),
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
fn overflowing_number(text: &str) -> bool {
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

fn options() -> brush_parser::ParserOptions {
    brush_parser::ParserOptions::default()
}

/// Walks a parsed script, collecting commands.
struct Reader {
    found: Vec<Command>,
    depth: usize,
}

impl Reader {
    fn script(&mut self, text: &str) -> Result<(), ParseError> {
        if heredoc_swallows_substitution_end(text) {
            return Err(ParseError(
                "a here-document's body reaches past the `)` of its command substitution".into(),
            ));
        }
        if paren_depth(text) > MAX_NESTING {
            return Err(ParseError(format!(
                "parentheses nest more than {MAX_NESTING} deep"
            )));
        }
        if heredoc_without_tag(text) {
            return Err(ParseError(
                "a here-document has no delimiter, or one starting with a control character".into(),
            ));
        }
        let options = options();
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
        let program = brush_parser::parse_tokens(&tokens, &options)
            .map_err(|err| ParseError(err.to_string()))?;
        for list in &program.complete_commands {
            self.list(list);
        }
        Ok(())
    }

    /// A nested script (`bash -c`, `eval`, `$( )`): read it one level
    /// deeper; one that does not parse or is too deep makes `opaque`.
    fn nested(&mut self, text: &str, why: impl Fn() -> Opaque) {
        if self.depth >= MAX_DEPTH {
            self.push_opaque(Opaque::TooDeep);
            return;
        }
        self.depth += 1;
        if self.script(text).is_err() {
            self.push_opaque(why());
        }
        self.depth -= 1;
    }

    fn push_opaque(&mut self, why: Opaque) {
        self.found.push(Command {
            argv: vec![],
            wrappers: vec![],
            opaque: Some(why),
        });
    }

    fn list(&mut self, list: &ast::CompoundList) {
        for ast::CompoundListItem(and_or, _) in &list.0 {
            self.pipeline(&and_or.first);
            for next in &and_or.additional {
                match next {
                    ast::AndOr::And(pipeline) | ast::AndOr::Or(pipeline) => self.pipeline(pipeline),
                }
            }
        }
    }

    fn pipeline(&mut self, pipeline: &ast::Pipeline) {
        for command in &pipeline.seq {
            self.command(command);
        }
    }

    fn command(&mut self, command: &ast::Command) {
        match command {
            ast::Command::Simple(simple) => self.simple(simple),
            ast::Command::Compound(compound, redirects) => {
                self.compound(compound);
                if let Some(redirects) = redirects {
                    for redirect in &redirects.0 {
                        self.redirect(redirect);
                    }
                }
            }
            ast::Command::Function(function) => {
                let ast::FunctionBody(body, redirects) = &function.body;
                self.compound(body);
                if let Some(redirects) = redirects {
                    for redirect in &redirects.0 {
                        self.redirect(redirect);
                    }
                }
            }
            ast::Command::ExtendedTest(test, redirects) => {
                self.test(&test.expr);
                if let Some(redirects) = redirects {
                    for redirect in &redirects.0 {
                        self.redirect(redirect);
                    }
                }
            }
        }
    }

    fn compound(&mut self, compound: &ast::CompoundCommand) {
        match compound {
            ast::CompoundCommand::Arithmetic(arithmetic) => self.arithmetic(&arithmetic.expr),
            ast::CompoundCommand::ArithmeticForClause(clause) => {
                for expr in [&clause.initializer, &clause.condition, &clause.updater]
                    .into_iter()
                    .flatten()
                {
                    self.arithmetic(expr);
                }
                self.list(&clause.body.list);
            }
            ast::CompoundCommand::BraceGroup(group) => self.list(&group.list),
            ast::CompoundCommand::Subshell(subshell) => self.list(&subshell.list),
            ast::CompoundCommand::ForClause(clause) => {
                for value in clause.values.iter().flatten() {
                    self.word(value);
                }
                self.list(&clause.body.list);
            }
            ast::CompoundCommand::CaseClause(clause) => {
                self.word(&clause.value);
                for item in &clause.cases {
                    for pattern in &item.patterns {
                        self.word(pattern);
                    }
                    if let Some(list) = &item.cmd {
                        self.list(list);
                    }
                }
            }
            ast::CompoundCommand::IfClause(clause) => {
                self.list(&clause.condition);
                self.list(&clause.then);
                for branch in clause.elses.iter().flatten() {
                    if let Some(condition) = &branch.condition {
                        self.list(condition);
                    }
                    self.list(&branch.body);
                }
            }
            ast::CompoundCommand::WhileClause(clause)
            | ast::CompoundCommand::UntilClause(clause) => {
                let ast::WhileOrUntilClauseCommand(condition, body, _) = clause;
                self.list(condition);
                self.list(&body.list);
            }
            ast::CompoundCommand::Coprocess(coprocess) => self.command(&coprocess.body),
        }
    }

    fn test(&mut self, expr: &ast::ExtendedTestExpr) {
        match expr {
            ast::ExtendedTestExpr::And(left, right) | ast::ExtendedTestExpr::Or(left, right) => {
                self.test(left);
                self.test(right);
            }
            ast::ExtendedTestExpr::Not(inner) | ast::ExtendedTestExpr::Parenthesized(inner) => {
                self.test(inner)
            }
            ast::ExtendedTestExpr::UnaryTest(_, word) => {
                self.word(word);
            }
            ast::ExtendedTestExpr::BinaryTest(_, left, right) => {
                self.word(left);
                self.word(right);
            }
        }
    }

    fn arithmetic(&mut self, expr: &ast::UnexpandedArithmeticExpr) {
        if !arithmetic_shaped(&expr.value) {
            // `( ( curl x ) )` is two subshells to bash, which also falls
            // back to subshells when `((…))` is no arithmetic: what would
            // not evaluate is read as the commands bash runs instead (or,
            // unreadable, made opaque). The shell differential test found it.
            self.nested(&expr.value, || Opaque::Arithmetic(expr.value.clone()));
        } else if expr.value.contains("$(") || expr.value.contains('`') {
            self.push_opaque(Opaque::Arithmetic(expr.value.clone()));
        }
    }

    fn redirect(&mut self, redirect: &ast::IoRedirect) {
        match redirect {
            ast::IoRedirect::File(_, _, target) => match target {
                ast::IoFileRedirectTarget::Filename(word)
                | ast::IoFileRedirectTarget::Duplicate(word) => {
                    self.word(word);
                }
                ast::IoFileRedirectTarget::ProcessSubstitution(_, subshell) => {
                    self.list(&subshell.list)
                }
                ast::IoFileRedirectTarget::Fd(_) => {}
            },
            ast::IoRedirect::HereDocument(_, document) => {
                if document.requires_expansion {
                    self.pieces_of(&document.doc.value, true);
                }
            }
            ast::IoRedirect::HereString(_, word) | ast::IoRedirect::OutputAndError(word, _) => {
                self.word(word);
            }
        }
    }

    /// A word: its value where literal, after reading any substitution in
    /// it (whose commands run whatever the word is used for).
    fn word(&mut self, word: &ast::Word) -> Word {
        self.pieces_of(&word.value, false)
    }

    fn pieces_of(&mut self, text: &str, here_document: bool) -> Word {
        if overflowing_number(text) {
            return Word::Dynamic(text.to_owned());
        }
        let parsed = if here_document {
            brush_parser::word::parse_heredoc(text, &options())
        } else {
            brush_parser::word::parse(text, &options())
        };
        let Ok(pieces) = parsed else {
            return Word::Dynamic(text.to_owned());
        };
        let mut value = String::new();
        let mut literal = true;
        for piece in &pieces {
            literal &= self.piece(&piece.piece, &mut value, false);
        }
        if literal && !here_document {
            Word::Literal(value)
        } else {
            Word::Dynamic(text.to_owned())
        }
    }

    /// Append `piece`'s value to `value`; false when it is not literal.
    /// Commands in substitutions are read as they are met.
    fn piece(&mut self, piece: &WordPiece, value: &mut String, quoted: bool) -> bool {
        match piece {
            WordPiece::Text(text) => {
                value.push_str(text);
                // Unquoted, a glob or a brace expansion makes other words.
                quoted || !expands(text)
            }
            WordPiece::SingleQuotedText(text) => {
                value.push_str(text);
                true
            }
            // `$'…'` decodes escapes (`$'\x63url'` is curl): literal only
            // when there is nothing to decode.
            WordPiece::AnsiCQuotedText(text) => {
                value.push_str(text);
                !text.contains('\\')
            }
            WordPiece::DoubleQuotedSequence(inner)
            | WordPiece::GettextDoubleQuotedSequence(inner) => {
                let mut all = true;
                for piece in inner {
                    all &= self.piece(&piece.piece, value, true);
                }
                all
            }
            WordPiece::EscapeSequence(escaped) => {
                value.push_str(escaped.strip_prefix('\\').unwrap_or(escaped));
                true
            }
            WordPiece::CommandSubstitution(script)
            | WordPiece::BackquotedCommandSubstitution(script) => {
                self.nested(script, || Opaque::RunsCode(script.clone()));
                false
            }
            WordPiece::ArithmeticExpression(expr) => {
                self.arithmetic(expr);
                false
            }
            WordPiece::TildeExpansion(_) | WordPiece::ParameterExpansion(_) => false,
        }
    }

    fn simple(&mut self, simple: &ast::SimpleCommand) {
        // The prefix's items come before the program, the suffix's after.
        let mut words: Vec<&ast::Word> = vec![];
        for item in simple.prefix.iter().flat_map(|p| p.0.iter()) {
            self.item(item, &mut words);
        }
        words.extend(&simple.word_or_name);
        for item in simple.suffix.iter().flat_map(|s| s.0.iter()) {
            self.item(item, &mut words);
        }
        // Substitutions in the words run before the command does.
        let argv: Vec<Word> = words.into_iter().map(|word| self.word(word)).collect();
        if !argv.is_empty() {
            self.resolve(argv, vec![]);
        }
    }

    /// Read one prefix or suffix item: words are collected, everything
    /// else (assignments, redirections, process substitutions) is read
    /// for the commands it runs.
    fn item<'a>(
        &mut self,
        item: &'a ast::CommandPrefixOrSuffixItem,
        words: &mut Vec<&'a ast::Word>,
    ) {
        match item {
            ast::CommandPrefixOrSuffixItem::Word(word) => words.push(word),
            ast::CommandPrefixOrSuffixItem::IoRedirect(redirect) => self.redirect(redirect),
            ast::CommandPrefixOrSuffixItem::AssignmentWord(assignment, _) => {
                match &assignment.value {
                    ast::AssignmentValue::Scalar(word) => {
                        self.word(word);
                    }
                    ast::AssignmentValue::Array(entries) => {
                        for (key, value) in entries {
                            if let Some(key) = key {
                                self.word(key);
                            }
                            self.word(value);
                        }
                    }
                }
            }
            ast::CommandPrefixOrSuffixItem::ProcessSubstitution(_, subshell) => {
                self.list(&subshell.list)
            }
        }
    }

    /// Record the command `argv` runs, looking through wrappers and into
    /// the scripts of shells and `eval`.
    fn resolve(&mut self, argv: Vec<Word>, mut wrappers: Vec<String>) {
        let push = |reader: &mut Reader, argv: Vec<Word>, wrappers, opaque| {
            reader.found.push(Command {
                argv,
                wrappers,
                opaque,
            })
        };
        let program = match &argv[0] {
            Word::Literal(program) => program.clone(),
            Word::Dynamic(text) => {
                let why = Opaque::DynamicProgram(text.clone());
                return push(self, argv, wrappers, Some(why));
            }
        };
        let name = program.rsplit('/').next().unwrap_or(&program).to_owned();
        match wrapped(&name, &argv) {
            Wrapped::Runs(at) if at < argv.len() => {
                wrappers.push(program);
                let rest = argv[at..].to_vec();
                self.resolve(rest, wrappers)
            }
            // A wrapper with nothing after it runs nothing more.
            Wrapped::Runs(_) | Wrapped::Not => match script_of(&name, &argv) {
                Script::None => push(self, argv, wrappers, None),
                Script::Literal(script) => {
                    let before = self.found.len();
                    self.nested(&script, || Opaque::RunsCode(script.clone()));
                    // The shell or eval itself runs too; what it runs is
                    // now among the commands found.
                    self.found.insert(
                        before,
                        Command {
                            argv,
                            wrappers,
                            opaque: None,
                        },
                    );
                }
                Script::Unknown(why) => push(self, argv, wrappers, Some(why)),
            },
            Wrapped::Unknown => {
                let why = Opaque::UnknownWrapperOption(program);
                push(self, argv, wrappers, Some(why))
            }
        }
    }
}

/// Whether unquoted `text` is a glob (`*`, `?`, `[…]`) or a brace
/// expansion (`{a,b}`, `{1..3}`), which the shell turns into other words.
/// A lone `[` (the `test` command), `{}` or `{x}` stays as written.
/// Whether `expr` can be an arithmetic expression: nothing arithmetic
/// lacks (`;`, a newline, quotes) appears, and no two words stand side by
/// side with only blanks between them (`curl x`). Anything else is what
/// bash would run as commands.
fn arithmetic_shaped(expr: &str) -> bool {
    if expr.contains([';', '\n', '\'', '"']) {
        return false;
    }
    // A substitution inside stands for one value (`$(( $(curl x) > 1 ))`).
    let mut flat = String::new();
    let mut chars = expr.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '$' if chars.peek() == Some(&'(') => {
                let mut depth = 0;
                for c in chars.by_ref() {
                    depth += i32::from(c == '(') - i32::from(c == ')');
                    if depth == 0 {
                        break;
                    }
                }
                flat.push('0');
            }
            '`' => {
                for c in chars.by_ref() {
                    if c == '`' {
                        break;
                    }
                }
                flat.push('0');
            }
            c => flat.push(c),
        }
    }
    let word = |c: char| c.is_alphanumeric() || matches!(c, '_' | '$' | '.' | '#' | '@');
    let mut last_word = false;
    let mut blank = false;
    for c in flat.chars() {
        if c.is_whitespace() {
            blank = true;
            continue;
        }
        let is_word = word(c);
        if is_word && last_word && blank {
            return false;
        }
        last_word = is_word;
        blank = false;
    }
    true
}

fn expands(text: &str) -> bool {
    let closed = |open: char, close: char, inside: &dyn Fn(&str) -> bool| {
        text.match_indices(open).any(|(at, _)| {
            text[at + 1..]
                .find(close)
                .is_some_and(|end| inside(&text[at + 1..at + 1 + end]))
        })
    };
    text.contains(['*', '?'])
        || closed('[', ']', &|inside| !inside.is_empty())
        || closed('{', '}', &|inside| {
            inside.contains(',') || inside.contains("..")
        })
}

/// Whether `name` runs another program from its arguments, and where.
enum Wrapped {
    /// Not a wrapper.
    Not,
    /// A wrapper; the program it runs is `argv[n]`.
    Runs(usize),
    /// A wrapper with an option this reader does not know.
    Unknown,
}

/// Where the wrapped program starts in `argv`, for the wrappers known
/// here; options are accepted only where their arity is known.
fn wrapped(name: &str, argv: &[Word]) -> Wrapped {
    let words: Vec<Option<&str>> = argv.iter().map(Word::literal).collect();
    // Skip options of `name` from index 1: `flags` take no value,
    // `valued` take the next word; `--` ends them. The first other word
    // is the program (after `skip_leading` more, e.g. timeout's duration).
    let scan = |flags: &[&str], valued: &[&str], skip_leading: usize| -> Wrapped {
        let mut at = 1;
        while let Some(word) = words.get(at) {
            let Some(word) = word else {
                return Wrapped::Unknown;
            };
            if *word == "--" {
                at += 1;
                break;
            }
            if !word.starts_with('-') || *word == "-" {
                break;
            }
            if flags.contains(word) {
                at += 1;
            } else if valued.contains(word) {
                at += 2;
            } else {
                return Wrapped::Unknown;
            }
        }
        Wrapped::Runs(at + skip_leading)
    };
    match name {
        "command" | "builtin" => match words.get(1) {
            // `command -v x` only looks x up.
            Some(Some("-v" | "-V")) => Wrapped::Not,
            _ => scan(&["-p"], &[], 0),
        },
        "exec" => scan(&["-c", "-l"], &["-a"], 0),
        "stdbuf" => scan(&[], &["-i", "-o", "-e"], 0),
        "nohup" | "time" | "setsid" => scan(&["-p", "-f", "-w"], &[], 0),
        "nice" => scan(&[], &["-n"], 0),
        "timeout" => scan(
            &["--preserve-status", "--foreground", "-v", "--verbose"],
            &["-s", "-k", "--signal", "--kill-after"],
            1,
        ),
        "sudo" | "doas" => scan(&["-E", "-H", "-n", "-i", "-s"], &["-u", "-g"], 0),
        "env" => {
            // Options, then NAME=VALUE entries, then the program.
            let Wrapped::Runs(mut at) =
                scan(&["-i", "-0", "--ignore-environment"], &["-u", "-C"], 0)
            else {
                return Wrapped::Unknown;
            };
            while let Some(Some(word)) = words.get(at) {
                if word.contains('=') {
                    at += 1;
                } else {
                    break;
                }
            }
            if words.get(at).is_some_and(Option::is_none) {
                return Wrapped::Unknown;
            }
            Wrapped::Runs(at)
        }
        _ => Wrapped::Not,
    }
}

/// The shell code a command runs from its arguments, if any.
enum Script {
    /// None: an ordinary program.
    None,
    /// This literal script.
    Literal(String),
    /// Code that is not known here.
    Unknown(Opaque),
}

fn script_of(name: &str, argv: &[Word]) -> Script {
    let text = || argv.iter().map(Word::text).collect::<Vec<_>>().join(" ");
    match name {
        "eval" => {
            let args: Option<Vec<&str>> = argv[1..].iter().map(Word::literal).collect();
            match args {
                Some(args) => Script::Literal(args.join(" ")),
                None => Script::Unknown(Opaque::RunsCode(text())),
            }
        }
        "source" | "." => Script::Unknown(Opaque::RunsCode(text())),
        "sh" | "bash" | "dash" | "zsh" | "ksh" | "mksh" | "ash" => {
            // `SHELL [options] -c SCRIPT …`: the script follows -c (or an
            // option cluster containing c, like -ec or -lc).
            let at = argv.iter().skip(1).position(|word| {
                word.literal()
                    .is_some_and(|w| w.starts_with('-') && !w.starts_with("--") && w.contains('c'))
            });
            match at.map(|at| at + 2) {
                Some(script) => match argv.get(script) {
                    Some(Word::Literal(script)) => Script::Literal(script.clone()),
                    _ => Script::Unknown(Opaque::RunsCode(text())),
                },
                // A shell reading a script file or its input.
                None => Script::Unknown(Opaque::RunsCode(text())),
            }
        }
        "xargs" | "parallel" => Script::Unknown(Opaque::RunsPrograms(text())),
        "find"
            if argv
                .iter()
                .any(|w| matches!(w.literal(), Some("-exec" | "-execdir" | "-ok" | "-okdir"))) =>
        {
            Script::Unknown(Opaque::RunsPrograms(text()))
        }
        _ => Script::None,
    }
}

#[cfg(test)]
mod tests {
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
                    Opaque::TooDeep => "too-deep",
                }
                .to_owned()
            }),
        }
    }

    #[test]
    fn every_case_of_the_case_file_reads_as_written() {
        let cases: Cases = toml::from_str(include_str!("../cases/shell.toml")).unwrap();
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
}
