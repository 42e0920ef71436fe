//! `weft load`: a load generator in the spirit of oha, wrk2 and ghz.
//!
//! `concurrency` workers on one `weft::Channel` of `connections`
//! connections call one method (`echo` by default) for `duration` (or
//! until `calls` have been
//! issued), back to back (closed loop) or on a schedule (`--rate`, open
//! loop; see [`pace`]). `--sweep` runs steps of rising load and marks the
//! knee ([`sweep`]). The report has percentiles, min/mean/stddev, a
//! histogram, a per-second series, a Little's-law check and the outages
//! (a server restarted mid-run: [`outage`]); `--json` prints all of it
//! with the arguments.
//!
//! Everything that could make a run hang is checked before it starts (a
//! body over the message limit, a malformed method, a zero duration), and
//! the [`driver`] bounds the rest: a run always ends at its duration.

use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;
use weft::{Bytes, CallOptions, Channel, Config, Listener};

mod driver;
mod histogram;
mod outage;
mod pace;
mod progress;
mod report_html;
mod series;
mod sweep;

use crate::args::LoadArgs;
use crate::report::{KeyUpdateCount, Report};
use driver::{Caller, Ended, Phase, StopAt};
use pace::Pace;
use progress::Progress;

/// Pacer lateness (ms) above which the report says so.
const PACER_LATE_NOTE_MS: f64 = 1.0;

/// How the load's channel reconnects: gRPC's schedule from 50 ms, capped
/// at 500 ms (not 120 s), so calls resume within about half a second of a
/// restarted server listening again. A load generator may knock this
/// often; a production client should keep the default.
fn reconnect() -> weft::Backoff {
    weft::Backoff::new()
        .base(Duration::from_millis(50))
        .max(Duration::from_millis(500))
}

/// What was loaded and how.
#[derive(Debug, Serialize)]
pub(crate) struct Setup {
    /// The server address.
    pub(crate) target: String,
    /// Whether the server ran in this process.
    pub(crate) in_process: bool,
    /// Connections.
    pub(crate) connections: u32,
    /// Calls in flight (closed loop), or workers (open loop).
    pub(crate) concurrency: u32,
    /// Calls per second, open loop only.
    pub(crate) rate: Option<f64>,
    /// The method called.
    pub(crate) method: String,
    /// Request body size.
    pub(crate) payload_size: usize,
    /// Per-call timeout, seconds.
    pub(crate) timeout_s: f64,
    /// Whether the connections are encrypted.
    pub(crate) encrypted: bool,
    /// Whether compression was negotiated.
    pub(crate) compressed: bool,
}

impl Setup {
    pub(crate) fn render(&self) -> String {
        let on = |b: bool| if b { "on" } else { "off" };
        let mode = match self.rate {
            Some(r) => format!(
                "open loop at {r:.0} calls/s over {} workers",
                self.concurrency
            ),
            None => format!("{} in flight", self.concurrency),
        };
        format!(
            "weft load: {} ({}), {} connection(s), {mode}, {}-byte {}; encryption {}, compression {}\n",
            self.target,
            if self.in_process {
                "in-process server"
            } else {
                "remote"
            },
            self.connections,
            self.payload_size,
            self.method,
            on(self.encrypted),
            on(self.compressed),
        )
    }
}

/// The arguments of the run, as `--json` echoes them.
#[derive(Debug, Serialize)]
pub(crate) struct Echo {
    concurrency: u32,
    connections: u32,
    duration_s: f64,
    calls: Option<u64>,
    rate: Option<f64>,
    sweep: bool,
    warmup_s: Option<f64>,
    timeout_s: Option<f64>,
    method: String,
    metadata: Vec<(String, String)>,
    payload_size: usize,
    body_file: Option<String>,
    max_error_rate: Option<f64>,
    p99_under_s: Option<f64>,
    addr: Option<String>,
    /// The pinned server public key (hex), if any.
    server_key: Option<String>,
}

impl Echo {
    fn of(a: &LoadArgs) -> Echo {
        Echo {
            concurrency: a.concurrency,
            connections: a.connections,
            duration_s: a.duration.as_secs_f64(),
            calls: a.calls,
            rate: a.rate,
            sweep: a.sweep,
            warmup_s: a.warmup.map(|d| d.as_secs_f64()),
            timeout_s: a.timeout.map(|d| d.as_secs_f64()),
            method: a.method.clone(),
            metadata: a.metadata.clone(),
            payload_size: a.payload_size,
            body_file: a.body_file.as_ref().map(|p| p.display().to_string()),
            max_error_rate: a.max_error_rate,
            p99_under_s: a.p99_under.map(|d| d.as_secs_f64()),
            addr: a.addr.clone(),
            server_key: a.server_key.clone(),
        }
    }
}

/// One measured run.
#[derive(Debug, Serialize)]
pub(crate) struct Single {
    /// The figures.
    pub(crate) report: Report,
    /// The latency histogram of the successful calls.
    pub(crate) histogram: Vec<histogram::Bucket>,
    /// Throughput, p99 and errors per second.
    pub(crate) series: Vec<series::SeriesRow>,
    /// Open loop: the latest the pacer released a call slot, ms.
    pub(crate) pacer_late_ms: Option<f64>,
    /// When the server could not be reached, and the calls that failed.
    pub(crate) outages: Vec<outage::Outage>,
}

/// A single run or a sweep.
#[derive(Debug, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Body {
    /// One run.
    Run(Box<Single>),
    /// A sweep: one row per step.
    Sweep {
        /// The steps.
        rows: Vec<sweep::Row>,
        /// Index of the knee row.
        knee: Option<usize>,
        /// Key updates over all the steps.
        key_updates: KeyUpdateCount,
    },
}

/// The result of `weft load` (`--json` prints it).
#[derive(Debug, Serialize)]
pub(crate) struct Output {
    pub(crate) args: Echo,
    pub(crate) setup: Setup,
    #[serde(flatten)]
    pub(crate) body: Body,
    #[serde(flatten)]
    pub(crate) ended: Ended,
}

impl Output {
    /// The human-readable report.
    pub(crate) fn render(&self) -> String {
        let mut s = self.setup.render();
        match &self.body {
            Body::Run(r) => {
                s += &r.report.render();
                if let Some(late) = r.pacer_late_ms.filter(|&l| l >= PACER_LATE_NOTE_MS) {
                    s += &format!(
                        "pacer       released call slots up to {late:.1} ms late: this machine starved \
                         the load generator of CPU, and the latencies include that\n"
                    );
                }
                s += &histogram::render(&r.histogram);
                s += &render_series(&r.series);
                s += &outage::render(&r.outages);
            }
            Body::Sweep {
                rows,
                knee,
                key_updates,
            } => {
                s += &sweep::render(rows, *knee);
                s += &key_updates.render();
            }
        }
        s
    }

    /// The report as an HTML page with plots (`--report`).
    pub(crate) fn html(&self) -> String {
        report_html::render(self)
    }

    /// `Err` with the reason when the run failed or missed a threshold:
    /// the connection was lost, no call succeeded, `--max-error-rate` or
    /// `--p99-under` was missed.
    pub(crate) fn verdict(&self, args: &LoadArgs) -> Result<(), String> {
        if let Ended::ConnectionLost { after_s } = self.ended {
            return Err(format!(
                "the connection to {} was lost {after_s:.2} s into the run (is the server still up?)",
                self.setup.target
            ));
        }
        let reports: Vec<(u64, u64)> = match &self.body {
            Body::Run(r) => vec![(r.report.calls, r.report.errors)],
            Body::Sweep { rows, .. } => rows
                .iter()
                .map(|r| ((r.throughput > 0.0) as u64, r.errors))
                .collect(),
        };
        if reports.iter().all(|&(ok, _)| ok == 0) {
            let failed: u64 = reports.iter().map(|&(_, e)| e).sum();
            return Err(format!("no call succeeded ({failed} failed)"));
        }
        let Body::Run(r) = &self.body else {
            return Ok(());
        };
        if let Some(open) = r.outages.iter().find(|o| o.length_s.is_none()) {
            return Err(format!(
                "{} was unreachable from {:.2} s into the run to its end (is the server still up?)",
                self.setup.target, open.start_s
            ));
        }
        if let Some(max) = args.max_error_rate
            && r.report.error_rate() > max
        {
            return Err(format!(
                "error rate {:.2} % is over --max-error-rate {:.2} %",
                r.report.error_rate() * 100.0,
                max * 100.0
            ));
        }
        if let (Some(limit), Some(l)) = (args.p99_under, &r.report.latency) {
            let limit_us = limit.as_secs_f64() * 1e6;
            if l.p99_us >= limit_us {
                return Err(format!(
                    "p99 {:.1} µs is not under --p99-under {limit_us:.1} µs",
                    l.p99_us
                ));
            }
        }
        Ok(())
    }
}

fn render_series(rows: &[series::SeriesRow]) -> String {
    use std::fmt::Write as _;
    let mut s = String::new();
    if rows.len() < 2 {
        return s;
    }
    let _ = writeln!(
        s,
        "per second  {:>6} {:>12} {:>10} {:>7}",
        "second", "calls/s", "p99 µs", "errors"
    );
    for r in rows {
        let p99 = r
            .p99_us
            .map_or_else(|| "-".to_string(), |v| format!("{v:.1}"));
        let _ = writeln!(
            s,
            "            {:>6} {:>12.0} {:>10} {:>7}",
            r.second, r.throughput, p99, r.errors
        );
    }
    s
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

/// Where the request body comes from.
#[derive(Debug)]
enum BodySource<'a> {
    Text(&'a str),
    File(&'a std::path::Path),
    Generated(usize),
}

impl BodySource<'_> {
    fn of(a: &LoadArgs) -> BodySource<'_> {
        match (&a.body, &a.body_file) {
            (Some(t), _) => BodySource::Text(t),
            (None, Some(p)) => BodySource::File(p),
            (None, None) => BodySource::Generated(a.payload_size),
        }
    }

    /// The body's size, known before it is read or built.
    fn size(&self) -> Result<usize, String> {
        match self {
            BodySource::Text(t) => Ok(t.len()),
            BodySource::File(p) => std::fs::metadata(p)
                .map(|m| usize::try_from(m.len()).unwrap_or(usize::MAX))
                .map_err(|e| format!("--body-file {}: {e}", p.display())),
            BodySource::Generated(n) => Ok(*n),
        }
    }

    fn load(&self) -> Result<Bytes, String> {
        match self {
            BodySource::Text(t) => Ok(Bytes::from(t.as_bytes().to_vec())),
            BodySource::File(p) => std::fs::read(p)
                .map(Bytes::from)
                .map_err(|e| format!("--body-file {}: {e}", p.display())),
            BodySource::Generated(n) => Ok(payload(*n)),
        }
    }
}

/// Refuses a body the connection could never carry, before building it.
fn check_size(size: usize, limit: usize, whose: &str) -> Result<(), String> {
    if size > limit {
        return Err(format!(
            "the request body is {size} bytes, over the {whose} message limit of {limit} bytes: \
             every call would fail RESOURCE_EXHAUSTED"
        ));
    }
    Ok(())
}

/// The per-call timeout: `--timeout`, else the run's duration (at least
/// 1 s), else 10 s for a counted run.
fn call_timeout(a: &LoadArgs) -> Duration {
    a.timeout.unwrap_or(match a.calls {
        Some(_) => Duration::from_secs(10),
        None => a.duration.max(Duration::from_secs(1)),
    })
}

/// The calls of the run, on a channel spread over `--connections`.
#[derive(Debug)]
struct RpcCaller {
    channel: Channel,
    method: Arc<str>,
    body: Bytes,
    opts: CallOptions,
    /// `echo` must return the request: check the length.
    echo: bool,
}

impl Caller for RpcCaller {
    #[allow(clippy::manual_async_fn)] // reason: the trait spells out the `Send` bound
    fn call(&self) -> impl Future<Output = Result<(), &'static str>> + Send + '_ {
        async move {
            let r = self
                .channel
                .unary_with(&self.method, self.body.clone(), &self.opts)
                .await;
            match r {
                Ok(r) if !self.echo || r.len() == self.body.len() => Ok(()),
                Ok(_) => Err("DATA_LOSS"),
                Err(s) => Err(s.code().name()),
            }
        }
    }

    #[allow(clippy::manual_async_fn)] // reason: the trait spells out the `Send` bound
    fn lost(&self) -> impl Future<Output = ()> + Send + '_ {
        async move {
            loop {
                // A live connection (waiting while there is none), then its end.
                match self.channel.client().await {
                    Ok(c) => return c.connection().closed().await,
                    // Nothing to watch yet: ask again later, without spinning.
                    Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
                }
            }
        }
    }
}

/// An in-process server, stopped when the run ends.
struct InProcess {
    stop: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<Result<(), weft::Error>>,
}

async fn start_server(config: &Config) -> Result<(String, InProcess), String> {
    let listener = Listener::bind("127.0.0.1:0")
        .await
        .map_err(|e| e.to_string())?;
    let addr = listener.local_addr().map_err(|e| e.to_string())?;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(weft::serve(
        listener,
        crate::demo::router(),
        config.clone(),
        async {
            let _ = stopped.await;
        },
    ));
    Ok((addr, InProcess { stop, task }))
}

/// Runs the load test described by `args` with `config`.
pub(crate) async fn run(args: &LoadArgs, config: Config) -> Result<Output, String> {
    let source = BodySource::of(args);
    check_size(source.size()?, config.message_limit(), "configured")?;
    let method = weft::rpc::method::canonicalize(&args.method)
        .map_err(|s| format!("--method {:?}: {}", args.method, s.message()))?
        .into_owned();
    let timeout = call_timeout(args);
    if timeout > weft::rpc::deadline::MAX_TIMEOUT {
        return Err("--timeout is over the longest timeout a call may carry (7 days)".into());
    }
    let (target, server) = match &args.addr {
        Some(a) => (a.clone(), None),
        None => {
            let (a, s) = start_server(&config).await?;
            (a, Some(s))
        }
    };
    // One probe connection reports what the handshake agreed (and fails
    // the run at once when the server is unreachable); the load runs on a
    // channel spread over `connections`. While it reconnects (a server
    // restarted mid-run) calls wait for it, as a Channel's calls do by
    // default: only the calls in flight on the lost connection fail, and
    // the outage is reported. A server that stays away ends the run
    // after `driver::LOST_AFTER`.
    let probe = weft::connect(&target, &config)
        .await
        .map_err(|e| format!("cannot connect to {target}: {e}"))?;
    let n = *probe.connection().negotiated();
    probe.connection().shutdown(Duration::ZERO).await;
    let peer_limit = usize::try_from(n.peer_max_message).unwrap_or(usize::MAX);
    check_size(source.size()?, peer_limit, "server's")?;
    let body = source.load()?;
    let setup = Setup {
        target,
        in_process: server.is_some(),
        connections: args.connections,
        concurrency: args.concurrency,
        rate: args.rate,
        method: method.clone(),
        payload_size: body.len(),
        timeout_s: timeout.as_secs_f64(),
        encrypted: n.encrypted,
        compressed: n.compressed,
    };
    let mut opts = CallOptions::new().timeout(timeout);
    for (k, v) in &args.metadata {
        opts = opts.metadata(k.as_bytes(), v.as_bytes());
    }
    let channel = Channel::builder()
        .connections(args.connections as usize)
        .backoff(reconnect())
        .connect_lazy(&setup.target, &config)
        .map_err(|e| format!("cannot connect to {}: {e}", setup.target))?;
    let callers = [Arc::new(RpcCaller {
        channel,
        echo: method == "echo",
        method: method.into(),
        body,
        opts,
    })];
    let (body, ended) = measure(args, &callers).await;
    if let Some(s) = server {
        let _ = s.stop.send(());
        drop(callers);
        let _ = s.task.await;
    }
    Ok(Output {
        args: Echo::of(args),
        setup,
        body,
        ended,
    })
}

/// The warm-up (if any), then the run or the sweep's steps.
async fn measure<C: Caller>(args: &LoadArgs, callers: &[Arc<C>]) -> (Body, Ended) {
    let pace = args.rate.map_or(Pace::Closed, Pace::rate);
    if let Some(w) = args.warmup {
        let phase = Phase {
            concurrency: args.concurrency,
            pace,
            stop: StopAt::After(w),
        };
        let mut bar = Progress::new(w.as_millis() as u64, false, "warm-up");
        let m = driver::drive(&phase, callers, &mut bar).await;
        bar.finish();
        if m.ended != Ended::Completed {
            let empty = Single {
                report: Report::new(&m.tally, m.elapsed, m.mean_in_flight),
                histogram: Vec::new(),
                series: Vec::new(),
                pacer_late_ms: None,
                outages: m.outages,
            };
            return (Body::Run(Box::new(empty)), m.ended);
        }
    }
    if !args.sweep {
        let stop = args
            .calls
            .map_or(StopAt::After(args.duration), StopAt::Calls);
        let phase = Phase {
            concurrency: args.concurrency,
            pace,
            stop,
        };
        let mut bar = match args.calls {
            Some(n) => Progress::new(n, true, "load"),
            None => Progress::new(args.duration.as_millis() as u64, false, "load"),
        };
        let before = weft::transform::key_updates();
        let m = driver::drive(&phase, callers, &mut bar).await;
        bar.finish();
        let mut report = Report::new(&m.tally, m.elapsed, m.mean_in_flight);
        report.key_updates = KeyUpdateCount::since(before);
        let single = Single {
            report,
            histogram: histogram::buckets(&m.tally.latency),
            series: series::rows(&m.series, m.elapsed),
            pacer_late_ms: m.pacer_late.map(|d| d.as_secs_f64() * 1e3),
            outages: m.outages,
        };
        return (Body::Run(Box::new(single)), m.ended);
    }
    let mut rows = Vec::new();
    let mut ended = Ended::Completed;
    let before = weft::transform::key_updates();
    for step in sweep::steps(args.concurrency, args.rate) {
        let phase = Phase {
            concurrency: step.concurrency,
            pace: step.pace,
            stop: StopAt::After(args.duration),
        };
        let label = format!("step {}", rows.len() + 1);
        let mut bar = Progress::new(args.duration.as_millis() as u64, false, &label);
        let m = driver::drive(&phase, callers, &mut bar).await;
        bar.finish();
        rows.push(sweep::Row::of(
            &step,
            &Report::new(&m.tally, m.elapsed, m.mean_in_flight),
        ));
        if m.ended != Ended::Completed {
            ended = m.ended;
            break;
        }
    }
    let key_updates = KeyUpdateCount::since(before);
    let knee = sweep::mark_knee(&mut rows);
    (
        Body::Sweep {
            rows,
            knee,
            key_updates,
        },
        ended,
    )
}

#[cfg(test)]
mod tests;
