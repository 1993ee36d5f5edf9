//! The `cordon` binary: argument parsing and rendering over the library,
//! plus the hidden Landlock launcher mode (one binary to ship).

mod cli;

fn main() -> std::process::ExitCode {
    let mut args = std::env::args_os();
    if args
        .nth(1)
        .is_some_and(|a| a == cordon::sandbox::landlock::SUBCOMMAND)
    {
        cordon::sandbox::landlock::launcher_main(args.collect());
    }
    cli::main()
}
