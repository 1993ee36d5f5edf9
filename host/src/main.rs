//! The `cordon` binary: argument parsing and rendering over the library,
//! plus the hidden Landlock launcher mode (one binary to ship).

mod cli;

fn main() -> std::process::ExitCode {
    let args: Vec<_> = std::env::args_os().collect();
    if cordon::sandbox::launcher::is_invoked(&args) {
        cordon::sandbox::launcher::main(args.into_iter().skip(2).collect());
    }
    cli::main()
}
