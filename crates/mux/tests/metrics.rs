//! The stream refusals counter (`weft_mux::STREAMS_REFUSED`): the
//! sans-I/O session reports each refusal as `Event::Refused`, and the
//! driver counts it. Read back from metrics-util's `DebuggingRecorder`,
//! installed for this thread (a current-thread runtime runs the
//! connection task here too).

mod support;

use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};
use support::{Scripted, events, resets};
use weft_mux::session::{Event, Role};
use weft_mux::{Config, Reason};
use weft_testkit::{RawPeer, open};

#[test]
fn each_stream_refused_at_the_cap_is_reported_once() {
    let mut cfg = Config::default();
    cfg.max_concurrent_streams(1);
    let mut t = Scripted::server(cfg);
    t.open(1, b"held", false);
    assert_eq!(t.s.accept(), Some(1));
    events(&mut t.s);
    // Over the cap: refused, each one.
    t.open(3, b"over", false);
    t.open(5, b"over", false);
    let refused: Vec<u32> = resets(&t.out())
        .into_iter()
        .filter(|(_, r)| *r == Reason::REFUSED_STREAM)
        .map(|(id, _)| id)
        .collect();
    assert_eq!(refused, [3, 5]);
    assert_eq!(events(&mut t.s), [Event::Refused, Event::Refused]);
}

#[test]
fn the_session_records_no_metrics_itself() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    metrics::with_local_recorder(&recorder, || {
        let mut cfg = Config::default();
        cfg.max_concurrent_streams(1);
        let mut t = Scripted::server(cfg);
        t.open(1, b"held", false);
        t.open(3, b"over", false);
        assert!(events(&mut t.s).contains(&Event::Refused));
    });
    assert_eq!(refusals(&snapshotter), None);
}

#[test]
fn the_driver_counts_each_refusal_once() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    metrics::with_local_recorder(&recorder, || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let mut cfg = Config::default();
            cfg.max_concurrent_streams(1);
            let (_conn, mut incoming, mut peer) = RawPeer::start(Role::Server, cfg, 1 << 16).await;
            peer.send(&open(1, b"held", false)).await.unwrap();
            let _held = incoming.accept().await.expect("stream 1");
            peer.send(&open(3, b"over", false)).await.unwrap();
            assert_eq!(peer.reset_of(3).await, Some(Reason::REFUSED_STREAM));
            peer.send(&open(5, b"over", false)).await.unwrap();
            assert_eq!(peer.reset_of(5).await, Some(Reason::REFUSED_STREAM));
        });
    });
    assert_eq!(refusals(&snapshotter), Some(2));
}

/// The refusals counter's value, if it was ever recorded.
fn refusals(snapshotter: &Snapshotter) -> Option<u64> {
    snapshotter
        .snapshot()
        .into_vec()
        .into_iter()
        .find(|(k, ..)| k.key().name() == weft_mux::STREAMS_REFUSED)
        .map(|(.., v)| match v {
            DebugValue::Counter(n) => n,
            other => panic!("not a counter: {other:?}"),
        })
}
