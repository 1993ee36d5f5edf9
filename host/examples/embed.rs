//! Embedding cordon in a Rust platform: one host, a foreground run and a
//! background task under a session's own workspace.
//!
//! ```sh
//! cargo run -p cordon --example embed -- /path/to/workspace
//! ```

use cordon::{ExecRequest, Host, SandboxMode, SandboxPolicy, TaskStatus};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let workspace = std::env::args().nth(1).unwrap_or_else(|| ".".into());
    let workspace = std::fs::canonicalize(workspace)?;
    // The embedded bash-sandbox policy; confined runs use bwrap, else Landlock.
    let host = Host::builder().build()?;
    let session = SandboxPolicy::new(SandboxMode::WorkspaceWrite, &workspace);

    let request = ExecRequest::new("ls | head -3; touch /etc/cordon-was-here")
        .with_policy(session.clone())
        .with_workdir(&workspace);
    match host.run(request).await {
        Ok(result) => {
            print!("{}", result.stdout.text);
            let denied = result.sandbox.is_some_and(|facts| facts.denied);
            println!(
                "exit {:?}, write outside the workspace denied: {denied}",
                result.exit_code
            );
        }
        Err(err) => println!("not run: {} ({})", err, err.code()),
    }

    let task = host
        .start(
            ExecRequest::new("for i in 1 2 3; do echo tick $i; sleep 0.2; done")
                .with_policy(session),
        )
        .await?;
    loop {
        let read = task.read();
        print!("{}", read.text);
        if read.status != TaskStatus::Running {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    host.shutdown().await;
    Ok(())
}
