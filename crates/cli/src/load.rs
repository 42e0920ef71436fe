//! `weft load`: a closed-loop load generator.
//!
//! `concurrency` workers spread over `connections` connections each keep
//! one `echo` call in flight, back to back, for `duration` (or until
//! `calls` have been issued). Each worker records into its own histogram;
//! a sampler reads the in-flight counter every millisecond for the
//! Little's-law check and drives the progress bar.

use std::io::IsTerminal;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};
use serde::Serialize;
use tokio::time::Instant;
use weft::{Bytes, Channel, Config, Listener};

use crate::args::LoadArgs;
use crate::report::{KeyUpdateCount, Report, Tally};

/// How often the in-flight counter is sampled (from a dedicated thread).
const SAMPLE_EVERY: Duration = Duration::from_millis(1);

/// What was loaded and how.
#[derive(Debug, Serialize)]
pub(crate) struct Setup {
    /// The server address.
    pub(crate) target: String,
    /// Whether the server ran in this process.
    pub(crate) in_process: bool,
    /// Connections.
    pub(crate) connections: u32,
    /// Calls in flight.
    pub(crate) concurrency: u32,
    /// Request payload size.
    pub(crate) payload_size: usize,
    /// Whether the connections are encrypted.
    pub(crate) encrypted: bool,
    /// Whether compression was negotiated.
    pub(crate) compressed: bool,
}

impl Setup {
    pub(crate) fn render(&self) -> String {
        let on = |b: bool| if b { "on" } else { "off" };
        format!(
            "weft load: {} ({}), {} connection(s), {} in flight, {}-byte echo; encryption {}, compression {}\n",
            self.target,
            if self.in_process {
                "in-process server"
            } else {
                "remote"
            },
            self.connections,
            self.concurrency,
            self.payload_size,
            on(self.encrypted),
            on(self.compressed),
        )
    }
}

/// The JSON output of `weft load --json`.
#[derive(Debug, Serialize)]
pub(crate) struct Output {
    pub(crate) setup: Setup,
    pub(crate) report: Report,
}

/// A payload that compresses like real data: repeated JSON-ish text.
pub(crate) fn payload(size: usize) -> Bytes {
    let pattern = br#"{"id":1,"name":"task","done":false},"#;
    Bytes::from(
        pattern
            .iter()
            .copied()
            .cycle()
            .take(size)
            .collect::<Vec<u8>>(),
    )
}

/// Runs the load test described by `args` with `config`.
pub(crate) async fn run(args: &LoadArgs, config: Config) -> Result<Output, String> {
    let mut server = None;
    let target = match &args.addr {
        Some(a) => a.clone(),
        None => {
            let listener = Listener::bind("127.0.0.1:0")
                .await
                .map_err(|e| e.to_string())?;
            let addr = listener.local_addr().map_err(|e| e.to_string())?;
            let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
            let cfg = config.clone();
            let task = tokio::spawn(weft::serve(listener, crate::demo::router(), cfg, async {
                let _ = stopped.await;
            }));
            server = Some((stop, task));
            addr
        }
    };
    // One probe connection reports what the handshake agreed (and fails
    // the run early when the server is unreachable); the load runs on a
    // channel that reconnects and spreads over `connections`.
    let probe = weft::connect(&target, &config)
        .await
        .map_err(|e| format!("cannot connect to {target}: {e}"))?;
    let n = *probe.connection().negotiated();
    probe.connection().shutdown(Duration::ZERO).await;
    let channel = Channel::builder()
        .connections(args.connections as usize)
        .connect_lazy(&target, &config)
        .map_err(|e| format!("cannot connect to {target}: {e}"))?;
    let clients = [channel];
    let setup = Setup {
        target,
        in_process: server.is_some(),
        connections: args.connections,
        concurrency: args.concurrency,
        payload_size: args.payload_size,
        encrypted: n.encrypted,
        compressed: n.compressed,
    };
    let report = drive(args, &clients, payload(args.payload_size)).await;
    if let Some((stop, task)) = server {
        let _ = stop.send(());
        drop(clients);
        let _ = task.await;
    }
    Ok(Output { setup, report })
}

/// Shared counters of one run.
#[derive(Debug, Default)]
struct Counters {
    in_flight: AtomicU64,
    issued: AtomicU64,
    completed: AtomicU64,
    stop: AtomicBool,
}

async fn worker(client: Channel, payload: Bytes, c: Arc<Counters>, limit: Option<u64>) -> Tally {
    let mut tally = Tally::default();
    loop {
        if c.stop.load(Ordering::Relaxed) {
            break;
        }
        if let Some(limit) = limit
            && c.issued.fetch_add(1, Ordering::Relaxed) >= limit
        {
            break;
        }
        let t = Instant::now();
        c.in_flight.fetch_add(1, Ordering::Relaxed);
        let r = client.unary("echo", payload.clone()).await;
        c.in_flight.fetch_sub(1, Ordering::Relaxed);
        match r {
            Ok(resp) if resp.len() == payload.len() => tally.ok(t.elapsed()),
            Ok(_) => tally.error("DATA_LOSS"),
            Err(s) => tally.error(s.code().name()),
        }
        c.completed.fetch_add(1, Ordering::Relaxed);
    }
    tally
}

fn progress(args: &LoadArgs) -> ProgressBar {
    if !std::io::stdout().is_terminal() {
        return ProgressBar::hidden();
    }
    let (len, unit) = match args.calls {
        Some(n) => (n, "calls"),
        None => (args.duration.as_millis() as u64, "ms"),
    };
    let bar = ProgressBar::new(len);
    let template = format!("{{spinner}} [{{bar:40}}] {{pos}}/{{len}} {unit} {{msg}}");
    if let Ok(style) = ProgressStyle::with_template(&template) {
        bar.set_style(style.progress_chars("=> "));
    }
    bar
}

/// Samples the in-flight counter from its own OS thread, so the samples
/// are not biased by the runtime being busy exactly when calls complete.
/// Returns the time-weighted mean once `done` is set.
fn sampler(c: Arc<Counters>, done: Arc<AtomicBool>) -> std::thread::JoinHandle<f64> {
    std::thread::spawn(move || {
        let start = std::time::Instant::now();
        let mut last = start;
        let mut weighted = 0.0f64;
        while !done.load(Ordering::Relaxed) {
            std::thread::sleep(SAMPLE_EVERY);
            let now = std::time::Instant::now();
            let n = c.in_flight.load(Ordering::Relaxed);
            weighted += n as f64 * (now - last).as_secs_f64();
            last = now;
        }
        let covered = (last - start).as_secs_f64();
        if covered > 0.0 {
            weighted / covered
        } else {
            0.0
        }
    })
}

/// Runs the workers and the sampler; returns the report.
async fn drive(args: &LoadArgs, clients: &[Channel], payload: Bytes) -> Report {
    let updates_before = weft::transform::key_updates();
    let counters = Arc::new(Counters::default());
    let sampling_done = Arc::new(AtomicBool::new(false));
    let sampling = sampler(counters.clone(), sampling_done.clone());
    let start = Instant::now();
    let mut workers = tokio::task::JoinSet::new();
    for i in 0..args.concurrency as usize {
        let client = clients[i % clients.len()].clone();
        workers.spawn(worker(
            client,
            payload.clone(),
            counters.clone(),
            args.calls,
        ));
    }
    let bar = progress(args);
    let mut tick = tokio::time::interval(Duration::from_millis(100));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut merged = Tally::default();
    loop {
        tokio::select! {
            _ = tick.tick() => {
                let now = Instant::now();
                if args.calls.is_none() && now - start >= args.duration {
                    counters.stop.store(true, Ordering::Relaxed);
                }
                let done = counters.completed.load(Ordering::Relaxed);
                let secs = (now - start).as_secs_f64().max(1e-9);
                bar.set_position(match args.calls {
                    Some(_) => done,
                    None => (now - start).as_millis() as u64,
                });
                bar.set_message(format!("{done} calls, {:.0}/s", done as f64 / secs));
            }
            joined = workers.join_next() => match joined {
                Some(Ok(t)) => merged.merge(&t),
                Some(Err(e)) => {
                    tracing_error(&e);
                    merged.error("INTERNAL");
                }
                None => break,
            },
        }
    }
    let elapsed = start.elapsed();
    sampling_done.store(true, Ordering::Relaxed);
    let mean_in_flight = sampling.join().unwrap_or(0.0);
    bar.finish_and_clear();
    let mut report = Report::new(&merged, elapsed, mean_in_flight);
    let after = weft::transform::key_updates();
    report.key_updates = KeyUpdateCount {
        sent: after.sent - updates_before.sent,
        received: after.received - updates_before.received,
    };
    report
}

fn tracing_error(e: &tokio::task::JoinError) {
    eprintln!("weft load: a worker failed: {e}");
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser as _;

    fn load_args(extra: &[&str]) -> LoadArgs {
        let mut argv = vec!["weft", "load"];
        argv.extend_from_slice(extra);
        match crate::args::Cli::try_parse_from(argv).unwrap().command {
            crate::args::Command::Load(l) => l,
            _ => unreachable!("parsed as load"),
        }
    }

    #[test]
    fn payload_has_the_asked_size() {
        assert_eq!(payload(0).len(), 0);
        assert_eq!(payload(1000).len(), 1000);
        assert!(payload(100).starts_with(b"{\"id\":1"));
    }

    #[tokio::test]
    async fn a_counted_run_in_process_with_security_on() {
        let args = load_args(&[
            "--calls",
            "300",
            "--concurrency",
            "8",
            "--connections",
            "2",
            "--payload-size",
            "600",
        ]);
        let config = crate::security_config(&args.security).unwrap();
        let out = run(&args, config).await.unwrap();
        assert!(out.setup.in_process && out.setup.encrypted && out.setup.compressed);
        assert_eq!(out.report.calls + out.report.errors, 300);
        assert_eq!(out.report.errors, 0, "{:?}", out.report.errors_by_code);
        assert!(out.report.latency.p50_us > 0.0);
        assert!(out.report.latency.max_us >= out.report.latency.p99_us);
        assert!(out.setup.render().contains("encryption on, compression on"));
        let json = serde_json::to_value(&out).unwrap();
        assert_eq!(json["report"]["calls"], 300);
    }

    #[tokio::test]
    async fn a_timed_run_against_a_remote_server() {
        let listener = Listener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let cfg = Config::new();
        tokio::spawn(weft::serve(
            listener,
            crate::demo::router(),
            cfg.clone(),
            std::future::pending(),
        ));
        let args = load_args(&[
            "--duration",
            "300ms",
            "--concurrency",
            "4",
            "--addr",
            &addr,
            "--encrypt",
            "off",
            "--compress",
            "off",
        ]);
        let config = crate::security_config(&args.security).unwrap();
        let out = run(&args, config).await.unwrap();
        assert!(!out.setup.in_process && !out.setup.encrypted && !out.setup.compressed);
        assert!(out.report.calls > 0);
        assert!(out.report.elapsed_s >= 0.3);
        // 4 closed-loop workers: about 4 calls in flight on average.
        assert!(out.report.little.sampled_in_flight <= 4.0);
    }

    #[tokio::test]
    async fn an_unreachable_server_is_a_clear_error() {
        let args = load_args(&["--addr", "127.0.0.1:1", "--calls", "1"]);
        let config = crate::security_config(&args.security).unwrap();
        let e = run(&args, config).await.unwrap_err();
        assert!(e.contains("cannot connect to 127.0.0.1:1"), "{e}");
    }
}
