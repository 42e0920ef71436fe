//! A small application, end to end over TCP: a typed service with the four
//! call shapes, served with a server layer (auth and timing), health and
//! metrics, called through a `Channel` with a client interceptor, then shut
//! down gracefully (health turns `NOT_SERVING`, the call in flight
//! finishes, the server returns).
//!
//! Run: `cargo run -p weft --features tower --example app` (also run by
//! `cargo test -p weft --features tower`, and by the README's
//! `cargo test --workspace --all-features`).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use metrics_util::debugging::{DebugValue, DebuggingRecorder};
use tokio::time::Instant;
use weft::{
    Channel, Code, Config, Context, Health, Listener, Requests, Responses, Router, Server, Serving,
    Status, layer_fn,
};

/// A notebook: numbered notes.
#[weft::service(package = "app")]
pub trait Notes {
    /// Unary: note `id`, or `NOT_FOUND`.
    async fn get(&self, ctx: Context, id: u32) -> Result<String, Status>;
    /// Server streaming: every note starting with `prefix`.
    async fn list(
        &self,
        ctx: Context,
        prefix: String,
        out: Responses<String>,
    ) -> Result<(), Status>;
    /// Client streaming: adds notes, answers how many there are now.
    async fn add(&self, ctx: Context, notes: Requests<String>) -> Result<u32, Status>;
    /// Bidirectional: each note sent back in capitals, as it arrives.
    async fn shout(
        &self,
        ctx: Context,
        notes: Requests<String>,
        out: Responses<String>,
    ) -> Result<(), Status>;
}

#[derive(Default)]
struct Notebook {
    notes: Mutex<Vec<String>>,
}

impl Notes for Arc<Notebook> {
    async fn get(&self, _ctx: Context, id: u32) -> Result<String, Status> {
        let notes = self.notes.lock().unwrap();
        let note = notes.get(id as usize).cloned();
        note.ok_or_else(|| Status::not_found(format!("no note {id}")))
    }

    async fn list(
        &self,
        _ctx: Context,
        prefix: String,
        mut out: Responses<String>,
    ) -> Result<(), Status> {
        let found: Vec<String> = {
            let notes = self.notes.lock().unwrap();
            notes
                .iter()
                .filter(|n| n.starts_with(&prefix))
                .cloned()
                .collect()
        };
        for note in found {
            out.send(note).await?;
        }
        Ok(())
    }

    async fn add(&self, _ctx: Context, mut notes: Requests<String>) -> Result<u32, Status> {
        while let Some(note) = notes.message().await? {
            self.notes.lock().unwrap().push(note);
        }
        Ok(self.notes.lock().unwrap().len() as u32)
    }

    async fn shout(
        &self,
        _ctx: Context,
        mut notes: Requests<String>,
        mut out: Responses<String>,
    ) -> Result<(), Status> {
        while let Some(note) = notes.message().await? {
            out.send(note.to_uppercase()).await?;
        }
        Ok(())
    }
}

const TOKEN: &[u8] = b"Bearer app-token";

/// The server: the notebook and health, behind auth (health checks pass
/// without a token, as load balancers send none) and a timing layer that
/// logs every call's final status.
fn server(notebook: Arc<Notebook>, health: &Health) -> Server {
    let router = health.install(Router::new().add_service(NotesServer::new(notebook)));
    let timing = layer_fn(|call, next| async move {
        let (method, start) = (call.method().to_owned(), Instant::now());
        let outcome = next.run(call).await;
        let code = outcome.status().code();
        println!("served {method}: {code} in {:?}", start.elapsed());
        Ok(outcome)
    });
    let auth = layer_fn(|call, next| async move {
        let health_check = call.method() == weft::health::HEALTH_METHOD;
        match call.metadata().get(b"authorization") {
            Some(t) if t == TOKEN => Ok(next.run(call).await),
            _ if health_check => Ok(next.run(call).await),
            _ => Err(Status::unauthenticated("no valid token")),
        }
    });
    Server::new(router).layer(timing).layer(auth)
}

/// Runs the whole application once; `Err` if any step misbehaves.
pub async fn run() -> Result<(), Box<dyn std::error::Error>> {
    // Metrics: a recorder for this thread (a real service installs an
    // exporter, e.g. Prometheus, globally). The runtime is current-thread,
    // so the server's tasks record into it too.
    let recorder: &'static DebuggingRecorder = Box::leak(Box::new(DebuggingRecorder::new()));
    let _metrics = metrics::set_default_local_recorder(recorder);

    // The server, on a loopback port, until `stop` fires.
    let health = Health::new();
    let listener = Listener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let shutdown = health.shutdown_after(
        async {
            let _ = stopped.await;
        },
        Duration::from_millis(50),
    );
    let app = server(Arc::default(), &health);
    let serving = tokio::spawn(weft::serve(listener, app, Config::new(), shutdown));

    // The client: a Channel (reconnects, retries what is safe), and a
    // generated client whose interceptor adds the token to every call.
    let channel = Channel::new(&addr, &Config::new())?;
    let bare = NotesClient::new(channel.clone());
    let e = bare.get(0).await.unwrap_err();
    assert_eq!(e.code(), Code::UNAUTHENTICATED, "{e}");
    let notes = NotesClient::with_interceptor(channel, |call| {
        call.set_metadata(b"authorization", TOKEN);
        Ok(())
    });

    // The four shapes.
    let mut add = notes.add().await?;
    for n in ["buy milk", "buy bread", "call ada"] {
        add.send(n.to_owned()).await?;
    }
    assert_eq!(add.finish().await?, 3);
    assert_eq!(notes.get(2).await?, "call ada");
    assert_eq!(notes.get(9).await.unwrap_err().code(), Code::NOT_FOUND);
    let mut list = notes.list("buy".to_owned()).await?;
    let mut bought = Vec::new();
    while let Some(n) = list.message().await? {
        bought.push(n);
    }
    assert_eq!(bought, ["buy milk", "buy bread"]);
    let mut shout = notes.shout().await?;
    shout.send("hello".to_owned()).await?;
    assert_eq!(shout.message().await?.as_deref(), Some("HELLO"));

    // Health, as a load balancer asks it (one connection, no token).
    let probe = weft::connect(&addr, &Config::new()).await?;
    assert_eq!(weft::health::check(&probe, "").await?, Serving::Serving);

    // Metrics: the server counted each method's calls by status code, the
    // one the auth layer refused included.
    let handled = server_handled(recorder);
    println!("weft_rpc_server_handled_total: {handled:?}");
    let get = NotesMethods::GET;
    for (method, code) in [(get, "OK"), (get, "NOT_FOUND"), (get, "UNAUTHENTICATED")] {
        let counted = handled
            .iter()
            .any(|(m, c, n)| m == method && c == code && *n > 0);
        assert!(counted, "no {method} {code} in {handled:?}");
    }

    // Graceful shutdown: health turns NOT_SERVING at once; the bidi call
    // still open finishes; then the server returns.
    stop.send(()).map_err(|()| "the server stopped early")?;
    let not_serving = async {
        while weft::health::check(&probe, "").await? != Serving::NotServing {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        Ok::<_, Status>(())
    };
    tokio::time::timeout(Duration::from_secs(5), not_serving).await??;
    shout.send("bye".to_owned()).await?;
    assert_eq!(shout.message().await?.as_deref(), Some("BYE"));
    shout.close_send().await?;
    assert_eq!(shout.message().await?, None);
    tokio::time::timeout(Duration::from_secs(10), serving).await???;
    println!("the app served the four shapes, health and metrics, and shut down cleanly");
    Ok(())
}

/// The server's `handled` counters: (method, code, count).
fn server_handled(recorder: &DebuggingRecorder) -> Vec<(String, String, u64)> {
    let mut out = Vec::new();
    for (key, _, _, value) in recorder.snapshotter().snapshot().into_vec() {
        let key = key.key();
        if key.name() != "weft_rpc_server_handled_total" {
            continue;
        }
        let label = |name: &str| {
            let l = key.labels().find(|l| l.key() == name);
            l.map(|l| l.value().to_owned()).unwrap_or_default()
        };
        if let DebugValue::Counter(n) = value {
            out.push((label("rpc_method"), label("code"), n));
        }
    }
    out
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    run().await
}

#[cfg(test)]
mod tests {
    /// The whole application, as `main` runs it (CI runs this).
    #[tokio::test]
    async fn the_app_runs() {
        super::run().await.unwrap();
    }
}
