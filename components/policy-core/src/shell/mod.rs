//! What a bash command line would run: every simple command in it, each
//! with its program and arguments where they are known before the shell
//! runs, and marked *opaque* where they are not.
//!
//! A rule on a command line is only as good as its reading of the line: a
//! word filter that refuses `curl` is dodged by `${CURL}l`, `c\url`,
//! `$'\x63url'`, `bash -c "curl …"` or `echo $(curl …)` — and bash has
//! many more ways to run a program than a simple command: an arithmetic
//! expression evaluates a variable's text (`x='a[$(curl …)]'; : $((x))`),
//! `trap` and `PS4` take code, an exported function replaces a program,
//! `flock` and `find -exec` run their arguments. A deny-list of such
//! dodges cannot be finished, so this reader reads *positively*: it
//! parses the line with a real shell grammar (`brush-parser`, the parser
//! of the brush shell) and reports a command as known only when it is
//! built from constructs it fully understands —
//!
//! * literal words, quoting, and expansions with no operand that
//!   expands, no subscript but a number, no indirection or
//!   transformation ([`known`]);
//! * arithmetic on numbers alone; redirections; pipelines, lists,
//!   subshells, groups, `if`/`while`/`until`/`for`/`case`; command and
//!   process substitutions (read where they stand); here-documents;
//! * `bash -c`/`sh -c` and `eval` with a literal script (read one level
//!   deeper), wrappers whose arguments are another command (looked
//!   through: `env`, `nice`, `timeout`, `flock`, `xargs`, `find -exec`, the
//!   dynamic loader, …), `awk` and `sed` programs that run no command
//!   ([`programs`], [`languages`]).
//!
//! Everything else makes the command [`Opaque`], with the construct named:
//! an expansion it cannot prove, arithmetic on a name, a builtin that
//! takes code (`trap`, `alias`, `let`, `mapfile -C`, …), an assignment to
//! a variable bash or a program runs as code (`PS4`, `BASH_ENV`,
//! `BASH_FUNC_*`, `LD_PRELOAD`, …), a function definition, an interpreter
//! with inline code (`python -c`, `perl -e`, a shell reading its input), a
//! wrapper option it does not know. A caller decides what an opaque
//! command means; `rules-policy` gives it the operator's `opaque`
//! decision. A line that does not parse — or that the parser's guards
//! ([`guards`]) refuse — is an error: the shell would refuse it too, or
//! read it in a way this module cannot know.

use brush_parser::ast;
use brush_parser::word::WordPiece;

mod guards;
mod known;
mod languages;
mod programs;
#[cfg(test)]
mod tests;

pub use guards::MAX_NESTING;
use programs::Runs;

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

/// Why a command's meaning is not known before it runs: the construct,
/// named.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Opaque {
    /// The program's name is built at run time (`$CMD`, `${CURL}l`, `*`).
    DynamicProgram(String),
    /// It runs shell code that is not literal here (`eval "$x"`,
    /// `bash -c "$s"`, `source file`, a shell reading a file or its input).
    RunsCode(String),
    /// It runs programs this reader does not follow (`strace`, `watch`,
    /// `find -exec` with an expansion that may split).
    RunsPrograms(String),
    /// A wrapper (`env`, `sudo`, `timeout`, …) with an option this reader
    /// does not know, so the program it runs is not certain.
    UnknownWrapperOption(String),
    /// Arithmetic bash evaluates on text: a name, a substitution, a
    /// subscript (`$((x))`, `[[ $x -eq 1 ]]`, `let`, `read 'a[$(…)]'`).
    Arithmetic(String),
    /// A parameter expansion with an operand that expands, a subscript,
    /// an indirection or a transformation (`${x:-$(…)}`, `${!x}`, `${x@P}`).
    Expansion(String),
    /// An assignment to a variable bash or a program runs as code (`PS4`,
    /// `BASH_ENV`, `BASH_FUNC_*`, `LD_PRELOAD`, `GIT_SSH_COMMAND="$x"`), or
    /// a `PATH` that may put a new directory first.
    HookVariable(String),
    /// A builtin that takes code (`trap`, `alias`, `mapfile -C`, `let`,
    /// `declare -i`, `coproc`, …).
    CodeBuiltin(String),
    /// A function definition: its name may stand for any program after it.
    Function(String),
    /// Code for another interpreter written inline (`python -c`, `perl -e`,
    /// an `awk` program that calls `system`, `sed` `e`, `git -c alias.x=!…`).
    InlineCode(String),
    /// A word this reader's parser cannot read.
    Unreadable(String),
    /// Scripts nested deeper than [`MAX_DEPTH`].
    TooDeep,
}

impl std::fmt::Display for Opaque {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Opaque::DynamicProgram(text) => write!(f, "the program {text} is built at run time"),
            Opaque::RunsCode(text) => write!(f, "{text} runs shell code that is not literal here"),
            Opaque::RunsPrograms(text) => {
                write!(f, "{text} runs programs this reader does not follow")
            }
            Opaque::UnknownWrapperOption(program) => {
                write!(f, "{program} has an option that hides what it runs")
            }
            Opaque::Arithmetic(text) => {
                write!(
                    f,
                    "{text} makes bash evaluate text as arithmetic, which can run commands"
                )
            }
            Opaque::Expansion(text) => write!(
                f,
                "the expansion in {text} has an operand, subscript, indirection or transformation bash evaluates at run time"
            ),
            Opaque::HookVariable(name) => {
                write!(
                    f,
                    "{name} is a variable that decides what code bash or a program runs"
                )
            }
            Opaque::CodeBuiltin(text) => write!(f, "{text} takes code bash runs later"),
            Opaque::Function(name) => write!(f, "the function {name} may stand for any program"),
            Opaque::InlineCode(text) => {
                write!(f, "{text} runs code written inline for another interpreter")
            }
            Opaque::Unreadable(text) => {
                write!(f, "the word {text} is not one this reader can read")
            }
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

/// What an environment handed to bash runs before and around the line:
/// an entry bash or a program runs as code (`BASH_ENV`, `BASH_FUNC_*`,
/// `PS4`, `LD_PRELOAD`, …) is opaque; one a program runs as a command line
/// (`GIT_SSH_COMMAND`, `EDITOR`) is read as a script.
pub fn environment<'a>(entries: impl IntoIterator<Item = (&'a str, &'a str)>) -> Vec<Command> {
    let mut reader = Reader {
        found: vec![],
        depth: 0,
    };
    for (name, value) in entries {
        if known::runs_as_code(name) {
            reader.push_opaque(Opaque::HookVariable(name.to_owned()));
        } else if known::runs_value(name) {
            reader.nested(value, || Opaque::HookVariable(name.to_owned()));
        }
    }
    reader.found
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
        let tokens = guards::tokens(text)?;
        let options = options();
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
        let redirects = match command {
            ast::Command::Simple(simple) => return self.simple(simple),
            ast::Command::Compound(compound, redirects) => {
                self.compound(compound);
                redirects
            }
            // A function's name may stand for any program after it (`ls()
            // { curl …; }`, exported to child shells with `export -f`).
            ast::Command::Function(function) => {
                return self.push_opaque(Opaque::Function(function.fname.value.clone()));
            }
            ast::Command::ExtendedTest(test, redirects) => {
                self.test(&test.expr);
                redirects
            }
        };
        for redirect in redirects.iter().flat_map(|r| r.0.iter()) {
            self.redirect(redirect);
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
                self.assigned(&clause.variable_name, None);
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
            // A coprocess's name becomes an array and its file descriptors
            // words; rare in a line an agent writes, and not read here.
            ast::CompoundCommand::Coprocess(_) => {
                self.push_opaque(Opaque::CodeBuiltin("coproc".into()))
            }
        }
    }

    fn test(&mut self, expr: &ast::ExtendedTestExpr) {
        use ast::{BinaryPredicate as B, UnaryPredicate as U};
        match expr {
            ast::ExtendedTestExpr::And(left, right) | ast::ExtendedTestExpr::Or(left, right) => {
                self.test(left);
                self.test(right);
            }
            ast::ExtendedTestExpr::Not(inner) | ast::ExtendedTestExpr::Parenthesized(inner) => {
                self.test(inner)
            }
            ast::ExtendedTestExpr::UnaryTest(predicate, word) => {
                let named = self.word(word);
                // `-v a[$(…)]` evaluates the subscript.
                let names = matches!(
                    predicate,
                    U::ShellVariableIsSetAndAssigned | U::ShellVariableIsSetAndNameRef
                );
                if names && named.literal().is_none_or(|n| known::target(n).is_none()) {
                    self.push_opaque(Opaque::Arithmetic(format!(
                        "[[ {predicate} {} ]]",
                        word.value
                    )));
                }
            }
            ast::ExtendedTestExpr::BinaryTest(predicate, left, right) => {
                self.word(left);
                self.word(right);
                // `-eq` and its kin evaluate both sides as arithmetic.
                let arithmetic = matches!(
                    predicate,
                    B::ArithmeticEqualTo
                        | B::ArithmeticNotEqualTo
                        | B::ArithmeticLessThan
                        | B::ArithmeticLessThanOrEqualTo
                        | B::ArithmeticGreaterThan
                        | B::ArithmeticGreaterThanOrEqualTo
                );
                if arithmetic
                    && !(known::number_word(&left.value) && known::number_word(&right.value))
                {
                    let text = format!("[[ {} {predicate} {} ]]", left.value, right.value);
                    self.push_opaque(Opaque::Arithmetic(text));
                }
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
        } else if !known::arithmetic(&expr.value) {
            self.push_opaque(Opaque::Arithmetic(format!("$(({}))", expr.value)));
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
        let parsed = if guards::overflowing_number(text) {
            None
        } else if here_document {
            brush_parser::word::parse_heredoc(text, &options()).ok()
        } else {
            brush_parser::word::parse(text, &options()).ok()
        };
        // A word the parser cannot read may hold anything bash runs.
        let Some(pieces) = parsed else {
            self.push_opaque(Opaque::Unreadable(text.to_owned()));
            return Word::Dynamic(text.to_owned());
        };
        let mut value = String::new();
        let mut literal = true;
        for piece in &pieces {
            literal &= self.piece(&piece.piece, text, &mut value, false);
        }
        if literal && !here_document {
            Word::Literal(value)
        } else {
            Word::Dynamic(text.to_owned())
        }
    }

    /// Append `piece` (of the word `word`) to `value`; false when it is
    /// not literal. Commands in substitutions are read as they are met; a
    /// construct outside the known grammar is made opaque.
    fn piece(&mut self, piece: &WordPiece, word: &str, value: &mut String, quoted: bool) -> bool {
        match piece {
            WordPiece::Text(text) => {
                value.push_str(text);
                // `$[…]` is bash's old arithmetic.
                if text.contains("$[") {
                    self.push_opaque(Opaque::Arithmetic(word.to_owned()));
                }
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
                    all &= self.piece(&piece.piece, word, value, true);
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
            WordPiece::ParameterExpansion(expr) => {
                if !known::expansion(expr) {
                    self.push_opaque(Opaque::Expansion(word.to_owned()));
                }
                false
            }
            WordPiece::TildeExpansion(_) => false,
        }
    }

    fn simple(&mut self, simple: &ast::SimpleCommand) {
        // The prefix's items come before the program, the suffix's after.
        let mut words: Vec<&ast::Word> = vec![];
        let mut assignments: Vec<&ast::Assignment> = vec![];
        for item in simple.prefix.iter().flat_map(|p| p.0.iter()) {
            self.item(item, &mut words, &mut assignments);
        }
        words.extend(&simple.word_or_name);
        for item in simple.suffix.iter().flat_map(|s| s.0.iter()) {
            // After the program, `NAME=value` is an argument too (`export
            // A=1`, `alias ls='…'`): the program sees it.
            if let ast::CommandPrefixOrSuffixItem::AssignmentWord(_, word) = item {
                words.push(word);
            }
            self.item(item, &mut words, &mut assignments);
        }
        // Substitutions in the words run before the command does.
        let argv: Vec<Word> = words.into_iter().map(|word| self.word(word)).collect();
        let program = argv.first().and_then(Word::literal).map(str::to_owned);
        for assignment in assignments {
            self.assignment(assignment, program.as_deref());
        }
        if !argv.is_empty() {
            self.resolve(argv, vec![]);
        }
    }

    /// Read one prefix or suffix item: words and assignments are
    /// collected, redirections and process substitutions read for the
    /// commands they run.
    fn item<'a>(
        &mut self,
        item: &'a ast::CommandPrefixOrSuffixItem,
        words: &mut Vec<&'a ast::Word>,
        assignments: &mut Vec<&'a ast::Assignment>,
    ) {
        match item {
            ast::CommandPrefixOrSuffixItem::Word(word) => words.push(word),
            ast::CommandPrefixOrSuffixItem::IoRedirect(redirect) => self.redirect(redirect),
            ast::CommandPrefixOrSuffixItem::AssignmentWord(assignment, _) => {
                assignments.push(assignment)
            }
            ast::CommandPrefixOrSuffixItem::ProcessSubstitution(_, subshell) => {
                self.list(&subshell.list)
            }
        }
    }

    /// An assignment (`NAME=value`, `a[i]=v`, `a=([k]=v …)`, before
    /// `program` or alone): its value's substitutions are read; a
    /// subscript bash evaluates is arithmetic; a hook is opaque, except
    /// `IFS` for `read` alone (it splits what `read` reads, and runs
    /// nothing); a variable a program runs as a command line has its
    /// literal value read as a script.
    fn assignment(&mut self, assignment: &ast::Assignment, program: Option<&str>) {
        let value = match &assignment.value {
            ast::AssignmentValue::Scalar(word) => {
                let name =
                    matches!(&assignment.name, ast::AssignmentName::VariableName(n) if n == "PATH");
                if name && !known::path_appends(&word.value) {
                    self.push_opaque(Opaque::HookVariable("PATH".into()));
                }
                Some(self.word(word))
            }
            ast::AssignmentValue::Array(entries) => {
                for (key, value) in entries {
                    if let Some(key) = key {
                        let index = self.word(key);
                        if index
                            .literal()
                            .is_none_or(|i| known::target(&format!("a[{i}]")).is_none())
                        {
                            self.push_opaque(Opaque::Arithmetic(format!("[{}]=", key.value)));
                        }
                    }
                    self.word(value);
                }
                None
            }
        };
        let name = match &assignment.name {
            ast::AssignmentName::VariableName(name) => name.clone(),
            ast::AssignmentName::ArrayElementName(name, index) => {
                if known::target(&format!("{name}[{index}]")).is_none() {
                    self.push_opaque(Opaque::Arithmetic(format!("{name}[{index}]")));
                }
                name.clone()
            }
        };
        if name == "IFS" && program == Some("read") {
            return;
        }
        self.assigned(&name, value.as_ref());
    }

    /// `name` is given `value` (a literal one is known): a hook is opaque,
    /// a command-line variable's literal value is read as a script.
    fn assigned(&mut self, name: &str, value: Option<&Word>) {
        if known::runs_as_code(name) {
            self.push_opaque(Opaque::HookVariable(name.to_owned()));
        } else if known::runs_value(name) {
            match value.and_then(Word::literal) {
                Some(script) => self.nested(script, || Opaque::HookVariable(name.to_owned())),
                None => self.push_opaque(Opaque::HookVariable(name.to_owned())),
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
        match programs::runs(&name, &argv) {
            Runs::Itself => push(self, argv, wrappers, None),
            Runs::Wrapped { at } if at < argv.len() => {
                wrappers.push(program);
                self.resolve(argv[at..].to_vec(), wrappers)
            }
            // A wrapper with nothing after it runs nothing more.
            Runs::Wrapped { .. } => push(self, argv, wrappers, None),
            Runs::Each(commands) => {
                push(self, argv, wrappers.clone(), None);
                for command in commands {
                    let mut wrappers = wrappers.clone();
                    wrappers.push(program.clone());
                    self.resolve(command, wrappers);
                }
            }
            Runs::Script(script) => {
                let before = self.found.len();
                self.nested(&script, || Opaque::RunsCode(script.clone()));
                // The shell or eval itself runs too; what it runs is now
                // among the commands found.
                self.found.insert(
                    before,
                    Command {
                        argv,
                        wrappers,
                        opaque: None,
                    },
                );
            }
            Runs::Opaque(why) => push(self, argv, wrappers, Some(why)),
        }
    }
}

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

/// Whether unquoted `text` is a glob (`*`, `?`, `[…]`) or a brace
/// expansion (`{a,b}`, `{1..3}`), which the shell turns into other words.
/// A lone `[` (the `test` command), `{}` or `{x}` stays as written.
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
