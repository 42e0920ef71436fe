//! weft's client behind a tarpc-style hand-off: callers never touch the
//! connection, they pass a reply slot (a tokio `oneshot`) to one dispatch
//! task over a bounded `mpsc`, and that task makes every call itself,
//! joined (`FuturesUnordered`), so the connection's state stays on the
//! dispatch task's thread. This is the ownership model proposed for
//! weft-mux (one task owns the connection), built from outside with off-the-shelf channels (one `oneshot`
//! and one `FuturesUnordered` task per call, which weft-mux itself would
//! not need): it
//! measures what the placement alone buys on a multi-thread runtime.
//! Plain, like `weft`.

use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;
use tokio::sync::{mpsc, oneshot};
use weft::{Bytes, Client};

use crate::drive::{self, Caller};
use crate::{Counts, Place, RESPONSE, Runtime, Shape, Timing};

/// Runs `shape`, plain, through the hand-off.
pub fn run(runtime: Runtime, shape: Shape, counts: Counts, place: Place) -> Timing {
    drive::run(runtime, shape, counts, connect(place))
}

/// A caller's handle: where to pass its reply slot.
#[derive(Debug, Clone)]
pub struct Handoff {
    calls: mpsc::Sender<oneshot::Sender<Bytes>>,
}

/// One call: pass a reply slot to the dispatch task, wait for the reply.
async fn call(handoff: &Handoff) {
    let (reply, wait) = oneshot::channel();
    handoff.calls.send(reply).await.expect("dispatch task runs");
    let body = wait.await.expect("dispatch task replies");
    assert_eq!(body, RESPONSE);
}

impl Caller for Handoff {
    fn call(&self) -> impl Future<Output = ()> + Send + '_ {
        call(self)
    }
}

/// The dispatch task: takes reply slots in batches, makes their calls
/// joined, fills each slot when its call ends.
async fn dispatch(client: Client, mut asked: mpsc::Receiver<oneshot::Sender<Bytes>>) {
    let mut running = FuturesUnordered::new();
    let mut batch = Vec::with_capacity(64);
    let mut open = true;
    loop {
        tokio::select! {
            n = asked.recv_many(&mut batch, 64), if open => {
                open = n > 0;
                for reply in batch.drain(..) {
                    let client = &client;
                    running.push(async move {
                        let body = client.unary("n", Bytes::new()).await.expect("weft call");
                        let _ = reply.send(body);
                    });
                }
            }
            Some(()) = running.next(), if !running.is_empty() => {}
            else => return,
        }
    }
}

/// The `weft` peer's server and client, and the dispatch task in front of
/// the client.
async fn connect(place: Place) -> Handoff {
    let client = crate::weft_peer::connect(false, place).await;
    let (calls, asked) = mpsc::channel(1024);
    tokio::spawn(dispatch(client, asked));
    Handoff { calls }
}
