//! A `#[weft::service]` client on a `Channel` over TCP: it survives a
//! server killed and restarted and an idle period past the server's idle
//! timeout, every shape; a method declared `#[weft(idempotent)]` is resent
//! when its connection dies mid-call, and no other is; and client
//! interceptors and default metadata, on the channel and on the generated
//! client, reach every shape.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use weft::{
    Backoff, CallOptions, Caller, Channel, Code, Config, Context, Listener, Requests, Responses,
    Router, Server, Status,
};

mod support;
use support::Proxy;

/// A user directory with the four shapes.
#[weft::service(package = "dir")]
pub trait Users {
    /// Unary, and safe to resend.
    #[weft(idempotent)]
    async fn get(&self, ctx: Context, id: u32) -> Result<String, Status>;
    /// Server streaming: 0..n.
    async fn list(&self, ctx: Context, n: u32, out: Responses<u32>) -> Result<(), Status>;
    /// Client streaming: the sum.
    async fn sum(&self, ctx: Context, rx: Requests<u32>) -> Result<u32, Status>;
    /// Bidi: each message upper-cased.
    async fn chat(
        &self,
        ctx: Context,
        rx: Requests<String>,
        tx: Responses<String>,
    ) -> Result<(), Status>;
}

/// Counts the calls that reached a handler.
struct Dir(Arc<AtomicUsize>);

impl Users for Dir {
    async fn get(&self, _ctx: Context, id: u32) -> Result<String, Status> {
        self.0.fetch_add(1, Ordering::Relaxed);
        Ok(format!("user {id}"))
    }
    async fn list(&self, _ctx: Context, n: u32, mut out: Responses<u32>) -> Result<(), Status> {
        self.0.fetch_add(1, Ordering::Relaxed);
        for i in 0..n {
            out.send(i).await?;
        }
        Ok(())
    }
    async fn sum(&self, _ctx: Context, mut rx: Requests<u32>) -> Result<u32, Status> {
        self.0.fetch_add(1, Ordering::Relaxed);
        let mut total = 0;
        while let Some(n) = rx.message().await? {
            total += n;
        }
        Ok(total)
    }
    async fn chat(
        &self,
        _ctx: Context,
        mut rx: Requests<String>,
        mut tx: Responses<String>,
    ) -> Result<(), Status> {
        self.0.fetch_add(1, Ordering::Relaxed);
        while let Some(s) = rx.message().await? {
            tx.send(s.to_uppercase()).await?;
        }
        Ok(())
    }
}

const TOKEN: &[u8] = b"x-token";

/// Serves [`Dir`] on a new port with `config`; with `auth`, every call
/// without `x-token: t` is refused `UNAUTHENTICATED`.
async fn serve(config: Config, auth: bool) -> (String, Arc<AtomicUsize>) {
    let hits = Arc::new(AtomicUsize::new(0));
    let router = Router::new().add_service(UsersServer::new(Dir(hits.clone())));
    let mut server = Server::new(router);
    if auth {
        server = server.interceptor(|ctx| match ctx.metadata().get(TOKEN) {
            Some(b"t") => Ok(()),
            _ => Err(Status::new(Code::UNAUTHENTICATED, "no token")),
        });
    }
    (spawn_server(server, config).await, hits)
}

/// Runs `server` on a new port with `config`; its address.
async fn spawn_server(server: Server, config: Config) -> String {
    let listener = Listener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        weft::serve(listener, server, config, std::future::pending())
            .await
            .unwrap();
    });
    addr
}

fn fast_backoff() -> Backoff {
    Backoff::new()
        .base(Duration::from_millis(20))
        .max(Duration::from_millis(100))
}

/// One call of every shape; the first failure, naming its shape.
async fn every_shape<C: Caller>(users: &UsersClient<C>) -> Result<(), (&'static str, Status)> {
    let unary = users.get(7).await.map_err(|e| ("unary", e))?;
    assert_eq!(unary, "user 7");
    let streamed = async {
        let mut list = users.list(3).await?;
        let mut got = Vec::new();
        while let Some(n) = list.message().await? {
            got.push(n);
        }
        Ok::<_, Status>(got)
    };
    assert_eq!(
        streamed.await.map_err(|e| ("server streaming", e))?,
        [0, 1, 2]
    );
    let summed = async {
        let mut sum = users.sum().await?;
        for n in [1, 2, 39] {
            sum.send(n).await?;
        }
        sum.finish().await
    };
    assert_eq!(summed.await.map_err(|e| ("client streaming", e))?, 42);
    let chatted = async {
        let mut chat = users.chat().await?;
        chat.send("hi".to_owned()).await?;
        let reply = chat.message().await?;
        chat.close_send().await?;
        Ok::<_, Status>(reply)
    };
    assert_eq!(
        chatted.await.map_err(|e| ("bidi", e))?.as_deref(),
        Some("HI")
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_generated_client_on_a_channel_survives_kills_restarts_and_idle_timeouts() {
    // The server closes connections idle for 200 ms (30 s by default).
    let idle = Duration::from_millis(200);
    let (backend, hits) = serve(Config::new().idle_timeout(Some(idle)), false).await;
    let mut proxy = Proxy::start("127.0.0.1:0", backend.clone()).await;
    let front = proxy.addr.clone();
    // `get` is declared idempotent on the trait: nothing to declare here.
    let channel = Channel::builder()
        .backoff(fast_backoff())
        .connect_lazy(&front, &Config::new())
        .unwrap();
    let users = UsersClient::new(channel);
    every_shape(&users).await.unwrap();

    // Unary calls from 8 tasks while the server is killed (every
    // connection cut) and restarted twice.
    let done = Arc::new(AtomicUsize::new(0));
    let mut load = tokio::task::JoinSet::new();
    for _ in 0..8 {
        let (users, done) = (users.clone(), done.clone());
        load.spawn(async move {
            let mut failed = Vec::new();
            while done.load(Ordering::Relaxed) == 0 {
                let opts = CallOptions::new().timeout(Duration::from_secs(10));
                if let Err(e) = users.get_with(1, &opts).await {
                    failed.push(e);
                }
            }
            failed
        });
    }
    for _ in 0..2 {
        let before = hits.load(Ordering::Relaxed);
        let flowing = || (hits.load(Ordering::Relaxed) >= before + 100).then_some(());
        weft_testkit::eventually(flowing, || "no call got through").await;
        proxy.kill();
        tokio::time::sleep(Duration::from_millis(50)).await;
        proxy = Proxy::start(&front, backend.clone()).await;
    }
    let before = hits.load(Ordering::Relaxed);
    let flowing = || (hits.load(Ordering::Relaxed) >= before + 100).then_some(());
    weft_testkit::eventually(flowing, || "no call after the second restart").await;
    done.store(1, Ordering::Relaxed);
    let mut failed = Vec::new();
    while let Some(r) = load.join_next().await {
        failed.extend(r.unwrap());
    }
    assert!(failed.is_empty(), "retry-safe calls failed: {failed:?}");
    assert!(proxy.accepted.load(Ordering::Relaxed) > 0, "reconnected");

    // Every shape opens on a new connection after a kill...
    proxy.kill();
    tokio::time::sleep(Duration::from_millis(50)).await;
    let proxy = Proxy::start(&front, backend.clone()).await;
    every_shape(&users).await.unwrap();
    // ... and after the server closed the idle connection.
    let accepted = proxy.accepted.load(Ordering::Relaxed);
    tokio::time::sleep(idle * 3).await;
    every_shape(&users).await.unwrap();
    assert!(
        proxy.accepted.load(Ordering::Relaxed) > accepted,
        "the idle timeout closed the connection and the channel made a new one"
    );
}

/// Two methods alike but for their declared idempotency.
#[weft::service(package = "ledger")]
pub trait Ledger {
    /// Safe to run twice.
    #[weft(idempotent)]
    async fn balance(&self, ctx: Context, account: u32) -> Result<u64, Status>;
    /// Not declared: a lost call is the caller's to judge.
    async fn deposit(&self, ctx: Context, amount: u64) -> Result<u64, Status>;
}

/// Each method's first call never answers (until its connection dies);
/// later ones answer at once. Counts the calls that reached a handler.
#[derive(Default)]
struct HangFirst {
    balance: AtomicUsize,
    deposit: AtomicUsize,
}

impl HangFirst {
    async fn answer(calls: &AtomicUsize, value: u64) -> Result<u64, Status> {
        if calls.fetch_add(1, Ordering::SeqCst) == 0 {
            std::future::pending::<()>().await;
        }
        Ok(value)
    }
}

impl Ledger for HangFirst {
    async fn balance(&self, _ctx: Context, _account: u32) -> Result<u64, Status> {
        HangFirst::answer(&self.balance, 100).await
    }
    async fn deposit(&self, _ctx: Context, amount: u64) -> Result<u64, Status> {
        HangFirst::answer(&self.deposit, amount).await
    }
}

#[tokio::test]
async fn a_method_declared_idempotent_is_resent_after_its_connection_dies_and_no_other() {
    let ledger = Arc::new(HangFirst::default());
    let router = Router::new().add_service(LedgerServer::from_arc(ledger.clone()));
    let backend = spawn_server(Server::new(router), Config::new()).await;
    let mut proxy = Proxy::start("127.0.0.1:0", backend.clone()).await;
    let front = proxy.addr.clone();
    // No `ChannelBuilder::idempotent`: the generated client marks the call.
    let channel = Channel::builder()
        .backoff(fast_backoff())
        .connect_lazy(&front, &Config::new())
        .unwrap();
    let client = LedgerClient::new(channel);

    // The connection dies with each method's first call in its handler.
    let mut cut = async |calls: &AtomicUsize| {
        weft_testkit::eventually(
            || (calls.load(Ordering::SeqCst) == 1).then_some(()),
            || "the call never reached its handler",
        )
        .await;
        proxy.kill();
        tokio::time::sleep(Duration::from_millis(50)).await;
        proxy = Proxy::start(&front, backend.clone()).await;
    };

    let call = tokio::spawn({
        let client = client.clone();
        async move { client.balance(7).await }
    });
    cut(&ledger.balance).await;
    assert_eq!(
        call.await.unwrap().unwrap(),
        100,
        "resent on a new connection"
    );
    assert_eq!(ledger.balance.load(Ordering::SeqCst), 2);

    let call = tokio::spawn({
        let client = client.clone();
        async move { client.deposit(5).await }
    });
    cut(&ledger.deposit).await;
    let e = call.await.unwrap().unwrap_err();
    assert_eq!(e.code(), Code::UNAVAILABLE, "{e}");
    assert_eq!(ledger.deposit.load(Ordering::SeqCst), 1, "sent once");
}

/// An interceptor that adds the token to every call.
fn add_token(call: &mut weft::Outgoing<'_>) -> Result<(), Status> {
    call.set_metadata(TOKEN, b"t");
    Ok(())
}

/// An interceptor that refuses every call before it is sent.
fn refuse(call: &mut weft::Outgoing<'_>) -> Result<(), Status> {
    Err(Status::new(
        Code::PERMISSION_DENIED,
        format!("{} refused here", call.method()),
    ))
}

#[tokio::test]
async fn interceptors_on_a_channel_and_on_a_generated_client_see_every_shape() {
    let (addr, hits) = serve(Config::new(), true).await;
    let channel = Channel::new(&addr, &Config::new()).unwrap();

    // Without the token, the server refuses every shape.
    let bare = UsersClient::new(channel.clone());
    let (_, e) = every_shape(&bare).await.unwrap_err();
    assert_eq!(e.code(), Code::UNAUTHENTICATED, "{e}");

    // A closure on the generated client adds it to every shape.
    every_shape(&UsersClient::with_interceptor(channel.clone(), add_token))
        .await
        .unwrap();
    // The same on the channel, and on a one-connection client.
    every_shape(&UsersClient::new(
        channel.clone().with_interceptor(add_token),
    ))
    .await
    .unwrap();
    let client = channel.client().await.unwrap();
    every_shape(&UsersClient::with_interceptor(client.clone(), add_token))
        .await
        .unwrap();

    // Default metadata: every shape carries it, unless the call sets its own.
    let defaulted = UsersClient::new(channel.clone().with_metadata(TOKEN, b"t"));
    every_shape(&defaulted).await.unwrap();
    let own = CallOptions::new().metadata(TOKEN, b"mine");
    let e = defaulted.get_with(1, &own).await.unwrap_err();
    assert_eq!(e.code(), Code::UNAUTHENTICATED, "the call's own entry won");

    // A refusal is each shape's error from the call, and nothing is sent.
    let before = hits.load(Ordering::Relaxed);
    for refusing in [
        UsersClient::with_interceptor(channel.clone(), refuse),
        UsersClient::new(
            channel
                .clone()
                .with_interceptor(add_token)
                .with_interceptor(refuse),
        ),
    ] {
        let e = refusing.get(1).await.unwrap_err();
        assert_eq!(e.code(), Code::PERMISSION_DENIED, "{e}");
        assert_eq!(e.message(), format!("{} refused here", UsersMethods::GET));
        let e = refusing.list(1).await.unwrap_err();
        assert_eq!(e.code(), Code::PERMISSION_DENIED, "{e}");
        let e = refusing.sum().await.unwrap_err();
        assert_eq!(e.code(), Code::PERMISSION_DENIED, "{e}");
        let e = refusing.chat().await.unwrap_err();
        assert_eq!(e.code(), Code::PERMISSION_DENIED, "{e}");
    }
    let e = UsersClient::with_interceptor(client, refuse)
        .chat()
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::PERMISSION_DENIED, "{e}");
    assert_eq!(
        hits.load(Ordering::Relaxed),
        before,
        "no refused call was sent"
    );

    // The channel's raw calls pass its interceptors too.
    let raw = channel.with_interceptor(refuse);
    let e = raw
        .unary(UsersMethods::GET, weft::Bytes::new())
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::PERMISSION_DENIED, "{e}");
    let e = raw
        .bidi(UsersMethods::CHAT, &CallOptions::new())
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::PERMISSION_DENIED, "{e}");
}

#[cfg(feature = "tower")]
#[tokio::test]
async fn a_generated_client_runs_over_a_tower_stack_around_a_channel_or_a_client() {
    use tower::ServiceBuilder;
    use weft::{OpenRequest, TowerCaller};

    let (addr, hits) = serve(Config::new(), true).await;
    let channel = Channel::new(&addr, &Config::new()).unwrap();
    // A layer that sees every call it opens, and adds the token.
    let opened = Arc::new(AtomicUsize::new(0));
    let stack = ServiceBuilder::new().map_request({
        let opened = opened.clone();
        move |mut r: OpenRequest| {
            opened.fetch_add(1, Ordering::Relaxed);
            let with_token = r.options().clone().metadata(TOKEN, b"t");
            *r.options_mut() = with_token;
            r
        }
    });
    let on_channel = UsersClient::new(TowerCaller::new(stack.clone().service(channel.clone())));
    every_shape(&on_channel).await.unwrap();
    assert_eq!(
        opened.load(Ordering::Relaxed),
        4,
        "every shape passed the layer"
    );
    let client = channel.client().await.unwrap();
    let on_client = UsersClient::new(TowerCaller::new(stack.service(client.open_service())));
    every_shape(&on_client).await.unwrap();
    assert_eq!(opened.load(Ordering::Relaxed), 8);
    let r = on_client
        .get_response(3, &CallOptions::new())
        .await
        .unwrap();
    assert_eq!(r.message(), "user 3");

    // Its interceptors run before the stack: a refusal sends nothing.
    let before = hits.load(Ordering::Relaxed);
    let refusing = UsersClient::with_interceptor(on_channel.into_inner(), refuse);
    assert_eq!(
        refusing.get(1).await.unwrap_err().code(),
        Code::PERMISSION_DENIED
    );
    assert_eq!(
        refusing.chat().await.unwrap_err().code(),
        Code::PERMISSION_DENIED
    );
    assert_eq!(opened.load(Ordering::Relaxed), 9, "only get_response since");
    assert_eq!(hits.load(Ordering::Relaxed), before);

    // As the stack's innermost service, the channel sends each try with
    // the options its own interceptors fixed (here: the token), not the
    // request's as the stack left them.
    let bare = ServiceBuilder::new().service(channel.clone().with_interceptor(add_token));
    every_shape(&UsersClient::new(TowerCaller::new(bare)))
        .await
        .unwrap();
}
