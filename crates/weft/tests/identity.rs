//! Identities through the facade over TCP: the handler sees the client's
//! public key, and a client whose key is not allowed gets an error naming it.

use bytes::Bytes;
use weft::transform::{AllowList, KeyHex, StaticKey};
use weft::{Config, EncryptionPolicy, Listener, Router};

fn router() -> Router {
    Router::new().unary("whoami", |ctx, _req| async move {
        let key = ctx.peer().public_key.unwrap_or([0; 32]);
        Ok(Bytes::from(key.to_vec()))
    })
}

#[tokio::test]
async fn handlers_see_the_clients_public_key_and_strangers_are_named() {
    let (server_key, client_key, stranger) = (
        StaticKey::generate().unwrap(),
        StaticKey::generate().unwrap(),
        StaticKey::generate().unwrap(),
    );
    let allow = AllowList::new([client_key.public_key()]);
    let server_config = Config::new()
        .encryption(EncryptionPolicy::Required)
        .identity(server_key.clone())
        .allow(allow.clone());
    let listener = Listener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(weft::serve(listener, router(), server_config, async {
        let _ = stopped.await;
    }));
    let client = |me: &StaticKey| {
        Config::new()
            .identity(me.clone())
            .server_key(server_key.public_key())
    };
    let c = weft::connect(&addr, &client(&client_key)).await.unwrap();
    let n = c.connection().negotiated();
    assert!(n.encrypted && n.authenticated, "{n:?}");
    assert_eq!(n.peer_key, Some(server_key.public_key()));
    let got = c.unary("whoami", Bytes::new()).await.unwrap();
    assert_eq!(got[..], client_key.public_key());
    let e = weft::connect(&addr, &client(&stranger)).await.unwrap_err();
    let hex = KeyHex(&stranger.public_key()).to_string();
    assert!(
        e.to_string()
            .contains(&format!("our key {hex} is not on its allow-list")),
        "{e}"
    );
    // Allowed from now on, without a restart.
    allow.replace([client_key.public_key(), stranger.public_key()]);
    let s = weft::connect(&addr, &client(&stranger)).await.unwrap();
    assert_eq!(
        s.unary("whoami", Bytes::new()).await.unwrap()[..],
        stranger.public_key()
    );
    let _ = stop.send(());
    server.await.unwrap().unwrap();
}
