//! A pseudo-terminal for a task that asked for one (`tty`): the host keeps
//! the master, the command gets the slave as its stdin, stdout and stderr.
//!
//! Why the host opens it and not the runner: the master is how the host
//! reads what the command prints and writes what the caller types, and a
//! runner must not hold anything of the host's. The slave is a fresh
//! terminal no one else has — not the caller's: a command that injects
//! input (`TIOCSTI`) or changes modes reaches only its own terminal. It is
//! not the command's *controlling* terminal (every runner starts the
//! command in a session of its own): `isatty` holds, prompts and line
//! editing work, but a `^C` written to it is a character, not a signal —
//! a task is ended with kill.
//!
//! Reading the master: once every holder of the slave has closed it, a
//! read gives `EIO` rather than end of file; that is the end here.

use std::io;
#[cfg(target_os = "linux")]
use std::os::fd::FromRawFd;
use std::os::fd::{AsRawFd, OwnedFd};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use nix::fcntl::OFlag;
use nix::libc;
use tokio::io::unix::AsyncFd;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use crate::model::TerminalSize;

/// A new terminal of `size`: (master, slave), both close-on-exec, the
/// master non-blocking.
pub(super) fn open(size: TerminalSize) -> io::Result<(OwnedFd, OwnedFd)> {
    let flags = OFlag::O_RDWR | OFlag::O_NOCTTY | OFlag::O_CLOEXEC;
    let master = nix::pty::posix_openpt(flags)?;
    nix::pty::grantpt(&master)?;
    nix::pty::unlockpt(&master)?;
    let slave = slave_of(&master)?;
    let master = OwnedFd::from(master);
    let winsize = libc::winsize {
        ws_row: size.rows,
        ws_col: size.cols,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: TIOCSWINSZ reads the winsize we own.
    if unsafe { libc::ioctl(master.as_raw_fd(), libc::TIOCSWINSZ, &winsize) } < 0 {
        return Err(io::Error::last_os_error());
    }
    nix::fcntl::fcntl(&master, nix::fcntl::FcntlArg::F_SETFL(OFlag::O_NONBLOCK))?;
    Ok((master, slave))
}

/// The slave of `master`, opened through the master itself (no path
/// lookup in the host's `/dev/pts`).
#[cfg(target_os = "linux")]
fn slave_of(master: &nix::pty::PtyMaster) -> io::Result<OwnedFd> {
    let flags = libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC;
    // SAFETY: TIOCGPTPEER takes open flags and returns a new fd or -1.
    let raw = unsafe { libc::ioctl(master.as_raw_fd(), libc::TIOCGPTPEER, flags) };
    if raw < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `raw` is a fresh fd nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(raw) })
}

/// The slave of `master`, opened by its name (no `TIOCGPTPEER` here).
#[cfg(not(target_os = "linux"))]
fn slave_of(master: &nix::pty::PtyMaster) -> io::Result<OwnedFd> {
    use std::os::unix::fs::OpenOptionsExt;
    /// `ptsname` answers in a static buffer: one caller at a time.
    static NAMING: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let name = {
        let _one = NAMING
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        // SAFETY: every `ptsname` of this process runs under `NAMING`.
        unsafe { nix::pty::ptsname(master) }?
    };
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_NOCTTY | libc::O_CLOEXEC)
        .open(name)?;
    Ok(OwnedFd::from(file))
}

/// The host's end of a task's terminal, readable and writable on the
/// runtime. Clones share the one master.
#[derive(Clone, Debug)]
pub(super) struct Master(Arc<AsyncFd<OwnedFd>>);

impl Master {
    /// Register `master` (non-blocking, from [`open`]) with the reactor.
    pub(super) fn new(master: OwnedFd) -> io::Result<Master> {
        // SAFETY: an `OwnedFd` stays open, on the same file description,
        // for as long as it is owned, and always answers the same fd.
        let registered = unsafe { AsyncFd::register(master) }.map_err(io::Error::from)?;
        Ok(Master(Arc::new(registered)))
    }
}

impl AsyncRead for Master {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        loop {
            let mut ready = ready!(self.0.poll_read_ready(cx))?;
            let unfilled = buf.initialize_unfilled();
            let read = ready
                .try_io(|fd| nix::unistd::read(fd.get_ref(), unfilled).map_err(io::Error::from));
            match read {
                Ok(Ok(n)) => {
                    buf.advance(n);
                    return Poll::Ready(Ok(()));
                }
                // Every holder of the slave has closed it: the end.
                Ok(Err(err)) if err.raw_os_error() == Some(libc::EIO) => {
                    return Poll::Ready(Ok(()));
                }
                Ok(Err(err)) => return Poll::Ready(Err(err)),
                Err(_would_block) => continue,
            }
        }
    }
}

impl AsyncWrite for Master {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bytes: &[u8],
    ) -> Poll<io::Result<usize>> {
        loop {
            let mut ready = ready!(self.0.poll_write_ready(cx))?;
            let written =
                ready.try_io(|fd| nix::unistd::write(fd.get_ref(), bytes).map_err(io::Error::from));
            match written {
                Ok(result) => return Poll::Ready(result),
                Err(_would_block) => continue,
            }
        }
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

/// The terminal's end-of-file character (`VEOF`, `^D`): what a caller's
/// end of input becomes on a terminal, which is never closed while the
/// command runs (closing the master would hang it up).
pub(super) const END_OF_INPUT: u8 = 0x04;

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[tokio::test]
    async fn what_is_written_to_the_master_is_read_on_the_slave_and_its_size_is_set() {
        let (master, slave) = open(TerminalSize {
            rows: 33,
            cols: 101,
        })
        .unwrap();
        let mut winsize: libc::winsize = unsafe { std::mem::zeroed() };
        // SAFETY: TIOCGWINSZ writes the winsize we own.
        assert_eq!(
            unsafe { libc::ioctl(slave.as_raw_fd(), libc::TIOCGWINSZ, &mut winsize) },
            0
        );
        assert_eq!((winsize.ws_row, winsize.ws_col), (33, 101));
        assert!(nix::unistd::isatty(&slave).unwrap());
        let mut master = Master::new(master).unwrap();
        master.write_all(b"hi\n").await.unwrap();
        let mut slave = std::fs::File::from(slave);
        let mut line = [0u8; 3];
        std::io::Read::read_exact(&mut slave, &mut line).unwrap();
        assert_eq!(&line, b"hi\n");
        drop(slave);
        // The echo, then the end once the slave is closed (EIO, not an error).
        let mut seen = Vec::new();
        master.read_to_end(&mut seen).await.unwrap();
        assert_eq!(seen, b"hi\r\n");
    }
}
