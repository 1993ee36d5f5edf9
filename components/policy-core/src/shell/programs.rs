//! What a simple command runs besides itself, by its program: builtins
//! that take code or evaluate names, wrappers whose arguments are another
//! command (looked through), shells and `eval` with a literal script
//! (read), interpreters with inline code and programs that run programs
//! this reader does not follow (opaque).
//!
//! Every table here is a list of what is *known*. A wrapper's options are
//! accepted only where their arity is known, a shell's only where they
//! read no file, so an option this reader has not met hides nothing: it
//! makes the command opaque. A program that is in no table is an ordinary
//! program — and what an unknown program runs, no reader of the line can
//! see (a script in the workspace, a Makefile's recipes): rule sets that
//! must hold start from `default = "deny"` and allow what they know.

use super::known;
use super::languages;
use super::{Opaque, Word};

/// What running a command means for the programs it runs.
pub(super) enum Runs {
    /// It runs nothing this reader needs to follow.
    Itself,
    /// A wrapper: it runs `argv[at..]`. Nothing after `at`: it runs
    /// nothing more.
    Wrapped { at: usize },
    /// It runs each of these commands too (`find -exec … ;`, `xargs`).
    Each(Vec<Vec<Word>>),
    /// It runs this literal shell script (`bash -c`, `eval`, `flock -c`).
    Script(String),
    /// What it runs is not known here.
    Opaque(Opaque),
}

/// The programs that run another program this reader does not look
/// through (their options are many, or they run it elsewhere).
const RUNNERS: &[&str] = &[
    "strace",
    "ltrace",
    "gdb",
    "lldb",
    "valgrind",
    "perf",
    "watch",
    "script",
    "su",
    "runuser",
    "nsenter",
    "unshare",
    "chroot",
    "setpriv",
    "capsh",
    "systemd-run",
    "parallel",
    "expect",
    "unbuffer",
    "at",
    "batch",
    "entr",
    "tmux",
    "screen",
    "xvfb-run",
    "dbus-run-session",
    "firejail",
    "bwrap",
    "fakeroot",
    "eatmydata",
    "proot",
    "pkexec",
    "zsh",
    "fish",
    "csh",
    "tcsh",
];

/// Programs that run commands from their input or their arguments as a
/// matter of course: `ed`'s and `dc`'s `!`, `m4`'s `esyscmd`, an
/// editor's `:!`, a database shell's `.shell` or `\!`, a language's
/// read-eval loop.
const COMMAND_READERS: &[&str] = &[
    "ed", "red", "ex", "vi", "vim", "nvim", "view", "emacs", "dc", "m4", "irb", "ipython",
    "ipython3", "jshell", "julia", "R", "guile", "tclsh", "wish", "sqlite3", "psql", "mysql",
    "mariadb", "ftp", "sftp", "lftp",
];

/// What `argv` (program `name`, its base name) runs besides itself.
pub(super) fn runs(name: &str, argv: &[Word]) -> Runs {
    let words: Vec<Option<&str>> = argv.iter().map(Word::literal).collect();
    let text = || argv.iter().map(Word::text).collect::<Vec<_>>().join(" ");
    if let Some(why) = builtin(name, argv, &words) {
        return Runs::Opaque(why);
    }
    if let Some(runs) = wrapper(name, argv, &words) {
        return match runs {
            Some(runs) => runs,
            None => Runs::Opaque(Opaque::UnknownWrapperOption(name.to_owned())),
        };
    }
    match name {
        "eval" => match words[1..].iter().copied().collect::<Option<Vec<&str>>>() {
            Some(args) => Runs::Script(args.join(" ")),
            None => Runs::Opaque(Opaque::RunsCode(text())),
        },
        "source" | "." => Runs::Opaque(Opaque::RunsCode(text())),
        "sh" | "bash" | "dash" | "ksh" | "mksh" | "ash" | "rbash" => shell(&words, text),
        "find" => find(argv, text),
        "git" => git(&words, text),
        _ if RUNNERS.contains(&name) => Runs::Opaque(Opaque::RunsPrograms(text())),
        _ if COMMAND_READERS.contains(&name) => Runs::Opaque(Opaque::InlineCode(text())),
        _ => match interpreter(name, &words) {
            Some(false) => Runs::Opaque(Opaque::InlineCode(text())),
            Some(true) | None => Runs::Itself,
        },
    }
}

/// A builtin that takes code or evaluates a name bash reads from text:
/// opaque when its arguments are any but the known harmless ones.
fn builtin(name: &str, argv: &[Word], words: &[Option<&str>]) -> Option<Opaque> {
    let text = || argv.iter().map(Word::text).collect::<Vec<_>>().join(" ");
    let code = || Some(Opaque::CodeBuiltin(text()));
    let args = &words[1..];
    let has = |flags: &[&str]| args.iter().any(|w| w.is_none_or(|w| flags.contains(&w)));
    match name {
        // `trap`, `trap -l`, `trap -p`, `trap - SIG` and `trap '' SIG` set no code.
        "trap" => match args.first() {
            None | Some(Some("-l" | "-p" | "-" | "")) => None,
            _ => code(),
        },
        "alias" => (!args.iter().all(|w| *w == Some("-p")))
            .then(code)
            .flatten(),
        "enable" | "complete" | "bind" | "fc" | "let" | "compgen" => code(),
        "hash" if has(&["-p"]) => code(),
        "jobs" if has(&["-x"]) => code(),
        "mapfile" | "readarray" if has(&["-C"]) => code(),
        "declare" | "typeset" | "local" | "export" | "readonly" => declaration(argv),
        "unset" | "mapfile" | "readarray" | "read" | "getopts" | "printf" | "wait" | "test"
        | "[" => names(name, argv),
        _ => None,
    }
}

/// `declare`/`export`/`local`/…: options that give no variable a meaning
/// bash evaluates (not `-i`, `-n`), and operands that are plain names or
/// numbered elements, none a hook.
fn declaration(argv: &[Word]) -> Option<Opaque> {
    let text = || argv.iter().map(Word::text).collect::<Vec<_>>().join(" ");
    for word in &argv[1..] {
        let raw = word.text();
        if let Some(letters) = raw.strip_prefix('-').or_else(|| raw.strip_prefix('+')) {
            if word.literal().is_none() || !letters.chars().all(|c| "aAfFgrxtlupU".contains(c)) {
                return Some(Opaque::CodeBuiltin(text()));
            }
            continue;
        }
        match known::target(raw) {
            Some(name) if known::runs_as_code(name) || known::runs_value(name) => {
                return Some(Opaque::HookVariable(name.to_owned()));
            }
            Some("PATH")
                if raw
                    .split_once('=')
                    .is_some_and(|(_, v)| !known::path_appends(v)) =>
            {
                return Some(Opaque::HookVariable("PATH".into()));
            }
            Some(_) => {}
            None => return Some(Opaque::Arithmetic(raw.to_owned())),
        }
    }
    None
}

/// Builtins that take variable names as operands (`read a b`, `printf -v
/// a`, `unset a`, `test -v a`): each name plain or a numbered element —
/// a subscript bash evaluates is arithmetic on text.
fn names(name: &str, argv: &[Word]) -> Option<Opaque> {
    let named: Vec<&Word> = match name {
        "printf" | "wait" => argv
            .windows(2)
            .filter(|pair| pair[0].literal() == Some(if name == "printf" { "-v" } else { "-p" }))
            .map(|pair| &pair[1])
            .collect(),
        "test" | "[" => argv
            .windows(2)
            .filter(|pair| matches!(pair[0].literal(), Some("-v" | "-R")))
            .map(|pair| &pair[1])
            .collect(),
        "getopts" => argv.get(2).into_iter().collect(),
        // read, unset, mapfile: every operand; read's valued options' values
        // are skipped, but `-a NAME` names one.
        _ => {
            let valued: &[&str] = if name == "read" {
                &["-d", "-i", "-n", "-N", "-p", "-t", "-u"]
            } else {
                &["-d", "-n", "-O", "-s", "-u", "-C", "-c"]
            };
            let mut named = vec![];
            let mut at = 1;
            while let Some(word) = argv.get(at) {
                match word.literal() {
                    Some("-a") => {
                        named.extend(argv.get(at + 1));
                        at += 2;
                    }
                    Some(flag) if valued.contains(&flag) => at += 2,
                    Some(flag) if flag.starts_with('-') && flag.len() > 1 => at += 1,
                    _ => {
                        named.push(word);
                        at += 1;
                    }
                }
            }
            named
        }
    };
    named.into_iter().find_map(|word| match word {
        Word::Literal(text) => match known::target(text) {
            Some(name) if known::runs_as_code(name) => Some(Opaque::HookVariable(name.to_owned())),
            Some(_) => None,
            None => Some(Opaque::Arithmetic(text.clone())),
        },
        Word::Dynamic(text) => Some(Opaque::Arithmetic(text.clone())),
    })
}

/// Options a wrapper takes: `flags` alone, `valued` with the next word
/// (or `--long=value`, or a short one's value attached: `-sKILL`).
/// The index of the first operand, or None on an option not known.
fn options(words: &[Option<&str>], flags: &[&str], valued: &[&str]) -> Option<usize> {
    options_with(words, flags, valued, &[])
}

/// [`options`], and short options whose value is optional and attached
/// (`xargs -i{}`, `-l5`).
fn options_with(
    words: &[Option<&str>],
    flags: &[&str],
    valued: &[&str],
    optional: &[&str],
) -> Option<usize> {
    let mut at = 1;
    while let Some(word) = words.get(at) {
        let word = (*word)?;
        if word == "--" {
            return Some(at + 1);
        }
        if !word.starts_with('-') || word == "-" {
            return Some(at);
        }
        if flags.contains(&word) || optional.iter().any(|o| word.starts_with(o)) {
            at += 1;
        } else if valued.contains(&word) {
            at += 2;
        } else if valued.iter().any(|v| {
            (v.starts_with("--") && word.strip_prefix(v).is_some_and(|r| r.starts_with('=')))
                || (!v.starts_with("--") && word.len() > 2 && word.starts_with(v))
        }) {
            at += 1;
        } else {
            return None;
        }
    }
    // A value option last with its value missing (`timeout -s`): what runs
    // is not known, so it is no known option.
    (at <= words.len()).then_some(at)
}

/// A wrapper whose options are all known: `flags` alone, `valued` with a
/// value; `leading` operands before the program (`timeout`'s duration,
/// `taskset`'s mask, `chrt`'s priority); with any of `alone` it runs no
/// program (`taskset -p PID`, `chrt -p PID`).
struct Wrapper {
    names: &'static [&'static str],
    flags: &'static [&'static str],
    valued: &'static [&'static str],
    leading: usize,
    alone: &'static [&'static str],
}

/// The wrappers read by their options alone.
const WRAPPERS: &[Wrapper] = &[
    Wrapper {
        names: &["command", "builtin"],
        flags: &["-p"],
        valued: &[],
        leading: 0,
        // `command -v x` only looks x up.
        alone: &["-v", "-V"],
    },
    Wrapper {
        names: &["exec"],
        flags: &["-c", "-l", "-cl", "-lc"],
        valued: &["-a"],
        leading: 0,
        alone: &[],
    },
    Wrapper {
        names: &["nohup"],
        flags: &[],
        valued: &[],
        leading: 0,
        alone: &[],
    },
    Wrapper {
        names: &["time"],
        flags: &[
            "-p",
            "-a",
            "-v",
            "-q",
            "--portability",
            "--append",
            "--verbose",
            "--quiet",
        ],
        valued: &["-f", "-o", "--format", "--output"],
        leading: 0,
        alone: &[],
    },
    Wrapper {
        names: &["setsid"],
        flags: &["-c", "-f", "-w", "--ctty", "--fork", "--wait"],
        valued: &[],
        leading: 0,
        alone: &[],
    },
    Wrapper {
        names: &["stdbuf"],
        flags: &[],
        valued: &["-i", "-o", "-e", "--input", "--output", "--error"],
        leading: 0,
        alone: &[],
    },
    Wrapper {
        names: &["timeout"],
        flags: &["--preserve-status", "--foreground", "-v", "--verbose"],
        valued: &["-s", "-k", "--signal", "--kill-after"],
        leading: 1,
        alone: &[],
    },
    Wrapper {
        names: &["doas"],
        flags: &["-n"],
        valued: &["-u", "-C"],
        leading: 0,
        alone: &[],
    },
    Wrapper {
        names: &["taskset"],
        flags: &["-a", "--all-tasks", "-c", "--cpu-list"],
        valued: &[],
        leading: 1,
        alone: &["-p", "--pid"],
    },
    Wrapper {
        names: &["ionice"],
        flags: &["-t", "--ignore"],
        valued: &["-c", "-n", "--class", "--classdata"],
        leading: 0,
        alone: &["-p", "-P", "-u", "--pid", "--pgid", "--uid"],
    },
    Wrapper {
        names: &["chrt"],
        flags: &[
            "-a",
            "-b",
            "-d",
            "-f",
            "-i",
            "-o",
            "-r",
            "-R",
            "-v",
            "--all-tasks",
            "--batch",
            "--deadline",
            "--fifo",
            "--idle",
            "--other",
            "--rr",
            "--reset-on-fork",
            "--verbose",
        ],
        valued: &[
            "-T",
            "-P",
            "-D",
            "--sched-runtime",
            "--sched-period",
            "--sched-deadline",
        ],
        leading: 1,
        alone: &["-p", "--pid", "-m", "--max"],
    },
];

/// sudo's options that take no value, and those that take one.
const SUDO_FLAGS: &[&str] = &[
    "-E",
    "-H",
    "-n",
    "-P",
    "-S",
    "-b",
    "-k",
    "--preserve-env",
    "--non-interactive",
];
const SUDO_VALUED: &[&str] = &[
    "-u", "-g", "-C", "-D", "-h", "-p", "-R", "-T", "-U", "--user", "--group", "--chdir",
    "--prompt",
];

/// The dynamic loader's options that take no value, and those that take one.
const LOADER_VALUED: &[&str] = &[
    "--library-path",
    "--inhibit-rpath",
    "--argv0",
    "--glibc-hwcaps-prepend",
    "--glibc-hwcaps-mask",
];

/// For a wrapper: `Some(Some(runs))`, or `Some(None)` for an option not
/// known; `None` for a program that is no wrapper.
fn wrapper(name: &str, argv: &[Word], words: &[Option<&str>]) -> Option<Option<Runs>> {
    let runs = |at: Option<usize>| at.map(|at| Runs::Wrapped { at });
    if let Some(known) = WRAPPERS.iter().find(|w| w.names.contains(&name)) {
        let flags: Vec<&str> = known.flags.iter().chain(known.alone).copied().collect();
        let Some(at) = options(words, &flags, known.valued) else {
            return Some(None);
        };
        // Only among its own options: `command curl -v` runs curl.
        if words[1..at]
            .iter()
            .any(|w| w.is_some_and(|w| known.alone.contains(&w)))
        {
            return Some(Some(Runs::Itself));
        }
        return Some(runs(Some(at + known.leading)));
    }
    Some(match name {
        "nice" => runs(nice(words)),
        "sudo" => {
            options(words, SUDO_FLAGS, SUDO_VALUED).and_then(|at| assignments_then(words, at))
        }
        "env" => env(words),
        "flock" => flock(words),
        "prlimit" => prlimit(words),
        "xargs" => xargs(argv, words),
        "busybox" => match words.get(1) {
            Some(Some(applet)) if !applet.starts_with('-') => runs(Some(1)),
            _ => Some(Runs::Itself),
        },
        _ if loader(name) => runs(options(words, &["--inhibit-cache"], LOADER_VALUED)),
        _ => return None,
    })
}

/// `nice [-n N | -N] program …`: a number as the first option too.
fn nice(words: &[Option<&str>]) -> Option<usize> {
    let numeric = words.get(1).copied().flatten().is_some_and(|w| {
        w.len() > 1 && w.starts_with('-') && w[1..].bytes().all(|b| b.is_ascii_digit())
    });
    let skip = usize::from(numeric);
    options(&words[skip..], &[], &["-n", "--adjustment"]).map(|at| at + skip)
}

/// The dynamic loader run as a program (`/lib64/ld-linux-x86-64.so.2 prog`).
fn loader(name: &str) -> bool {
    name == "ld.so" || (name.starts_with("ld-") || name.starts_with("ld64")) && name.contains(".so")
}

/// `env [options] [NAME=VALUE…] [program …]`: an assignment to a hook
/// makes it opaque; `-S` (a split string) is not known.
fn env(words: &[Option<&str>]) -> Option<Runs> {
    let at = options(
        words,
        &[
            "-i",
            "-0",
            "-v",
            "--ignore-environment",
            "--null",
            "--debug",
        ],
        &["-u", "-C", "--unset", "--chdir"],
    )?;
    assignments_then(words, at)
}

/// Past `NAME=VALUE` words from `at` (what `env` and `sudo` set for the
/// program they run): the program's index, or opaque for a hook.
fn assignments_then(words: &[Option<&str>], mut at: usize) -> Option<Runs> {
    while let Some(word) = words.get(at) {
        let word = (*word)?;
        let Some((name, _)) = word.split_once('=') else {
            break;
        };
        if known::runs_as_code(name) || known::runs_value(name) || name == "PATH" {
            return Some(Runs::Opaque(Opaque::HookVariable(name.to_owned())));
        }
        at += 1;
    }
    Some(Runs::Wrapped { at })
}

/// `flock [options] FILE program …`, `flock [options] FILE -c SCRIPT`, or
/// `flock [options] FD` (runs nothing).
fn flock(words: &[Option<&str>]) -> Option<Runs> {
    let at = options(
        words,
        &[
            "-s",
            "-x",
            "-e",
            "-n",
            "-u",
            "-o",
            "-F",
            "--shared",
            "--exclusive",
            "--nonblock",
            "--unlock",
            "--close",
            "--no-fork",
            "--verbose",
        ],
        &["-w", "-E", "--timeout", "--conflict-exit-code"],
    )?;
    match words.get(at + 1) {
        None => Some(Runs::Itself),
        Some(Some("-c" | "--command")) => match words.get(at + 2) {
            Some(Some(script)) => Some(Runs::Script((*script).to_owned())),
            _ => None,
        },
        Some(_) => Some(Runs::Wrapped { at: at + 1 }),
    }
}

/// `prlimit --nofile=N -n1024 … program`: every option a limit with its
/// value; `-p PID`/`--pid` reads or sets a running process's, and runs
/// nothing.
fn prlimit(words: &[Option<&str>]) -> Option<Runs> {
    let mut at = 1;
    while let Some(word) = words.get(at) {
        let word = (*word)?;
        if word == "--" {
            at += 1;
            break;
        }
        if !word.starts_with('-') {
            break;
        }
        if word == "-p" || word.starts_with("--pid") {
            return Some(Runs::Itself);
        }
        let long_limit = word.starts_with("--") && word.contains('=');
        let short =
            word.len() >= 2 && "cdefilmnqrstuvxy".contains(&word[1..2]) && !word.starts_with("--");
        if !long_limit && !short {
            return None;
        }
        at += 1;
    }
    Some(Runs::Wrapped { at })
}

/// `xargs [options] [program …]`: the program runs with words from its
/// input appended, or put where the replace string stands (`-I{}`): such
/// a word is known only at run time, and a program built from the input
/// (`-I{} {}`) is opaque.
fn xargs(argv: &[Word], words: &[Option<&str>]) -> Option<Runs> {
    let valued = [
        "-I",
        "-L",
        "-n",
        "-P",
        "-d",
        "-E",
        "-s",
        "-a",
        "--max-args",
        "--max-procs",
        "--delimiter",
        "--arg-file",
        "--max-lines",
        "--eof",
        "--max-chars",
        "--replace",
        "--process-slot-var",
    ];
    let flags = [
        "-0",
        "-r",
        "-t",
        "-p",
        "-x",
        "-o",
        "--null",
        "--no-run-if-empty",
        "--verbose",
        "--interactive",
        "--exit",
        "--open-tty",
    ];
    let mut replace: Vec<String> = vec![];
    for (at, word) in words.iter().enumerate().skip(1) {
        let Some(word) = word else { break };
        if !word.starts_with('-') {
            break;
        }
        if *word == "-I" {
            replace.extend(words.get(at + 1).copied().flatten().map(str::to_owned));
        } else if let Some(attached) = word.strip_prefix("-I").or(word.strip_prefix("--replace=")) {
            replace.push(attached.to_owned());
        } else if *word == "-i" || *word == "--replace" {
            replace.push("{}".to_owned());
        } else if let Some(attached) = word.strip_prefix("-i") {
            replace.push(attached.to_owned());
        }
    }
    let at = options_with(words, &flags, &valued, &["-i", "-l", "-e"])?;
    let Some(program) = words.get(at) else {
        return Some(Runs::Itself);
    };
    let replaced = |w: &str| {
        replace
            .iter()
            .any(|r| !r.is_empty() && w.contains(r.as_str()))
    };
    if program.is_none_or(replaced) {
        let text = argv.iter().map(Word::text).collect::<Vec<_>>().join(" ");
        return Some(Runs::Opaque(Opaque::DynamicProgram(text)));
    }
    let mut command: Vec<Word> = argv[at..]
        .iter()
        .map(|w| match w.literal() {
            Some(text) if replaced(text) => Word::Dynamic(text.to_owned()),
            _ => w.clone(),
        })
        .collect();
    if replace.is_empty() {
        command.push(Word::Dynamic("(the input of xargs)".into()));
    }
    Some(Runs::Each(vec![command]))
}

/// `find … -exec program args {} ;` (and `-execdir`, `-ok`, `-okdir`):
/// each program runs with the found paths; `{}` as the program is opaque.
fn find(argv: &[Word], text: impl Fn() -> String) -> Runs {
    // An unquoted expansion may split into `-exec prog ;` itself.
    let splits = |w: &Word| match w {
        Word::Dynamic(raw) => !(raw.len() >= 2 && raw.starts_with('"') && raw.ends_with('"')),
        Word::Literal(_) => false,
    };
    if argv.iter().any(splits) {
        return Runs::Opaque(Opaque::RunsPrograms(text()));
    }
    let mut commands = vec![];
    let mut at = 1;
    while at < argv.len() {
        let starts = matches!(
            argv[at].literal(),
            Some("-exec" | "-execdir" | "-ok" | "-okdir")
        );
        at += 1;
        if !starts {
            continue;
        }
        let Some(end) = argv[at..]
            .iter()
            .position(|w| matches!(w.literal(), Some(";" | "+")))
        else {
            return Runs::Opaque(Opaque::RunsPrograms(text()));
        };
        let command: Vec<Word> = argv[at..at + end]
            .iter()
            .map(|w| match w.literal() {
                Some(arg) if arg.contains("{}") => Word::Dynamic(arg.to_owned()),
                _ => w.clone(),
            })
            .collect();
        match command.first() {
            None => return Runs::Opaque(Opaque::RunsPrograms(text())),
            Some(Word::Dynamic(_)) => return Runs::Opaque(Opaque::DynamicProgram(text())),
            Some(Word::Literal(_)) => commands.push(command),
        }
        at += end + 1;
    }
    Runs::Each(commands)
}

/// A POSIX shell's options, read positively: `-c SCRIPT` with a literal
/// script is read; a script file is a program like any other; options
/// that read other files or input (`-i`, `-l`, `-s`, `--rcfile`,
/// `--login`) and a shell reading its input are opaque.
fn shell(words: &[Option<&str>], text: impl Fn() -> String) -> Runs {
    let opaque = || Runs::Opaque(Opaque::RunsCode(text()));
    let mut command = false;
    let mut at = 1;
    while let Some(word) = words.get(at) {
        let Some(word) = *word else {
            return opaque();
        };
        if word == "--" || word == "-" {
            at += 1;
            break;
        }
        if !word.starts_with(['-', '+']) {
            break;
        }
        if let Some(long) = word.strip_prefix("--") {
            match long {
                "norc" | "noprofile" | "posix" | "noediting" | "restricted" | "verbose" => at += 1,
                "version" | "help" => return Runs::Itself,
                _ => return opaque(),
            }
            continue;
        }
        let mut takes = 0;
        for letter in word[1..].chars() {
            match letter {
                'c' => command = true,
                'o' | 'O' => takes += 1,
                'e' | 'u' | 'x' | 'v' | 'n' | 'f' | 'h' | 'a' | 'b' | 'k' | 'm' | 't' | 'B'
                | 'C' | 'H' | 'P' | 'T' | 'E' | 'p' | 'r' => {}
                _ => return opaque(),
            }
        }
        at += 1 + takes;
    }
    match (command, words.get(at)) {
        (true, Some(Some(script))) => Runs::Script((*script).to_owned()),
        // A script file: a program like any other, whose contents no
        // reader of the line sees.
        (false, Some(Some(_))) => Runs::Itself,
        _ => opaque(),
    }
}

/// `git`: `-c KEY=VALUE` and `git config KEY VALUE` only with keys that
/// run nothing; `--exec-path=`, `--config-env` not known.
fn git(words: &[Option<&str>], text: impl Fn() -> String) -> Runs {
    let inline = || Runs::Opaque(Opaque::InlineCode(text()));
    let mut at = 1;
    while let Some(word) = words.get(at) {
        let Some(word) = *word else {
            return inline();
        };
        match word {
            "-c" => {
                let key = words
                    .get(at + 1)
                    .copied()
                    .flatten()
                    .and_then(|kv| kv.split_once('=').map_or(Some(kv), |(k, _)| Some(k)));
                if !key.is_some_and(languages::git_key_known) {
                    return inline();
                }
                at += 2;
            }
            "-C" | "--git-dir" | "--work-tree" | "--namespace" => at += 2,
            _ if word.starts_with("--exec-path") || word.starts_with("--config-env") => {
                return inline();
            }
            _ if word.starts_with('-') => at += 1,
            "config" => return git_config(&words[at + 1..], inline),
            subcommand => return git_subcommand(subcommand, &words[at + 1..], inline),
        }
    }
    Runs::Itself
}

/// A git subcommand's options that take a command (`rebase --exec`,
/// `fetch --upload-pack`, `grep -O`, `difftool -x`, `bisect run`,
/// `submodule foreach`): opaque, and so is an argument only known at run
/// time where such an option exists.
fn git_subcommand(subcommand: &str, args: &[Option<&str>], inline: impl Fn() -> Runs) -> Runs {
    let takes_command: &[&str] = match subcommand {
        "rebase" => &["-x", "--exec"],
        "clone" => &["-u", "--upload-pack", "-c", "--config", "--template"],
        "fetch" | "pull" | "ls-remote" | "remote" => &["--upload-pack"],
        "push" | "send-pack" | "archive" => &["--receive-pack", "--exec", "--remote"],
        "grep" => &["-O", "--open-files-in-pager"],
        "difftool" | "mergetool" => &["-x", "--extcmd", "-t", "--tool"],
        "bisect" | "submodule" => &["run", "foreach"],
        "filter-branch" | "send-email" | "instaweb" | "daemon" | "shell" => return inline(),
        _ => return Runs::Itself,
    };
    let carries = |arg: &str| {
        takes_command.iter().any(|option| {
            arg == *option
                || arg
                    .strip_prefix(option)
                    .is_some_and(|rest| rest.starts_with('='))
                || (option.len() == 2 && option.starts_with('-') && arg.starts_with(option))
        })
    };
    if args.iter().any(|arg| arg.is_none_or(carries)) {
        inline()
    } else {
        Runs::Itself
    }
}

/// `git config …`: reading is harmless; setting a key is known only for
/// the keys that run nothing.
fn git_config(words: &[Option<&str>], inline: impl Fn() -> Runs) -> Runs {
    let mut operands = vec![];
    let mut setting = false;
    let mut at = 0;
    while let Some(word) = words.get(at) {
        let Some(word) = *word else {
            return inline();
        };
        match word {
            "-f" | "--file" | "--blob" | "--type" | "--default" | "--comment" => at += 1,
            "--add" | "--replace-all" => setting = true,
            _ if word.starts_with('-') => {}
            _ => operands.push(word),
        }
        at += 1;
    }
    if matches!(operands.first(), Some(&"set")) {
        operands.remove(0);
        setting = true;
    }
    let reading = matches!(
        operands.first(),
        Some(&("get" | "list" | "unset" | "get-regexp"))
    );
    setting |= operands.len() >= 2 && !reading;
    match operands.first() {
        Some(key) if setting && !languages::git_key_known(key) => inline(),
        _ => Runs::Itself,
    }
}

/// An interpreter with inline code: `Some(false)` when it runs code
/// written in its arguments or read from its input (`python -c`, `perl
/// -e`, `node -e`, `python3 -`, `python3 <<EOF`), `Some(true)` when it
/// runs a file or a module, `None` for a program that is no interpreter
/// (awk and sed are read: their programs are `known` or not).
fn interpreter(name: &str, words: &[Option<&str>]) -> Option<bool> {
    let family = |stem: &str| {
        name.strip_prefix(stem)
            .is_some_and(|rest| rest.chars().all(|c| c.is_ascii_digit() || c == '.'))
    };
    let (inline, valued, quiet): (&[&str], &[&str], &[&str]) = if family("python") || family("pypy")
    {
        (
            &["-c", "-"],
            &["-W", "-X", "-Q"],
            &["-m", "--version", "-V", "-h", "--help"],
        )
    } else if family("perl") || family("ruby") {
        return Some(perl_like(words));
    } else if family("node") || name == "nodejs" || name == "bun" {
        (
            &[
                "-e",
                "-p",
                "--eval",
                "--print",
                "-pe",
                "-i",
                "--interactive",
                "-",
            ],
            &["-r", "--require", "--import", "--loader"],
            &["--version", "-v", "-h", "--help", "--test"],
        )
    } else if family("lua") || name == "luajit" || name == "Rscript" || name == "osascript" {
        (&["-e", "-"], &[], &["-v", "--version"])
    } else if family("php") {
        (
            &["-r", "-a", "-"],
            &["-d", "-c"],
            &["-v", "--version", "-l", "-h"],
        )
    } else if name == "deno" {
        return Some(
            words.get(1) != Some(&Some("eval"))
                && words.get(1) != Some(&Some("repl"))
                && words.len() > 1,
        );
    } else if name == "pwsh" || name == "powershell" {
        return Some(
            !words[1..].iter().any(|w| {
                w.is_none_or(|w| {
                    let w = w.to_ascii_lowercase();
                    w.starts_with("-c") || w.starts_with("-e") || w == "-"
                })
            }) && words.len() > 1,
        );
    } else if matches!(name, "awk" | "gawk" | "mawk" | "nawk") {
        return Some(awk(words));
    } else if matches!(name, "sed" | "gsed") {
        return Some(sed(words));
    } else {
        return None;
    };
    let mut at = 1;
    while let Some(word) = words.get(at) {
        let Some(word) = *word else {
            return Some(false);
        };
        let python_cluster = word.starts_with('-')
            && !word.starts_with("--")
            && word.contains('c')
            && (family("python") || family("pypy"));
        if inline.contains(&word) || python_cluster {
            return Some(false);
        }
        if quiet.contains(&word) {
            return Some(true);
        }
        if !word.starts_with('-') {
            return Some(true);
        }
        at += if valued.contains(&word) { 2 } else { 1 };
    }
    // No script: the interpreter reads its code from its input.
    Some(false)
}

/// perl and ruby: `-e`/`-E` in any option cluster (`-ne`, `-lane`,
/// `-pi -e`) is inline code; a script file is not; no script reads input.
fn perl_like(words: &[Option<&str>]) -> bool {
    for word in &words[1..] {
        let Some(word) = *word else {
            return false;
        };
        if matches!(word, "-v" | "--version" | "-h" | "--help") {
            return true;
        }
        let Some(letters) = word.strip_prefix('-') else {
            return true;
        };
        if word == "-" || word == "--" {
            return false;
        }
        for (at, letter) in letters.char_indices() {
            if matches!(letter, 'e' | 'E') {
                return false;
            }
            // `-MModule=a,b` is `use Module (a, b)`: anything more in it
            // (`-M'strict;system(…)'`) is code.
            let module = |c: char| c.is_ascii_alphanumeric() || matches!(c, ':' | '=' | ',' | '_');
            if matches!(letter, 'M' | 'm') && !letters[at + 1..].chars().all(module) {
                return false;
            }
            // Options whose value is attached end the cluster.
            if "MmIilx0dDCFr".contains(letter) {
                break;
            }
        }
    }
    false
}

/// awk: the program is the first operand, or each `-e`; it is known
/// when it runs no command (`languages::awk_program_known`). A program
/// file (`-f`) is a program like any other, whose contents no reader of
/// the line sees.
fn awk(words: &[Option<&str>]) -> bool {
    let known = |at: usize| {
        words
            .get(at)
            .copied()
            .flatten()
            .is_some_and(languages::awk_program_known)
    };
    let mut file = false;
    let mut at = 1;
    while let Some(word) = words.get(at) {
        let Some(word) = *word else {
            return false;
        };
        match word {
            "-F" | "-v" => at += 2,
            "-f" | "--file" => {
                file = true;
                at += 2;
            }
            "-e" | "--source" if !known(at + 1) => return false,
            "-e" | "--source" => {
                file = true;
                at += 2;
            }
            "--" => return file || known(at + 1),
            _ if word.starts_with("-F") || word.starts_with("-v") => at += 1,
            "--posix"
            | "-P"
            | "--sandbox"
            | "-S"
            | "-b"
            | "-c"
            | "--re-interval"
            | "--characters-as-bytes"
            | "--traditional" => at += 1,
            _ if word.starts_with('-') => return false,
            _ => return file || known(at),
        }
    }
    file
}

/// sed: every script (`-e SCRIPT`, `-eSCRIPT` or an option cluster
/// ending in `e`, `--expression=`; else the first operand) known by
/// `languages::sed_script_known`; a script file (`-f`) is a program like
/// any other.
fn sed(words: &[Option<&str>]) -> bool {
    let mut scripts = vec![];
    let mut operand = None;
    let mut file = false;
    let mut at = 1;
    while let Some(word) = words.get(at) {
        let Some(word) = *word else {
            return false;
        };
        at += 1;
        if let Some(script) = word.strip_prefix("--expression=") {
            scripts.push(script);
        } else if word == "--expression" {
            scripts.push(words.get(at).copied().flatten().unwrap_or("e"));
            at += 1;
        } else if word.starts_with("--file") {
            file = true;
            at += usize::from(word == "--file");
        } else if word == "--line-length" {
            at += 1;
        } else if word.starts_with("--") || word == "-" {
        } else if let Some(letters) = word.strip_prefix('-') {
            for (offset, letter) in letters.char_indices() {
                let rest = &letters[offset + 1..];
                match letter {
                    'e' if rest.is_empty() => {
                        scripts.push(words.get(at).copied().flatten().unwrap_or("e"));
                        at += 1;
                    }
                    'e' => scripts.push(rest),
                    'f' => {
                        file = true;
                        at += usize::from(rest.is_empty());
                    }
                    'l' if rest.is_empty() => at += 1,
                    'i' | 'l' => {}
                    'n' | 'E' | 'r' | 's' | 'u' | 'z' => continue,
                    _ => return false,
                }
                break;
            }
        } else if operand.is_none() {
            operand = Some(word);
        }
    }
    if scripts.is_empty() && !file {
        scripts.extend(operand);
    }
    (file || !scripts.is_empty()) && scripts.into_iter().all(languages::sed_script_known)
}
