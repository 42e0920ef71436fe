//! The end-to-end [`Op`]: one unary call through the `weft` facade over TCP
//! loopback, nil request, the 7-byte `{"n":1}` response, as
//! `benches/e2e.rs` times it.
//!
//! Client and server share one multi-thread tokio runtime (the shape
//! `#[tokio::main]` gives): the call is driven from the caller's thread by
//! `block_on`, the server and the connection drivers run on the workers. So
//! an op's allocations span several threads, and work the server finishes
//! after replying can land in the next op: the baseline gives these targets
//! an `allocs_tolerance`.

use std::time::Duration;
use tokio::runtime::Runtime;
use tokio::sync::oneshot;

use weft::{Bytes, CallOptions, Client, Config, EncryptionPolicy, Listener, Router, Status};

use crate::Op;

/// The response of the end-to-end method: 7 bytes of JSON.
pub const RESPONSE: &[u8] = b"{\"n\":1}";

/// The method name the end-to-end server answers.
pub const METHOD: &str = "n";

/// The configuration of the plain (no encryption, no compression) or the
/// encrypted (AES-256-GCM required, compression negotiated as by default)
/// end-to-end targets.
pub fn config(encrypted: bool) -> Config {
    if encrypted {
        Config::new().encryption(EncryptionPolicy::Required)
    } else {
        Config::new()
            .encryption(EncryptionPolicy::Off)
            .compression(false)
    }
}

/// A router answering [`METHOD`] with [`RESPONSE`], whatever the request.
pub fn router() -> Router {
    Router::new().unary(METHOD, |_ctx, _req: Bytes| async move {
        Ok::<_, Status>(Bytes::from_static(RESPONSE))
    })
}

/// A weft server on a free TCP loopback port and one connected client,
/// on a runtime of their own. Dropping it stops the server.
#[derive(Debug)]
pub struct Loopback {
    /// The runtime client and server run on (drive calls with `block_on`).
    pub rt: Runtime,
    /// The connected client.
    pub client: Client,
    _stop: oneshot::Sender<()>,
}

impl Loopback {
    /// Starts the server and connects, plain or encrypted.
    pub fn start(encrypted: bool) -> Loopback {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .expect("a tokio runtime can be built");
        let config = config(encrypted);
        let (stop, stopped) = oneshot::channel::<()>();
        let client = rt.block_on(async {
            let listener = Listener::bind("127.0.0.1:0").await.expect("bind loopback");
            let addr = listener.local_addr().expect("local addr");
            tokio::spawn(weft::serve(listener, router(), config.clone(), async {
                let _ = stopped.await;
            }));
            weft::connect(&addr, &config).await.expect("connect")
        });
        assert_eq!(client.connection().negotiated().encrypted, encrypted);
        Loopback {
            rt,
            client,
            _stop: stop,
        }
    }

    /// One call, to completion; panics on a wrong answer.
    pub fn call(&self) -> Bytes {
        let reply = self
            .rt
            .block_on(self.client.unary(METHOD, Bytes::new()))
            .expect("unary call");
        assert_eq!(reply, RESPONSE);
        reply
    }

    /// One call with a deadline (30 s away, so it never passes), to
    /// completion: its timer, the remaining time sent to the server and
    /// the server's timer are on its path, none of them allocating once
    /// warm. Made inside the runtime: a timer belongs to one.
    pub fn call_with_deadline(&self) -> Bytes {
        let opts = CallOptions::new().timeout(Duration::from_secs(30));
        let reply = self
            .rt
            .block_on(async { self.client.unary_with(METHOD, Bytes::new(), &opts).await })
            .expect("unary call with a deadline");
        assert_eq!(reply, RESPONSE);
        reply
    }

    /// Eight calls at once on the one connection, to completion (joined
    /// with `tokio::join!`, which allocates nothing itself): the path where
    /// the connection task batches writes and streams queue their frames.
    pub fn call_eight(&self) {
        let c = &self.client;
        let one = || c.unary(METHOD, Bytes::new());
        // Pinned here and handed over by reference: tokio's `block_on`
        // boxes a future above 2 KiB in debug builds (which the CI gate
        // runs), and eight joined calls are larger than that there.
        let joined = std::pin::pin!(async {
            tokio::join!(one(), one(), one(), one(), one(), one(), one(), one())
        });
        let replies = self.rt.block_on(joined);
        check_eight(replies);
    }

    /// Sixty-four calls at once on the one connection, to completion: eight
    /// joined groups of eight (`tokio::join!` allocates nothing itself, so
    /// every allocation counted is weft's). Replies then arrive in batches
    /// while earlier ones still hold the read buffer: the path where a
    /// read-buffer policy that allocates per frame shows.
    pub fn call_sixty_four(&self) {
        let c = &self.client;
        let one = || c.unary(METHOD, Bytes::new());
        let eight = || async {
            check_eight(tokio::join!(
                one(),
                one(),
                one(),
                one(),
                one(),
                one(),
                one(),
                one()
            ));
        };
        let joined = std::pin::pin!(async {
            tokio::join!(
                eight(),
                eight(),
                eight(),
                eight(),
                eight(),
                eight(),
                eight(),
                eight()
            )
        });
        self.rt.block_on(joined);
    }
}

type Reply = Result<Bytes, Status>;

/// Panics unless all eight replies are the method's answer.
fn check_eight(replies: (Reply, Reply, Reply, Reply, Reply, Reply, Reply, Reply)) {
    let (a, b, c, d, e, f, g, h) = replies;
    for r in [a, b, c, d, e, f, g, h] {
        assert_eq!(r.expect("unary call"), RESPONSE);
    }
}

/// One unary call over a [`Loopback`] connection.
#[derive(Debug)]
pub struct Unary {
    loopback: Loopback,
}

impl Unary {
    /// A connected pair, plain or encrypted.
    pub fn new(encrypted: bool) -> Self {
        Unary {
            loopback: Loopback::start(encrypted),
        }
    }
}

impl Op for Unary {
    fn run(&mut self) {
        std::hint::black_box(self.loopback.call());
    }
}

/// One unary call with a deadline over a plain [`Loopback`] connection.
#[derive(Debug)]
pub struct UnaryDeadline {
    loopback: Loopback,
}

impl UnaryDeadline {
    /// A connected plain pair.
    pub fn new() -> Self {
        UnaryDeadline {
            loopback: Loopback::start(false),
        }
    }
}

impl Default for UnaryDeadline {
    fn default() -> Self {
        Self::new()
    }
}

impl Op for UnaryDeadline {
    fn run(&mut self) {
        std::hint::black_box(self.loopback.call_with_deadline());
    }
}

/// Concurrent unary calls over one plain [`Loopback`] connection: a
/// batch of eight ([`Loopback::call_eight`]) or of sixty-four
/// ([`Loopback::call_sixty_four`]) per op.
#[derive(Debug)]
pub struct UnaryJoined {
    loopback: Loopback,
    batch: fn(&Loopback),
}

impl UnaryJoined {
    /// Eight calls per op.
    pub fn eight() -> Self {
        Self::with(Loopback::call_eight)
    }

    /// Sixty-four calls per op.
    pub fn sixty_four() -> Self {
        Self::with(Loopback::call_sixty_four)
    }

    fn with(batch: fn(&Loopback)) -> Self {
        UnaryJoined {
            loopback: Loopback::start(false),
            batch,
        }
    }
}

impl Op for UnaryJoined {
    fn run(&mut self) {
        (self.batch)(&self.loopback);
    }
}
