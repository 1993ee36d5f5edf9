//! The `cordon` binary: argument parsing and rendering over the library.

mod cli;

fn main() -> std::process::ExitCode {
    cli::main()
}
