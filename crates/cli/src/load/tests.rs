//! End-to-end runs of `weft load` against servers on 127.0.0.1, including
//! the ones that used to hang: a server that dies, one that stops
//! answering, bodies over the message limit, calls that all fail.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use clap::Parser as _;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use super::*;

fn load_args(extra: &[&str]) -> LoadArgs {
    let mut argv = vec!["weft", "load"];
    argv.extend_from_slice(extra);
    match crate::args::Cli::try_parse_from(argv).unwrap().command {
        crate::args::Command::Load(l) => l,
        _ => unreachable!("parsed as load"),
    }
}

/// Runs `weft load` with `extra` and fails the test if it has not
/// returned within `bound` (the "its duration plus 2 s").
async fn load(extra: &[&str], bound: Duration) -> Result<Output, String> {
    let args = load_args(extra);
    let config = crate::security_config(&args.security).unwrap();
    tokio::time::timeout(bound, run(&args, config))
        .await
        .expect("weft load returned in time")
}

async fn remote_server() -> String {
    let listener = Listener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(weft::serve(
        listener,
        crate::demo::router(),
        Config::new(),
        std::future::pending(),
    ));
    addr
}

/// A TCP proxy in front of `upstream` that can be killed (both sockets
/// dropped, as when the server is killed with -9) or frozen (sockets open,
/// nothing forwarded, as when it is stopped with SIGSTOP).
struct Proxy {
    addr: String,
    frozen: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<()>,
}

impl Proxy {
    async fn start(upstream: String) -> Proxy {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap().to_string();
        let frozen = Arc::new(AtomicBool::new(false));
        let f = frozen.clone();
        let task = tokio::spawn(async move {
            let mut pipes = tokio::task::JoinSet::new();
            loop {
                let Ok((a, _)) = l.accept().await else { return };
                let b = TcpStream::connect(&upstream).await.unwrap();
                let (ar, aw) = a.into_split();
                let (br, bw) = b.into_split();
                pipes.spawn(pipe(ar, bw, f.clone()));
                pipes.spawn(pipe(br, aw, f.clone()));
            }
        });
        Proxy { addr, frozen, task }
    }
}

async fn pipe(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    frozen: Arc<AtomicBool>,
) {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let Ok(n) = from.read(&mut buf).await else {
            return;
        };
        if n == 0 {
            return;
        }
        while frozen.load(Ordering::Relaxed) {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        if to.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}

#[test]
fn payload_has_the_asked_size() {
    assert_eq!(payload(0).len(), 0);
    assert_eq!(payload(1000).len(), 1000);
    assert!(payload(100).starts_with(b"{\"id\":1"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_counted_run_in_process_with_security_on() {
    let out = load(
        &[
            "--calls",
            "300",
            "--concurrency",
            "8",
            "--connections",
            "2",
            "--payload-size",
            "600",
        ],
        Duration::from_secs(20),
    )
    .await
    .unwrap();
    assert!(out.setup.in_process && out.setup.encrypted && out.setup.compressed);
    let Body::Run(r) = &out.body else {
        panic!("a run")
    };
    assert_eq!(r.report.calls + r.report.errors, 300);
    assert_eq!(r.report.errors, 0, "{:?}", r.report.errors_by_code);
    let l = r.report.latency.as_ref().unwrap();
    assert!(l.p50_us > 0.0 && l.max_us >= l.p99_us && l.min_us <= l.p50_us);
    assert_eq!(r.histogram.iter().map(|b| b.count).sum::<u64>(), 300);
    let text = out.render();
    assert!(text.contains("encryption on, compression on"), "{text}");
    assert!(text.contains("histogram"), "{text}");
    let args = load_args(&[]);
    assert!(out.verdict(&args).is_ok());
    let json = serde_json::to_value(&out).unwrap();
    assert_eq!(json["run"]["report"]["calls"], 300);
    assert_eq!(json["args"]["connections"], 2);
    assert_eq!(json["ended"], "completed");
    assert!(!json["run"]["histogram"].as_array().unwrap().is_empty());
    assert!(json["run"]["series"].is_array());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_timed_run_against_a_remote_server_with_a_series() {
    let addr = remote_server().await;
    let out = load(
        &[
            "--duration",
            "1200ms",
            "--concurrency",
            "4",
            "--addr",
            &addr,
            "--encrypt",
            "off",
            "--compress",
            "off",
            "--warmup",
            "100ms",
        ],
        Duration::from_secs(10),
    )
    .await
    .unwrap();
    assert!(!out.setup.in_process && !out.setup.encrypted && !out.setup.compressed);
    let Body::Run(r) = &out.body else {
        panic!("a run")
    };
    assert!(r.report.calls > 0);
    assert!(r.report.elapsed_s >= 1.2 - 1e-3 && r.report.elapsed_s <= 1.2 + 1e-3);
    // 4 closed-loop workers: at most 4 calls in flight on average.
    assert!(r.report.little.sampled_in_flight <= 4.0);
    assert_eq!(r.series.len(), 2, "{:?}", r.series);
    let in_series: f64 = r.series[0].throughput + r.series[1].throughput * 0.2;
    assert!(
        (in_series - r.report.calls as f64).abs() <= 1.0,
        "{:?}",
        r.series
    );
    assert!(out.render().contains("per second"));
}

#[tokio::test]
async fn an_unreachable_server_is_a_clear_error() {
    let e = load(
        &["--addr", "127.0.0.1:1", "--calls", "1"],
        Duration::from_secs(5),
    )
    .await
    .unwrap_err();
    assert!(e.contains("cannot connect to 127.0.0.1:1"), "{e}");
}

#[tokio::test]
async fn a_body_over_the_message_limit_is_refused_before_anything_starts() {
    // Refused before connecting (the address would fail) and before the
    // body is built (999999999 bytes would take ~1 GB).
    for size in ["5000000", "999999999"] {
        let e = load(
            &[
                "--payload-size",
                size,
                "--duration",
                "2s",
                "--addr",
                "127.0.0.1:1",
            ],
            Duration::from_secs(5),
        )
        .await
        .unwrap_err();
        assert!(
            e.contains(&format!(
                "{size} bytes, over the configured message limit of 4194304"
            )),
            "{e}"
        );
    }
}

#[tokio::test]
async fn a_malformed_method_is_refused_before_anything_starts() {
    let e = load(
        &["--method", "no such/../method", "--addr", "127.0.0.1:1"],
        Duration::from_secs(5),
    )
    .await
    .unwrap_err();
    assert!(e.starts_with("--method \"no such/../method\""), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_killed_mid_run_for_good_fails_it_with_an_open_outage() {
    let proxy = Proxy::start(remote_server().await).await;
    let addr = proxy.addr.clone();
    let kill = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(300)).await;
        proxy.task.abort();
    });
    let out = load(
        &["--duration", "2s", "--addr", &addr, "--concurrency", "8"],
        Duration::from_secs(4),
    )
    .await
    .unwrap();
    kill.await.unwrap();
    let Body::Run(r) = &out.body else {
        panic!("a run")
    };
    // Calls wait for a reconnect that never comes: only the calls in
    // flight on the lost connection fail.
    assert!(r.report.errors <= 8, "{:?}", r.report);
    assert_eq!(r.outages.len(), 1, "{:?}", r.outages);
    assert_eq!(r.outages[0].length_s, None, "still out at the end");
    assert!(r.outages[0].start_s < 2.0);
    let e = out.verdict(&load_args(&[])).unwrap_err();
    assert!(
        e.contains("was unreachable from") && e.contains("server still up"),
        "{e}"
    );
}

/// A server on a runtime of its own (on its own thread), so that killing
/// it drops every task and socket at once, as killing its process does.
struct Killable {
    kill: Option<std::sync::mpsc::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Killable {
    /// Serves the demo router on `addr` (port 0: any); returns the bound
    /// address.
    fn start(addr: &str) -> (String, Killable) {
        let (bound_tx, bound_rx) = std::sync::mpsc::channel();
        let (kill, killed) = std::sync::mpsc::channel::<()>();
        let addr = addr.to_owned();
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .enable_all()
                .build()
                .unwrap();
            let listener = rt.block_on(Listener::bind(&addr)).unwrap();
            bound_tx.send(listener.local_addr().unwrap()).unwrap();
            rt.spawn(weft::serve(
                listener,
                crate::demo::router(),
                Config::new(),
                std::future::pending(),
            ));
            let _ = killed.recv();
            // Dropping the runtime drops every task: the listener and each
            // connection close at once, with calls in flight.
            drop(rt);
        });
        let addr = bound_rx.recv().unwrap();
        (
            addr,
            Killable {
                kill: Some(kill),
                thread: Some(thread),
            },
        )
    }

    fn kill(mut self) {
        if let Some(k) = self.kill.take() {
            let _ = k.send(());
        }
        if let Some(t) = self.thread.take() {
            t.join().unwrap();
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_across_two_server_restarts_waits_for_them_and_lists_both_outages() {
    const CONCURRENCY: u64 = 16;
    const DOWN: Duration = Duration::from_millis(500);
    let (addr, server) = Killable::start("127.0.0.1:0");
    let a = addr.clone();
    // Kill at about 1.5 s and 3.5 s into the run, each time serving again
    // on the same address 0.5 s later.
    let restarts = tokio::spawn(async move {
        let mut server = server;
        let mut downs = Vec::new();
        for _ in 0..2 {
            tokio::time::sleep(Duration::from_millis(1500)).await;
            let killed = tokio::time::Instant::now();
            tokio::task::spawn_blocking(move || server.kill())
                .await
                .unwrap();
            tokio::time::sleep(DOWN).await;
            let a = a.clone();
            server = tokio::task::spawn_blocking(move || Killable::start(&a).1)
                .await
                .unwrap();
            downs.push(killed.elapsed());
        }
        tokio::time::sleep(Duration::from_secs(3)).await;
        tokio::task::spawn_blocking(move || server.kill())
            .await
            .unwrap();
        downs
    });
    let out = load(
        &[
            "--duration",
            "5s",
            "--addr",
            &addr,
            "--concurrency",
            &CONCURRENCY.to_string(),
        ],
        Duration::from_secs(8),
    )
    .await
    .unwrap();
    let downs = restarts.await.unwrap();
    let Body::Run(r) = &out.body else {
        panic!("a run")
    };
    out.verdict(&load_args(&[])).unwrap();
    // Only the calls in flight on each lost connection failed.
    assert!(
        r.report.errors <= 2 * CONCURRENCY,
        "{} failed: {:?}",
        r.report.errors,
        r.report.errors_by_code
    );
    assert_eq!(
        r.outages.len(),
        2,
        "{:?}; failed {:?}; per second {:?}",
        r.outages,
        r.report.errors_by_code,
        r.series
    );
    for (o, down) in r.outages.iter().zip(&downs) {
        let length = Duration::from_secs_f64(o.length_s.expect("over"));
        // It began at the kill, so calls resumed within 1 s of the restart.
        assert!(
            length <= *down + Duration::from_secs(1),
            "{o:?}, down for {down:?}"
        );
    }
    let failed: u64 = r.outages.iter().map(|o| o.calls_failed).sum();
    assert_eq!(failed, r.report.errors, "{:?}", r.outages);
    let json = serde_json::to_value(&out).unwrap();
    assert_eq!(json["run"]["outages"].as_array().map(Vec::len), Some(2));
    assert!(out.render().contains("outages"), "{}", out.render());
    assert!(out.html().contains("<table class=\"outages\">"));
    eprintln!("{}", out.render());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_server_cannot_stretch_the_run_and_calls_time_out() {
    let proxy = Proxy::start(remote_server().await).await;
    let frozen = proxy.frozen.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(200)).await;
        frozen.store(true, Ordering::Relaxed);
    });
    let out = load(
        &[
            "--duration",
            "1s",
            "--timeout",
            "300ms",
            "--addr",
            &proxy.addr,
            "--concurrency",
            "4",
        ],
        Duration::from_secs(3),
    )
    .await
    .unwrap();
    let Body::Run(r) = &out.body else {
        panic!("a run")
    };
    assert!(r.report.elapsed_s <= 1.0 + 1e-3, "{}", r.report.elapsed_s);
    assert!(
        r.report
            .errors_by_code
            .get("DEADLINE_EXCEEDED")
            .is_some_and(|&n| n >= 4),
        "{:?}",
        r.report
    );
    proxy.task.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_where_every_call_fails_reports_no_latency_and_fails() {
    let out = load(
        &["--method", "nope", "--duration", "300ms"],
        Duration::from_secs(5),
    )
    .await
    .unwrap();
    let Body::Run(r) = &out.body else {
        panic!("a run")
    };
    assert_eq!(r.report.calls, 0);
    assert!(r.report.errors_by_code["UNIMPLEMENTED"] > 0);
    assert!(r.report.latency.is_none());
    let text = out.render();
    assert!(!text.contains("0.0 µs"), "{text}");
    let e = out.verdict(&load_args(&[])).unwrap_err();
    assert!(e.starts_with("no call succeeded"), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thresholds_fail_the_run() {
    let out = load(
        &["--calls", "50", "--concurrency", "2"],
        Duration::from_secs(10),
    )
    .await
    .unwrap();
    let e = out
        .verdict(&load_args(&["--p99-under", "1us"]))
        .unwrap_err();
    assert!(e.contains("is not under --p99-under 1.0 µs"), "{e}");
    assert!(out.verdict(&load_args(&["--p99-under", "1h"])).is_ok());
    // `add` with a body that is not JSON fails every call: 100 % errors.
    let out = load(
        &[
            "--calls",
            "20",
            "--method",
            "add",
            "--body",
            "x",
            "--max-error-rate",
            "1%",
        ],
        Duration::from_secs(10),
    )
    .await
    .unwrap();
    let args = load_args(&["--max-error-rate", "1%"]);
    assert!(
        out.verdict(&args)
            .unwrap_err()
            .contains("no call succeeded")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_open_loop_run_keeps_its_schedule() {
    let out = load(
        &["--rate", "200", "--duration", "500ms", "--concurrency", "4"],
        Duration::from_secs(5),
    )
    .await
    .unwrap();
    let Body::Run(r) = &out.body else {
        panic!("a run")
    };
    // 200/s for 0.5 s: 100 calls scheduled, the last few maybe cut.
    assert!((95..=100).contains(&r.report.calls), "{}", r.report.calls);
    assert!(
        out.render()
            .contains("open loop at 200 calls/s over 4 workers")
    );
}

/// With `--key` and `--server-key` the run handshakes Noise IK; the key
/// updates it saw are in the report, its text and its JSON.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_with_keys_reports_the_key_updates_it_saw() {
    let key = std::env::temp_dir().join(format!("weft-load-key-{}", std::process::id()));
    let _ = std::fs::remove_file(&key);
    let public = crate::keys::keygen(&key).unwrap();
    let path = key.to_str().unwrap();
    let args = load_args(&[
        "--calls",
        "200",
        "--concurrency",
        "4",
        "--key",
        path,
        "--server-key",
        &public,
    ]);
    // The in-process server shares the key; both ends rekey every 2 records.
    let config = crate::security_config(&args.security).unwrap();
    let config = crate::pinned(config, args.server_key.as_deref())
        .unwrap()
        .rekey_after(2, 1 << 20);
    let out = tokio::time::timeout(Duration::from_secs(20), run(&args, config))
        .await
        .expect("weft load returned in time");
    std::fs::remove_file(&key).unwrap();
    let out = out.unwrap();
    let Body::Run(r) = &out.body else {
        panic!("a run")
    };
    assert_eq!(
        (r.report.calls, r.report.errors),
        (200, 0),
        "{:?}",
        r.report
    );
    // The counters are process-wide: other tests may add, never take away.
    let k = r.report.key_updates;
    assert!(k.sent > 0 && k.received > 0, "{k:?}");
    let line = format!("key updates {} sent, {} received\n", k.sent, k.received);
    assert!(out.render().contains(&line), "{}", out.render());
    let json = serde_json::to_value(&out).unwrap();
    assert_eq!(json["run"]["report"]["key_updates"]["sent"], k.sent);
    assert_eq!(json["run"]["report"]["key_updates"]["received"], k.received);
    assert_eq!(json["args"]["server_key"], public.as_str());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sweep_prints_one_row_per_step() {
    let out = load(
        &[
            "--sweep",
            "--concurrency",
            "4",
            "--duration",
            "200ms",
            "--encrypt",
            "off",
        ],
        Duration::from_secs(10),
    )
    .await
    .unwrap();
    let Body::Sweep { rows, .. } = &out.body else {
        panic!("a sweep")
    };
    let c: Vec<u32> = rows.iter().map(|r| r.concurrency).collect();
    assert_eq!(c, [1, 2, 4]);
    assert!(rows.iter().all(|r| r.throughput > 0.0));
    let text = out.render();
    assert!(
        text.contains("concurrency") && text.contains("knee"),
        "{text}"
    );
    assert!(text.contains("\nkey updates "), "{text}");
    let json = serde_json::to_value(&out).unwrap();
    assert!(json["sweep"]["key_updates"]["sent"].is_u64(), "{json}");
    assert!(out.verdict(&load_args(&[])).is_ok());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_html_report_plots_the_series_and_the_histogram() {
    let out = load(
        &["--duration", "2100ms", "--concurrency", "2"],
        Duration::from_secs(10),
    )
    .await
    .unwrap();
    let Body::Run(r) = &out.body else {
        panic!("a run")
    };
    let html = out.html();
    assert!(html.starts_with("<!DOCTYPE html>") && html.ends_with("</html>\n"));
    assert_eq!(html.matches("<svg ").count(), 2);
    assert_eq!(html.matches("</svg>").count(), 2);
    // One bar per histogram bucket, one point per second on each line.
    assert_eq!(html.matches("class=\"bucket\"").count(), r.histogram.len());
    let throughput = html.split("data-name=\"calls/s\" d=\"").nth(1).unwrap();
    let d = throughput.split('"').next().unwrap();
    assert_eq!(d.split(' ').count(), r.series.len(), "{d}");
    assert!(html.contains("<pre>weft load: 127.0.0.1:"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sweep_to_64_in_flight_keeps_its_connection() {
    // Cutting every call in flight at each step's end reset dozens of
    // streams at once; the server took that for a rapid-reset attack and
    // closed the connection before the last step.
    let out = load(&["--sweep", "--duration", "150ms"], Duration::from_secs(20))
        .await
        .unwrap();
    assert_eq!(out.ended, Ended::Completed);
    let Body::Sweep { rows, .. } = &out.body else {
        panic!("a sweep")
    };
    assert_eq!(rows.len(), 7);
    // The guard is "no errors": a closed connection fails every call of
    // the later steps. A step may complete no call at all on a machine
    // loaded enough to stall it for its 150 ms, so only the sweep as a
    // whole must have made progress.
    assert!(rows.iter().all(|r| r.errors == 0), "{rows:?}");
    assert!(rows.iter().any(|r| r.throughput > 0.0), "{rows:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_and_metadata_reach_any_method() {
    let out = load(
        &[
            "--calls",
            "10",
            "--method",
            "add",
            "--body",
            "{\"a\":1,\"b\":2}",
            "--metadata",
            "tenant=a",
        ],
        Duration::from_secs(10),
    )
    .await
    .unwrap();
    let Body::Run(r) = &out.body else {
        panic!("a run")
    };
    assert_eq!((r.report.calls, r.report.errors), (10, 0), "{:?}", r.report);
    assert_eq!(out.setup.method, "add");
}
