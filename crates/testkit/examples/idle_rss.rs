//! Server RSS per idle connection, measured from /proc (Linux).
//!
//! ```text
//! cargo run --release -p weft-testkit --example idle_rss -- 10000 [calls] [plain|encrypted|compressed]
//! ```
//!
//! Starts itself as a server child process (defaults: encryption
//! preferred, compression on, idle timeout off), reads the child's RSS,
//! opens N connections to it (200 handshakes at a time), optionally makes
//! `calls` 1 KiB echo calls on each, reads the RSS again, closes every
//! connection and reads it a third time. Prints bytes per connection.
//! Needs a file descriptor limit above N (both ends are on this machine).

use std::io::BufRead;
use std::time::Duration;

use bytes::Bytes;
use weft::{Config, EncryptionPolicy, Listener, Router};
use weft_testkit::{open_fds, resident_bytes};

fn mode_config(mode: &str) -> Config {
    let c = Config::new().idle_timeout(None);
    match mode {
        "plain" => c.encryption(EncryptionPolicy::Off).compression(false),
        "encrypted" => c.compression(false),
        _ => c,
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    if args.get(1).map(String::as_str) == Some("serve") {
        let mode = args.get(2).cloned().unwrap_or_default();
        rt.block_on(serve(&mode));
        return;
    }
    let n: usize = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(10_000);
    let calls: usize = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(0);
    let mode = args.get(3).cloned().unwrap_or_else(|| "compressed".into());
    let mut child = std::process::Command::new(&args[0])
        .args(["serve", &mode])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("spawn the server");
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().expect("piped"))
        .read_line(&mut line)
        .expect("the server's address");
    let addr = line.trim().to_owned();
    let pid = child.id();
    rt.block_on(async {
        let config = mode_config(&mode);
        tokio::time::sleep(Duration::from_millis(300)).await;
        let before = resident_bytes(pid);
        let mut clients = Vec::with_capacity(n);
        let body = Bytes::from(vec![b'w'; 1024]);
        while clients.len() < n {
            let batch = (n - clients.len()).min(200);
            let mut set = tokio::task::JoinSet::new();
            for _ in 0..batch {
                let (addr, config, body) = (addr.clone(), config.clone(), body.clone());
                set.spawn(async move {
                    let c = weft::connect(&addr, &config).await.expect("connect");
                    for _ in 0..calls {
                        c.unary("echo", body.clone()).await.expect("call");
                    }
                    c
                });
            }
            while let Some(c) = set.join_next().await {
                clients.push(c.expect("client task"));
            }
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
        let open = resident_bytes(pid);
        let fds_open = open_fds(pid);
        for c in &clients {
            c.connection().shutdown(Duration::ZERO).await;
        }
        drop(clients);
        tokio::time::sleep(Duration::from_secs(3)).await;
        let after = resident_bytes(pid);
        let fds_after = open_fds(pid);
        let per = (open.saturating_sub(before)) / n as u64;
        println!(
            "mode={mode} connections={n} calls={calls}: server RSS {} KiB before, {} KiB open \
             ({} bytes = {:.1} KiB per connection), {} KiB after all closed \
             (server fds: {fds_open} open, {fds_after} after)",
            before / 1024,
            open / 1024,
            per,
            per as f64 / 1024.0,
            after / 1024
        );
    });
    let _ = child.kill();
    let _ = child.wait();
}

async fn serve(mode: &str) {
    let listener = Listener::bind("127.0.0.1:0").await.expect("bind");
    println!("{}", listener.local_addr().expect("address"));
    let router = Router::new().unary("echo", |_ctx, req: Bytes| async move { Ok(req) });
    let config = mode_config(mode).max_pending_handshakes(1024);
    weft::serve(listener, router, config, std::future::pending())
        .await
        .expect("serve");
}
