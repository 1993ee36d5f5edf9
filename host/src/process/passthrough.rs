//! A stream moved from the command's pipe to a sink's descriptor inside the
//! kernel ([`OutputSink::passthrough`]).
//!
//! `cordon run` without `--json` prints the command's stdout and keeps
//! nothing of it: copying every chunk up into the host and down again cost
//! a 500 MiB stream 2.3× its direct time. With `splice` the pages move from
//! one pipe to the other (or into a file) without a copy through the host.
//! The thread doing it is a plain one, not tokio's blocking pool (whose
//! shutdown waits for its tasks): it polls the pipe in short slices and
//! ends at the pipe's end or when the run stops waiting for it (its reader
//! task dropped after the drain bound, as every reader is).

use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use nix::errno::Errno;
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use tokio::task::JoinHandle;

use super::output::{Capture, OutputSink, Stream};

/// How long one wait for the pipe lasts before the stop flag is read.
const SLICE_MS: u16 = 100;

/// The most one `splice` moves.
#[cfg(target_os = "linux")]
const CHUNK: usize = 1 << 20;

/// The command's pipe is made this large (best effort: an unprivileged
/// user's pipes are capped by `/proc/sys/fs/pipe-max-size`, 1 MiB by
/// default, and by `pipe-user-pages-soft` in all): one pipe per run whose
/// sink takes a passthrough (`cordon run` without `--json`). Measured with
/// a 500 MiB stream: 1 MiB and gathering 1.7× direct, neither 2.3×, the
/// gathering alone (a 64 KiB pipe) 27×.
#[cfg(target_os = "linux")]
const PIPE_BYTES: nix::libc::c_int = 1 << 20;

/// Below this many bytes queued, [`gather`] waits for more.
const GATHERED: usize = 128 << 10;

/// How long [`gather`] waits.
const GATHER: std::time::Duration = std::time::Duration::from_micros(300);

/// Move `pipe` (the host's read end, blocking) into `target` until the
/// pipe's end, counting what passed in `capture`; where `splice` cannot
/// reach `target` (a descriptor it does not support), through the sink's
/// `write` instead, as every other stream goes. The handle ends with it;
/// dropping the handle's task lets the thread go at its next slice.
pub(super) fn start(
    pipe: OwnedFd,
    target: RawFd,
    stream: Stream,
    capture: Arc<Mutex<Capture>>,
    sink: Arc<dyn OutputSink>,
) -> JoinHandle<()> {
    let stop = Arc::new(AtomicBool::new(false));
    let (done, finished) = tokio::sync::oneshot::channel::<()>();
    let stopping = stop.clone();
    let spawned = std::thread::Builder::new()
        .name("cordon-passthrough".into())
        .spawn(move || {
            // SAFETY: the sink keeps `target` open for as long as it lives
            // (`OutputSink::passthrough`'s contract), and it lives in this
            // closure until the borrow's last use.
            #[allow(
                unsafe_code,
                reason = "the sink's descriptor, borrowed for the sink's life"
            )]
            let target = unsafe { BorrowedFd::borrow_raw(target) };
            pass(&pipe, target, stream, &capture, sink.as_ref(), &stopping);
            let _ = done.send(());
        });
    tokio::spawn(async move {
        // Ends the thread at its next slice when this task is dropped.
        let _stop = StopOnDrop(stop);
        if spawned.is_ok() {
            let _ = finished.await;
        }
    })
}

/// Sets the flag when dropped.
struct StopOnDrop(Arc<AtomicBool>);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// The loop of [`start`]'s thread.
fn pass(
    pipe: &OwnedFd,
    target: BorrowedFd<'_>,
    stream: Stream,
    capture: &Mutex<Capture>,
    sink: &dyn OutputSink,
    stop: &AtomicBool,
) {
    let mut spliceable = true;
    let mut buf = vec![];
    // Room for a fast writer to go on while this thread gathers; without
    // it (the user's pipe memory is capped) gathering would stall the
    // writer instead, so it is not done.
    let gathers = enlarged(pipe.as_fd());
    while !stop.load(Ordering::Relaxed) {
        if !readable(pipe.as_fd()) {
            continue;
        }
        if gathers {
            gather(pipe.as_fd());
        }
        if spliceable {
            match splice(pipe.as_fd(), target) {
                Ok(0) => return,
                Ok(moved) => {
                    capture.lock().expect("capture lock").passed(moved);
                    continue;
                }
                Err(Errno::EINTR) => continue,
                // The target is full and non-blocking: wait for room.
                Err(Errno::EAGAIN) => {
                    writable(target);
                    continue;
                }
                // Not a descriptor splice reaches: copy from here on.
                Err(_) => spliceable = false,
            }
        }
        buf.resize(64 * 1024, 0);
        match nix::unistd::read(pipe.as_fd(), &mut buf) {
            Ok(0) => return,
            Ok(n) => {
                sink.write(stream, &buf[..n]);
                capture.lock().expect("capture lock").push(&buf[..n]);
            }
            Err(Errno::EINTR | Errno::EAGAIN) => {}
            Err(_) => return,
        }
    }
}

/// With less than [`GATHERED`] in `pipe`, wait [`GATHER`] once for more: a
/// writer of small chunks (4 KiB at a time is common) would otherwise cost
/// a wake-up of this thread and of the reader downstream per chunk. A
/// person or an agent reading the output never notices the wait.
fn gather(pipe: BorrowedFd<'_>) {
    let mut queued: nix::libc::c_int = 0;
    // SAFETY: FIONREAD writes one int, into `queued`, which we own.
    #[allow(unsafe_code, reason = "FIONREAD has no safe wrapper in nix")]
    let asked = unsafe { nix::libc::ioctl(pipe.as_raw_fd(), nix::libc::FIONREAD, &mut queued) };
    if asked == 0 && waits_for_more(queued as usize) {
        std::thread::sleep(GATHER);
    }
}

/// Whether a readable pipe with `queued` bytes is worth waiting on: some,
/// but fewer than [`GATHERED`]. None queued in a readable pipe is its end
/// (every writer gone), which no wait can add to: the run's last read
/// must not wait (it did, on every `cordon run`).
fn waits_for_more(queued: usize) -> bool {
    queued > 0 && queued < GATHERED
}

/// Whether `pipe` has bytes (or its end) within one slice.
fn readable(pipe: BorrowedFd<'_>) -> bool {
    let mut fds = [PollFd::new(pipe, PollFlags::POLLIN)];
    matches!(poll(&mut fds, PollTimeout::from(SLICE_MS)), Ok(n) if n > 0)
}

/// Wait up to one slice for room in `target`.
fn writable(target: BorrowedFd<'_>) {
    let mut fds = [PollFd::new(target, PollFlags::POLLOUT)];
    let _ = poll(&mut fds, PollTimeout::from(SLICE_MS));
}

/// Whether `pipe` is now [`PIPE_BYTES`] large.
#[cfg(target_os = "linux")]
fn enlarged(pipe: BorrowedFd<'_>) -> bool {
    let resized = nix::fcntl::fcntl(pipe, nix::fcntl::FcntlArg::F_SETPIPE_SZ(PIPE_BYTES));
    resized.is_ok_and(|bytes| bytes >= PIPE_BYTES)
}

/// No pipe sizes here: nothing is gathered.
#[cfg(not(target_os = "linux"))]
fn enlarged(_pipe: BorrowedFd<'_>) -> bool {
    false
}

/// One `splice` of up to [`CHUNK`] bytes from `pipe` to `target`.
#[cfg(target_os = "linux")]
fn splice(pipe: BorrowedFd<'_>, target: BorrowedFd<'_>) -> Result<usize, Errno> {
    use nix::fcntl::SpliceFFlags;
    nix::fcntl::splice(pipe, None, target, None, CHUNK, SpliceFFlags::SPLICE_F_MOVE)
}

/// No `splice` here: every stream is copied.
#[cfg(not(target_os = "linux"))]
fn splice(_pipe: BorrowedFd<'_>, _target: BorrowedFd<'_>) -> Result<usize, Errno> {
    Err(Errno::ENOSYS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_pipe_with_a_little_queued_is_waited_on_never_its_end() {
        assert!(
            !waits_for_more(0),
            "a readable pipe with nothing queued has ended"
        );
        assert!(waits_for_more(1));
        assert!(waits_for_more(GATHERED - 1));
        assert!(!waits_for_more(GATHERED));
    }
}
