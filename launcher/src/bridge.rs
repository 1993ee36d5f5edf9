//! The proxy bridge: inside a bwrap run whose network is an allow-list,
//! cordon's init listens on the sandbox's own loopback (`127.0.0.1:`
//! [`super::PROXY_PORT`]) and carries every connection to the host's
//! proxy socket, which bwrap binds in. The command's proxy clients
//! (`HTTP_PROXY`, `ALL_PROXY`) reach the host this way and no other: the
//! run has no other network. A thread per direction copies bytes; the
//! threads inherit the init's blocked signal mask, so the supervisor's
//! `sigtimedwait` still receives every signal. At most [`MAX_CARRIED`]
//! connections are carried at once (the host's proxy carries no more for
//! one run); a connection past that is closed at once, so a command cannot
//! make the init spawn threads without bound.

use std::io;
use std::net::{Ipv4Addr, TcpListener, TcpStream};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Listen on the sandbox's loopback at `port` (bound before the command
/// starts, so the command never races it; close-on-exec, so the command
/// never holds it).
pub(super) fn bind(port: u16) -> io::Result<TcpListener> {
    TcpListener::bind((Ipv4Addr::LOCALHOST, port))
}

/// Bridge every connection `listener` accepts to `socket`, on a thread of
/// its own. A thread that cannot be started leaves the listener unserved:
/// the command's proxy clients then fail, and nothing else changes.
pub(super) fn start(listener: TcpListener, socket: PathBuf) {
    let carried = Arc::new(AtomicUsize::new(0));
    let _ = std::thread::Builder::new()
        .name("cordon-bridge".into())
        .spawn(move || {
            for client in listener.incoming().flatten() {
                if carried.fetch_add(1, Ordering::AcqRel) >= MAX_CARRIED {
                    carried.fetch_sub(1, Ordering::AcqRel);
                    continue;
                }
                let (socket, count) = (socket.clone(), carried.clone());
                let spawned = std::thread::Builder::new().spawn(move || {
                    carry(client, &socket);
                    count.fetch_sub(1, Ordering::AcqRel);
                });
                if spawned.is_err() {
                    carried.fetch_sub(1, Ordering::AcqRel);
                }
            }
        });
}

/// The most connections the bridge carries at once.
pub(super) const MAX_CARRIED: usize = 256;

/// Carry one connection to the host's proxy and back.
fn carry(client: TcpStream, socket: &std::path::Path) {
    // Each piece the proxy answers goes to the command at once: Nagle's
    // wait for an ACK the command delays made every kept-alive request
    // through the bridge milliseconds slower.
    let _ = client.set_nodelay(true);
    let Ok(host) = UnixStream::connect(socket) else {
        return;
    };
    let (Ok(mut client_in), Ok(mut host_out)) = (client.try_clone(), host.try_clone()) else {
        return;
    };
    let up = std::thread::spawn(move || {
        let _ = io::copy(&mut client_in, &mut host_out);
        let _ = host_out.shutdown(std::net::Shutdown::Write);
    });
    let (mut host_in, mut client_out) = (host, client);
    let _ = io::copy(&mut host_in, &mut client_out);
    let _ = client_out.shutdown(std::net::Shutdown::Write);
    let _ = up.join();
}
