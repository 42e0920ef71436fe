//! Connection-level counters through the `metrics` facade: handshake
//! failures by side and reason, admission refusals by reason, key updates
//! by direction. Read back from metrics-util's `DebuggingRecorder`,
//! installed for the test's thread: the tests run on a current-thread
//! runtime, so the server's tasks record into it too.

use bytes::Bytes;
use metrics::LocalRecorderGuard;
use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};
use weft::{Config, EncryptionPolicy, Listener, Router};
use weft_testkit::eventually;

fn record() -> (LocalRecorderGuard<'static>, Snapshotter) {
    let r: &'static DebuggingRecorder = Box::leak(Box::new(DebuggingRecorder::new()));
    (metrics::set_default_local_recorder(r), r.snapshotter())
}

/// The counter `name` with exactly `labels`, summed over snapshots taken
/// so far (a snapshot resets the recorder's counters).
#[derive(Default)]
struct Counts(Vec<(String, Labels, u64)>);

type Labels = Vec<(String, String)>;

impl Counts {
    fn take(&mut self, s: &Snapshotter) -> &Self {
        for (k, _, _, v) in s.snapshot().into_vec() {
            if let DebugValue::Counter(n) = v {
                let key = k.key();
                let labels = key
                    .labels()
                    .map(|l| (l.key().to_owned(), l.value().to_owned()))
                    .collect();
                self.0.push((key.name().to_owned(), labels, n));
            }
        }
        self
    }

    fn get(&self, name: &str, labels: &[(&str, &str)]) -> u64 {
        self.0
            .iter()
            .filter(|(n, ls, _)| {
                n == name
                    && ls.len() == labels.len()
                    && labels
                        .iter()
                        .all(|(k, v)| ls.iter().any(|(lk, lv)| lk == k && lv == v))
            })
            .map(|(_, _, n)| n)
            .sum()
    }
}

fn router() -> Router {
    Router::new().unary("echo", |_ctx, req: Bytes| async move { Ok(req) })
}

/// A server on a loopback port for the test's lifetime.
async fn start(config: Config) -> String {
    let listener = Listener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(weft::serve(
        listener,
        router(),
        config,
        std::future::pending(),
    ));
    addr
}

fn keyed(psk: u8) -> Config {
    Config::new()
        .encryption(EncryptionPolicy::Required)
        .psk([psk; 32])
}

const FAILURES: &str = "weft_handshake_failures_total";

#[tokio::test(flavor = "current_thread")]
async fn a_key_mismatch_counts_one_authentication_failure_on_each_side() {
    let (_local, snap) = record();
    let addr = start(keyed(1)).await;
    let e = weft::connect(&addr, &keyed(2)).await.unwrap_err();
    assert_eq!(weft::handshake_reason(&e), "authentication", "{e}");
    let mut counts = Counts::default();
    let client = [("side", "client"), ("reason", "authentication")];
    let server = [("side", "server"), ("reason", "authentication")];
    eventually(
        || (counts.take(&snap).get(FAILURES, &server) == 1).then_some(()),
        || "the server's failure is counted",
    )
    .await;
    assert_eq!(counts.get(FAILURES, &client), 1);
    // A good client afterwards adds no failure.
    weft::connect(&addr, &keyed(1)).await.unwrap();
    counts.take(&snap);
    assert_eq!(counts.get(FAILURES, &client), 1);
    assert_eq!(counts.get(FAILURES, &server), 1);
}

#[tokio::test(flavor = "current_thread")]
async fn a_refusal_at_the_connection_cap_is_counted_on_both_sides() {
    let (_local, snap) = record();
    let addr = start(keyed(3).max_connections(Some(1))).await;
    let first = weft::connect(&addr, &keyed(3)).await.unwrap();
    let e = weft::connect(&addr, &keyed(3)).await.unwrap_err();
    assert!(e.is_retry_safe(), "{e}");
    assert_eq!(weft::handshake_reason(&e), "refused");
    let mut counts = Counts::default();
    let cap = [("reason", "connection_cap")];
    eventually(
        || {
            (counts
                .take(&snap)
                .get("weft_admission_refusals_total", &cap)
                == 1)
                .then_some(())
        },
        || "the refusal is counted",
    )
    .await;
    assert_eq!(
        counts.get(FAILURES, &[("side", "client"), ("reason", "refused")]),
        1
    );
    drop(first);
}

#[tokio::test(flavor = "current_thread")]
async fn a_client_with_metrics_off_counts_no_failure() {
    let (_local, snap) = record();
    let addr = start(keyed(4)).await;
    // The client counts before it returns the error: nothing to wait for.
    let e = weft::connect(&addr, &keyed(5).metrics(weft::Metrics::Off))
        .await
        .unwrap_err();
    assert_eq!(weft::handshake_reason(&e), "authentication", "{e}");
    let mut counts = Counts::default();
    counts.take(&snap);
    assert_eq!(
        counts.get(
            FAILURES,
            &[("side", "client"), ("reason", "authentication")]
        ),
        0,
        "{:?}",
        counts.0
    );
}

#[tokio::test(flavor = "current_thread")]
async fn key_updates_are_counted_by_direction() {
    let (_local, snap) = record();
    let config = keyed(6).rekey_after(8, 1 << 20);
    let addr = start(config.clone()).await;
    let c = weft::connect(&addr, &config).await.unwrap();
    for i in 0..40u32 {
        let body = Bytes::from(i.to_be_bytes().to_vec());
        assert_eq!(c.unary("echo", body.clone()).await.unwrap(), body);
    }
    let mut counts = Counts::default();
    counts.take(&snap);
    let sent = counts.get(weft::transform::KEY_UPDATES, &[("direction", "sent")]);
    let received = counts.get(weft::transform::KEY_UPDATES, &[("direction", "received")]);
    // 40 calls are at least 80 records each way between client and
    // server, so each side updated its key several times: every update
    // sent by one side is received by the other, in the same process.
    assert!(sent >= 10, "sent {sent}: {:?}", counts.0);
    assert_eq!(sent, received, "{:?}", counts.0);
}
