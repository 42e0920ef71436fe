//! The soak's clients: each task issues calls of every shape at random,
//! drops some after a random short time, calls the slow handler under a
//! short or a long deadline, retries refused streams, and checks every
//! message it gets back.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use weft::{CallOptions, Client, Code, Status};

use super::msg::{Msg, Rng};
use super::server::SLOW;

/// A call not finished by then is a lost message.
const HANG: Duration = Duration::from_secs(10);

/// What every task counts.
#[derive(Debug, Default)]
pub(crate) struct Counts {
    pub(crate) issued: AtomicU64,
    pub(crate) completed: AtomicU64,
    pub(crate) cancelled: AtomicU64,
    pub(crate) expired: AtomicU64,
    /// Attempts the server refused (`REFUSED_STREAM`) and the task retried.
    pub(crate) refused: AtomicU64,
    pub(crate) messages: AtomicU64,
    /// Calls issued, per shape (`Shape as usize`).
    pub(crate) shapes: [AtomicU64; SHAPES],
}

fn add(counter: &AtomicU64, n: u64) {
    counter.fetch_add(n, Ordering::Relaxed);
}

/// How many call shapes a task picks from.
pub(crate) const SHAPES: usize = 5;

/// The shapes, in the order of [`Counts::shapes`].
pub(crate) const SHAPE_NAMES: [&str; SHAPES] = [
    "unary",
    "server streaming",
    "client streaming",
    "bidi",
    "unary under a deadline",
];

/// How one call ended, as the client saw it.
enum Outcome {
    Completed(u64),
    Expired,
}

/// Why an attempt did not end as it should.
enum Failure {
    /// The server refused the stream (never processed): retry.
    Refused,
    /// Anything else fails the run.
    Wrong(String),
}

impl From<Status> for Failure {
    fn from(s: Status) -> Failure {
        if s.is_stream_refused() {
            Failure::Refused
        } else {
            Failure::Wrong(format!("unexpected status {s}"))
        }
    }
}

impl From<&str> for Failure {
    fn from(s: &str) -> Failure {
        Failure::Wrong(s.to_string())
    }
}

impl From<String> for Failure {
    fn from(s: String) -> Failure {
        Failure::Wrong(s)
    }
}

/// Task `id`'s calls on `client` until `end`.
pub(crate) async fn task(
    client: Client,
    id: u64,
    end: Instant,
    counts: Arc<Counts>,
) -> Result<(), String> {
    let mut rng = Rng::seeded(id);
    let mut call = 0u64;
    while Instant::now() < end {
        call += 1;
        // Mostly small messages; one in eight up to 20,000 bytes (many
        // frames and window updates per message).
        let pad_max = if rng.below(8) == 0 { 20_000 } else { 2048 };
        let m = Msg {
            task: id,
            call,
            index: 0,
            count: 1 + rng.below(8) as u32,
            pad: rng.below(pad_max) as u16,
        };
        let shape = rng.below(SHAPES as u64) as usize;
        // One call in eight is dropped after 0 to 2 ms, wherever it is.
        let cancel_after = (rng.below(8) == 0).then(|| Duration::from_micros(rng.below(2000)));
        let short_deadline = rng.below(2) == 0;
        add(&counts.issued, 1);
        add(&counts.shapes[shape], 1);
        let fut = retrying(&client, shape, m, short_deadline, &counts);
        let ended = match cancel_after {
            Some(after) => tokio::time::timeout(after, fut).await.ok(),
            None => Some(tokio::time::timeout(HANG, fut).await.map_err(|_| {
                format!(
                    "task {id} call {call} ({}) hung for {HANG:?}",
                    SHAPE_NAMES[shape]
                )
            })?),
        };
        match ended {
            None => add(&counts.cancelled, 1),
            Some(Ok(Outcome::Completed(messages))) => {
                add(&counts.completed, 1);
                add(&counts.messages, messages);
            }
            Some(Ok(Outcome::Expired)) => add(&counts.expired, 1),
            Some(Err(e)) => {
                return Err(format!(
                    "task {id} call {call} ({}): {e}",
                    SHAPE_NAMES[shape]
                ));
            }
        }
    }
    Ok(())
}

/// One call, attempted again (same call id) for as long as the server
/// refuses its stream.
async fn retrying(
    client: &Client,
    shape: usize,
    m: Msg,
    short: bool,
    counts: &Counts,
) -> Result<Outcome, String> {
    loop {
        match one_call(client, shape, m, short).await {
            Ok(outcome) => return Ok(outcome),
            Err(Failure::Wrong(e)) => return Err(e),
            Err(Failure::Refused) => {
                add(&counts.refused, 1);
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        }
    }
}

fn check(got: &[u8], want: &Msg) -> Result<(), Failure> {
    let m = Msg::parse(got).map_err(|e| format!("bad message: {e}"))?;
    if m != *want {
        return Err(format!("got {m:?}, want {want:?}").into());
    }
    Ok(())
}

/// One attempt of a call of `shape` carrying `m`; checks every message it
/// gets back.
async fn one_call(client: &Client, shape: usize, m: Msg, short: bool) -> Result<Outcome, Failure> {
    let opts = CallOptions::new().timeout(Duration::from_secs(5));
    match shape {
        0 => {
            let reply = client.unary("echo", m.encode()).await?;
            check(&reply, &m)?;
            Ok(Outcome::Completed(1))
        }
        1 => {
            let mut s = client
                .server_streaming("fan_out", m.encode(), &opts)
                .await?;
            for i in 0..m.count {
                let got = s.message().await?.ok_or("stream ended early")?;
                check(&got, &m.at(i))?;
            }
            if s.message().await?.is_some() {
                return Err("a message after the last".into());
            }
            Ok(Outcome::Completed(u64::from(m.count)))
        }
        2 => {
            let mut call = client.client_streaming("fan_in", &opts).await?;
            for i in 0..m.count {
                call.send(m.at(i).encode()).await?;
            }
            let reply = call.finish().await?;
            check(&reply, &m.at(m.count - 1))?;
            Ok(Outcome::Completed(u64::from(m.count)))
        }
        3 => {
            let mut call = client.bidi("chat", &opts).await?;
            for i in 0..m.count {
                let sent = m.at(i);
                call.send(sent.encode()).await?;
                let got = call.message().await?.ok_or("chat ended early")?;
                check(&got, &sent)?;
            }
            call.close_send().await?;
            if call.message().await?.is_some() {
                return Err("a message after close".into());
            }
            Ok(Outcome::Completed(u64::from(m.count)))
        }
        _ => {
            // The handler sleeps 20 ms: a 2 ms deadline expires, a 2 s one
            // does not. On a starved runtime the reply and the expired timer
            // can be seen in the same poll, and the reply may win: that is
            // only possible once the handler's 20 ms have passed.
            let deadline = Duration::from_millis(if short { 2 } else { 2000 });
            let opts = CallOptions::new().timeout(deadline);
            let started = Instant::now();
            match client.unary_with("slow", m.encode(), &opts).await {
                Ok(reply) if !short || started.elapsed() >= SLOW => {
                    check(&reply, &m)?;
                    Ok(Outcome::Completed(1))
                }
                Err(e) if short && e.code() == Code::DEADLINE_EXCEEDED => Ok(Outcome::Expired),
                Ok(_) => Err("a 20 ms handler answered a 2 ms deadline in time".into()),
                Err(e) => Err(e.into()),
            }
        }
    }
}
