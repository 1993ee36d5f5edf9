//! `cordon-launcher`: the launcher modes alone (the namespace runner,
//! cordon's init inside bubblewrap, the Landlock launcher, a run as another
//! user), as a small executable of its own.
//!
//! Every confined run starts one of these modes, and each start pays for
//! loading the executable: relocating it, faulting its pages in, tearing
//! it down. `cordon` itself dispatches the same modes, but it is a large
//! program (the policy engine, the servers); installed beside `cordon`,
//! this one is started instead (see `cordon::sandbox::launcher`).

/// This build's identity in a section of its own
/// ([`cordon_launcher::BUILD_SECTION`]), kept by the linker: what a host
/// reads before it uses this executable.
#[allow(
    unsafe_code,
    reason = "naming the section a static is placed in is an unsafe attribute; the static is plain bytes"
)]
#[used]
#[unsafe(link_section = ".cordon_build")]
static BUILD_NOTE: [u8; cordon_launcher::BUILD.len()] = build_note();

/// [`cordon_launcher::BUILD`] as an array.
const fn build_note() -> [u8; cordon_launcher::BUILD.len()] {
    let build = cordon_launcher::BUILD.as_bytes();
    let mut note = [0; cordon_launcher::BUILD.len()];
    let mut at = 0;
    while at < note.len() {
        note[at] = build[at];
        at += 1;
    }
    note
}

fn main() {
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    match cordon_launcher::invoked(&args) {
        Some(mode) => cordon_launcher::main(mode, args.into_iter().skip(2).collect()),
        // What the Landlock probe runs confined, as of `cordon` itself.
        None if args.get(1).is_some_and(|arg| arg == "--version") => {
            println!(
                "cordon-launcher {} ({})",
                env!("CARGO_PKG_VERSION"),
                cordon_launcher::BUILD
            );
        }
        None => {
            eprintln!(
                "cordon-launcher: cordon's sandbox launcher, started by cordon itself \
                 (cordon {}, {}); it takes no commands of its own",
                env!("CARGO_PKG_VERSION"),
                cordon_launcher::BUILD
            );
            std::process::exit(2)
        }
    }
}
