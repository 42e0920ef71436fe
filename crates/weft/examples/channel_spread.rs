//! 64 spawned callers on one `Channel`: one connection against
//! `connections(2)` (and a bare `Client` for reference), same run, same
//! in-process loopback server. Prints calls/s of each, and how many cores
//! the process kept busy meanwhile (user + system CPU time over wall time,
//! from /proc/self/stat): on a machine where one connection already keeps
//! every core busy, a second connection has no core to run on.
//!
//! ```text
//! cargo run --release -p weft --example channel_spread [CALLS_PER_CALLER] [--encrypt] [--workers N]
//! ```

use std::time::{Duration, Instant};

use weft::{Bytes, Channel, Client, Config, EncryptionPolicy, Listener, Router, Status};

const CALLERS: usize = 64;

/// What the callers share.
#[derive(Clone)]
enum Target {
    Bare(Client),
    Channel(Channel),
}

impl Target {
    async fn call(&self) -> Result<Bytes, Status> {
        match self {
            Target::Bare(c) => c.unary("n", Bytes::new()).await,
            Target::Channel(c) => c.unary("n", Bytes::new()).await,
        }
    }
}

/// CPU time this process has used (user + system), where /proc says.
fn cpu_time() -> Option<Duration> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the command name (which may hold spaces) in parentheses.
    let rest = &stat[stat.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split(' ').collect();
    let ticks: u64 = f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?;
    // USER_HZ is 100 on every Linux this runs on.
    Some(Duration::from_millis(ticks * 10))
}

async fn time(target: &Target, per_caller: usize) -> (Duration, Option<f64>) {
    let cpu0 = cpu_time();
    let start = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..CALLERS {
        let t = target.clone();
        tasks.spawn(async move {
            for _ in 0..per_caller {
                t.call().await.expect("call");
            }
        });
    }
    while tasks.join_next().await.is_some() {}
    let wall = start.elapsed();
    let busy = cpu0
        .zip(cpu_time())
        .map(|(a, b)| (b - a).as_secs_f64() / wall.as_secs_f64());
    (wall, busy)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let per_caller: usize = args.iter().find_map(|a| a.parse().ok()).unwrap_or(2000);
    let encrypt = args.iter().any(|a| a == "--encrypt");
    let workers: usize = args
        .iter()
        .position(|a| a == "--workers")
        .and_then(|i| args.get(i + 1)?.parse().ok())
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(2, |n| n.get()));
    let config = if encrypt {
        Config::new().encryption(EncryptionPolicy::Required)
    } else {
        Config::new()
            .encryption(EncryptionPolicy::Off)
            .compression(false)
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async move {
        let router = Router::new().unary("n", |_ctx, _req: Bytes| async move {
            Ok::<_, Status>(Bytes::from_static(b"ok"))
        });
        let listener = Listener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        tokio::spawn(weft::serve(
            listener,
            router,
            config.clone(),
            std::future::pending(),
        ));
        let bare = Target::Bare(weft::connect(&addr, &config).await.expect("connect"));
        let chan = |n| {
            Channel::builder()
                .connections(n)
                .connect_lazy(&addr, &config)
                .map(Target::Channel)
                .expect("channel")
        };
        let targets = [
            ("client", bare),
            ("connections(1)", chan(1)),
            ("connections(2)", chan(2)),
        ];
        // Warm up: connect every slot, fill caches.
        for (_, t) in &targets {
            time(t, 50).await;
        }
        let total = (CALLERS * per_caller) as f64;
        let mut rates = Vec::new();
        for (name, t) in &targets {
            let (d, busy) = time(t, per_caller).await;
            let rate = total / d.as_secs_f64();
            let busy = busy.map_or("n/a".to_string(), |b| format!("{b:.2}"));
            println!(
                "{name:>15}: {rate:>10.0} calls/s ({CALLERS} callers x {per_caller}, {workers} workers), {busy} cores busy"
            );
            rates.push(rate);
        }
        println!(
            "connections(2) / connections(1): {:.2}x",
            rates[2] / rates[1]
        );
    });
}
