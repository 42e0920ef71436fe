//! Credentials a hostile or careless party could get wrong, against a real
//! server over TCP: an allow-list that checks nothing, an empty allow-list,
//! and one key pair presented under two encodings.

use bytes::Bytes;
use weft::transform::{AllowList, KeyHex, StaticKey, canonical_key};
use weft::{Config, EncryptionPolicy, Error, Listener, Router};

fn router() -> Router {
    Router::new().unary("whoami", |ctx, _req| async move {
        let key = ctx.peer().public_key.unwrap_or([0; 32]);
        Ok(Bytes::from(key.to_vec()))
    })
}

/// A server on loopback: its address and a handle that stops it.
struct Running {
    addr: String,
    stop: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<Result<(), Error>>,
}

async fn start(config: Config) -> Running {
    let listener = Listener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(weft::serve(listener, router(), config, async {
        let _ = stopped.await;
    }));
    Running { addr, stop, task }
}

impl Running {
    async fn stop(self) {
        let _ = self.stop.send(());
        self.task.await.unwrap().unwrap();
    }
}

/// Finding: with `allow` set and no `identity`, a server ran NN and plain
/// hellos, and the allow-list (empty or not) admitted every client. Now the
/// server does not start, and says what to add.
#[tokio::test]
async fn hostile_an_allow_list_without_an_identity_is_refused_at_serve() {
    let listener = Listener::bind("127.0.0.1:0").await.unwrap();
    let config = Config::new().allow(AllowList::new([]));
    let serving = weft::serve(listener, router(), config, std::future::pending());
    let e = tokio::time::timeout(std::time::Duration::from_secs(5), serving)
        .await
        .expect("serve started with an allow-list that checks nothing")
        .unwrap_err();
    assert!(matches!(e, Error::Config(_)), "{e:?}");
    assert_eq!(
        e.to_string(),
        "invalid configuration: an allow-list needs a key pair of our own (identity): \
         without one no client proves a key and the list would check nothing"
    );
    assert!(!e.is_retry_safe());
}

/// A client ignored `allow`; now it is a config error naming what a client
/// uses instead, and nothing is sent.
#[tokio::test]
async fn an_allow_list_on_a_client_is_a_config_error() {
    let server = start(Config::new()).await;
    let client = Config::new()
        .identity(StaticKey::generate().unwrap())
        .allow(AllowList::new([]));
    let e = weft::connect(&server.addr, &client).await.unwrap_err();
    assert!(
        e.to_string().contains(
            "invalid configuration: an allow-list is for servers and a client would ignore it: \
             to check the server, pin its public key (server_key, with an identity of our own)"
        ),
        "{e}"
    );
    server.stop().await;
}

/// An empty allow-list admits nobody, whatever the client runs: a plain
/// hello, NN, NNpsk0, XX and IK (with a key pair the list does not hold).
#[tokio::test]
async fn hostile_an_empty_allow_list_admits_nobody_in_any_mode() {
    let server_key = StaticKey::generate().unwrap();
    let server = start(
        Config::new()
            .identity(server_key.clone())
            .allow(AllowList::new([])),
    )
    .await;
    let me = StaticKey::generate().unwrap();
    let clients = [
        ("plain", Config::new().encryption(EncryptionPolicy::Off)),
        ("NN", Config::new()),
        ("NNpsk0", Config::new().psk([9; 32])),
        ("XX", Config::new().identity(me.clone())),
        (
            "IK",
            Config::new()
                .identity(me.clone())
                .server_key(server_key.public_key()),
        ),
    ];
    for (mode, client) in clients {
        // XX's client learns of the refusal from its first call (the server
        // checks its key in the third message, after the client is done).
        let refused = match weft::connect(&server.addr, &client).await {
            Err(e) => !e.is_retry_safe(),
            Ok(c) => c.unary("whoami", Bytes::new()).await.is_err(),
        };
        assert!(refused, "{mode}: admitted by an empty allow-list");
    }
    server.stop().await;
}

/// Finding: X25519 ignores bit 255, so `K` and `K | 1 << 255` are one key
/// pair, and comparing raw bytes gave its holder two identities. A client
/// that presents the other encoding is the same client: the handler sees
/// the canonical key, the allow-list treats it as listed, a pin with bit
/// 255 set pins the same server, and a refusal names the canonical key.
#[tokio::test]
async fn hostile_a_key_sent_with_bit_255_set_is_the_same_identity() {
    let (server_key, alice) = (
        StaticKey::generate().unwrap(),
        StaticKey::generate().unwrap(),
    );
    let canonical = alice.public_key();
    let aliased = alice.clone().with_bit_255_set_for_testing();
    assert_ne!(aliased.public_key(), canonical);
    assert_eq!(canonical_key(aliased.public_key()), canonical);
    let allow = AllowList::new([canonical]);
    let server = start(
        Config::new()
            .encryption(EncryptionPolicy::Required)
            .identity(server_key.clone())
            .allow(allow.clone()),
    )
    .await;
    let mut pin = server_key.public_key();
    pin[31] |= 0x80;
    for (pattern, client) in [
        ("XX", Config::new().identity(aliased.clone())),
        (
            "IK",
            Config::new().identity(aliased.clone()).server_key(pin),
        ),
    ] {
        let c = weft::connect(&server.addr, &client).await.unwrap();
        let who = c.unary("whoami", Bytes::new()).await.unwrap();
        assert_eq!(who[..], canonical, "{pattern}: the handler's view");
        let n = c.connection().negotiated();
        assert_eq!(n.peer_key, Some(server_key.public_key()), "{pattern}");
    }
    // Revoked under one encoding is revoked under both.
    let mut listed = canonical;
    listed[31] |= 0x80;
    allow.replace([listed]);
    assert!(allow.contains(&canonical));
    allow.replace([]);
    let client = Config::new().identity(aliased).server_key(pin);
    let e = weft::connect(&server.addr, &client).await.unwrap_err();
    let hex = KeyHex(&canonical).to_string();
    assert!(
        e.to_string()
            .contains(&format!("our key {hex} is not on its allow-list")),
        "{e}"
    );
    assert_eq!(KeyHex(&listed).to_string(), hex, "one key prints one way");
    server.stop().await;
}
