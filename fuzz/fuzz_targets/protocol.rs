//! Any bytes a client sends a real `cordon serve` connection: every line
//! gets a JSON reply (or none for a notification), the connection ends
//! cleanly at end of input, and nothing panics. Lines naming a method that
//! runs a command or ends the server are left out: the target fuzzes the
//! decoder and the dispatch, not the commands a line could run.
#![no_main]

use std::sync::{Arc, OnceLock};

use libfuzzer_sys::fuzz_target;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

struct Fixture {
    runtime: tokio::runtime::Runtime,
    server: Arc<cordon::serve::Server>,
    _dir: tempfile::TempDir,
}

fn fixture() -> &'static Fixture {
    static FIXTURE: OnceLock<Fixture> = OnceLock::new();
    FIXTURE.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let host = {
            let _inside = runtime.enter();
            cordon::Host::builder()
                .deployment(cordon::Deployment::in_dir(dir.path()))
                .spill_parent(dir.path())
                .build()
                .unwrap()
        };
        Fixture {
            runtime,
            server: Arc::new(cordon::serve::Server::new(Arc::new(host))),
            _dir: dir,
        }
    })
}

fuzz_target!(|data: &[u8]| {
    for word in [
        &b"run"[..],
        b"start",
        b"shutdown",
        b"reload",
        b"attach",
        b"detach",
    ] {
        if data.windows(word.len()).any(|w| w == word) {
            return;
        }
    }
    let fixture = fixture();
    fixture.runtime.block_on(async {
        let (client, end) = tokio::io::duplex(1 << 20);
        let (input, output) = tokio::io::split(end);
        let server = fixture.server.clone();
        let served = tokio::spawn(async move { server.serve(input, output).await });
        let (reader, mut writer) = tokio::io::split(client);
        writer.write_all(data).await.unwrap();
        writer.write_all(b"\n").await.unwrap();
        writer.shutdown().await.unwrap();
        drop(writer);
        let mut replies = BufReader::new(reader).lines();
        while let Some(reply) = replies.next_line().await.unwrap() {
            // JSON text, read without converting its numbers: an id such as
            // 1e400 is legal and echoed byte for byte (no double holds it).
            serde_json::from_str::<Box<serde_json::value::RawValue>>(&reply).expect("a JSON reply");
            assert!(reply.starts_with('{') || reply.starts_with('['), "{reply}");
        }
        served.await.unwrap().unwrap();
    });
});
