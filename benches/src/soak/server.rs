//! The soak's service: the four call shapes plus a slow unary for
//! deadlines, each handler recording which call it runs, so a call the
//! server ran twice (a refused stream that was in fact processed and then
//! retried, a duplicated OPEN) is caught.

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use weft::{BidiStream, Bytes, Context, RequestStream, ResponseSink, Router, Status};

use super::msg::Msg;

/// How long the `slow` handler sleeps before answering.
pub(crate) const SLOW: Duration = Duration::from_millis(20);

/// A task issues its calls one after another, so a duplicate of call `n`
/// arrives while the task is at most a call or two further on: ids this
/// far behind the newest are forgotten (memory stays flat over the run).
const WINDOW: u64 = 64;

/// What the server saw: calls whose handler ran, and calls run twice.
#[derive(Debug, Default)]
pub(crate) struct Seen {
    pub(crate) handled: AtomicU64,
    pub(crate) duplicates: AtomicU64,
    recent: Mutex<HashMap<u64, Recent>>,
}

/// One task's recently handled calls.
#[derive(Debug, Default)]
struct Recent {
    newest: u64,
    calls: BTreeSet<u64>,
}

impl Seen {
    /// Records that a handler runs the call `m` belongs to.
    fn record(&self, m: &Msg) {
        self.handled.fetch_add(1, Ordering::Relaxed);
        let (task, call) = m.key();
        let mut recent = self.recent.lock().unwrap();
        let r = recent.entry(task).or_default();
        if !r.calls.insert(call) {
            self.duplicates.fetch_add(1, Ordering::Relaxed);
        }
        r.newest = r.newest.max(call);
        let oldest = r.newest.saturating_sub(WINDOW);
        r.calls = r.calls.split_off(&oldest);
    }
}

/// The soak's router; every handler records its call in `seen`.
pub(crate) fn router(seen: &Arc<Seen>) -> Router {
    let (s1, s2, s3, s4, s5) = (
        seen.clone(),
        seen.clone(),
        seen.clone(),
        seen.clone(),
        seen.clone(),
    );
    Router::new()
        .unary("echo", move |_ctx: Context, req: Bytes| {
            let seen = s1.clone();
            async move {
                seen.record(&Msg::parse(&req)?);
                Ok::<_, Status>(req)
            }
        })
        .unary("slow", move |_ctx, req: Bytes| {
            let seen = s2.clone();
            async move {
                seen.record(&Msg::parse(&req)?);
                tokio::time::sleep(SLOW).await;
                Ok::<_, Status>(req)
            }
        })
        .server_streaming(
            "fan_out",
            move |_ctx, req: Bytes, mut sink: ResponseSink| {
                let seen = s3.clone();
                async move {
                    // The request is a message header; answer `count` numbered copies.
                    let m = Msg::parse(&req)?;
                    seen.record(&m);
                    for i in 0..m.count {
                        sink.send(m.at(i).encode()).await?;
                    }
                    Ok(())
                }
            },
        )
        .client_streaming("fan_in", move |_ctx, mut rx: RequestStream| {
            let seen = s4.clone();
            async move {
                // Checks the order itself; answers the count and the last header.
                let mut n = 0;
                let mut last = None;
                while let Some(body) = rx.message().await? {
                    let m = Msg::parse(&body)?;
                    if n == 0 {
                        seen.record(&m);
                    }
                    if m.index != n {
                        return Err(Status::invalid_argument("fan_in: message out of order"));
                    }
                    n += 1;
                    last = Some(m);
                }
                let last = last.ok_or_else(|| Status::invalid_argument("fan_in: no message"))?;
                Ok(Msg { count: n, ..last }.encode())
            }
        })
        .bidi("chat", move |_ctx, mut s: BidiStream| {
            let seen = s5.clone();
            async move {
                let mut first = true;
                while let Some(body) = s.message().await? {
                    if first {
                        seen.record(&Msg::parse(&body)?);
                        first = false;
                    }
                    s.send(body).await?;
                }
                Ok(())
            }
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(task: u64, call: u64) -> Msg {
        Msg {
            task,
            call,
            index: 0,
            count: 1,
            pad: 0,
        }
    }

    #[test]
    fn a_call_handled_twice_is_a_duplicate_and_old_calls_are_forgotten() {
        let seen = Seen::default();
        for call in 1..=200 {
            seen.record(&msg(1, call));
            seen.record(&msg(2, call));
        }
        assert_eq!(seen.duplicates.load(Ordering::Relaxed), 0);
        seen.record(&msg(1, 199));
        assert_eq!(seen.duplicates.load(Ordering::Relaxed), 1);
        assert_eq!(seen.handled.load(Ordering::Relaxed), 401);
        let recent = seen.recent.lock().unwrap();
        assert!(recent[&1].calls.len() <= WINDOW as usize + 1);
    }
}
