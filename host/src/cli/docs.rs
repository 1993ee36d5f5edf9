//! `cordon completions SHELL` and `cordon man [--out-dir DIR]`: shell
//! completions and manual pages generated from the CLI definition itself
//! (`clap_complete`, `clap_mangen`), so they can never drift from the flags.

use std::io::Write;
use std::path::PathBuf;

use anyhow::Context;
use clap::{Args, Command};
use clap_complete::Shell;

/// `cordon completions SHELL`
#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell to complete for: bash, zsh, fish, elvish or powershell.
    shell: Shell,
}

/// `cordon man [--out-dir DIR]`
#[derive(Debug, Args)]
pub struct ManArgs {
    /// Write `cordon.1` and one page per subcommand (`cordon-run.1`, …)
    /// into this directory instead of printing `cordon.1` to stdout.
    #[arg(long, value_name = "DIR")]
    out_dir: Option<PathBuf>,
}

/// Print the completion script for `args.shell` to stdout.
pub fn completions(args: CompletionsArgs, mut command: Command) -> anyhow::Result<()> {
    let name = command.get_name().to_owned();
    let mut out = std::io::stdout().lock();
    clap_complete::generate(args.shell, &mut command, name, &mut out);
    out.flush().context("cannot write the completion script")
}

/// Print `cordon.1`, or write every page into `--out-dir`.
pub fn man(args: ManArgs, command: Command) -> anyhow::Result<()> {
    let Some(dir) = args.out_dir else {
        let mut out = std::io::stdout().lock();
        clap_mangen::Man::new(command)
            .render(&mut out)
            .context("cannot write the manual page")?;
        return out.flush().context("cannot write the manual page");
    };
    std::fs::create_dir_all(&dir)
        .with_context(|| format!("cannot create --out-dir {}", dir.display()))?;
    let mut command = command;
    command.build();
    for (page, cmd) in pages(&command) {
        let path = dir.join(format!("{page}.1"));
        let mut bytes = Vec::new();
        clap_mangen::Man::new(cmd.clone().name(page.clone()))
            .render(&mut bytes)
            .with_context(|| format!("cannot render {page}.1"))?;
        std::fs::write(&path, bytes).with_context(|| format!("cannot write {}", path.display()))?;
        // The list of pages written; a closed stdout is no failure.
        let _ = writeln!(std::io::stdout(), "{}", path.display());
    }
    Ok(())
}

/// `command` and every visible subcommand below it, each with its page
/// name (`cordon`, `cordon-run`, `cordon-policy-check`, …).
fn pages(command: &Command) -> Vec<(String, &Command)> {
    let mut pages = vec![(command.get_name().to_owned(), command)];
    let mut index = 0;
    while index < pages.len() {
        let (name, cmd) = (pages[index].0.clone(), pages[index].1);
        for sub in cmd.get_subcommands() {
            if sub.is_hide_set() || sub.get_name() == "help" {
                continue;
            }
            pages.push((format!("{name}-{}", sub.get_name()), sub));
        }
        index += 1;
    }
    pages
}
