//! The `cordon` binary: argument parsing and rendering over the library,
//! plus the hidden launcher modes (Landlock launcher, bwrap init) (one binary to ship).

mod cli;

fn main() -> std::process::ExitCode {
    let args: Vec<_> = std::env::args_os().collect();
    if let Some(mode) = cordon::sandbox::launcher::invoked(&args) {
        cordon::sandbox::launcher::main(mode, args.into_iter().skip(2).collect());
    }
    cli::main()
}
