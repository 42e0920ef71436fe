//! The stream refusals counter (`weft_mux::STREAMS_REFUSED`) read back
//! from metrics-util's `DebuggingRecorder`, installed for this thread
//! (the session is sans-I/O: everything runs here).

mod support;

use metrics_util::debugging::{DebugValue, DebuggingRecorder};
use support::{Scripted, resets};
use weft_mux::{Config, Reason};

#[test]
fn each_stream_refused_at_the_cap_is_counted_once() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    metrics::with_local_recorder(&recorder, || {
        let mut cfg = Config::default();
        cfg.max_concurrent_streams(1);
        let mut t = Scripted::server(cfg);
        t.open(1, b"held", false);
        assert_eq!(t.s.accept(), Some(1));
        // Over the cap: refused, each one.
        t.open(3, b"over", false);
        t.open(5, b"over", false);
        let refused: Vec<u32> = resets(&t.out())
            .into_iter()
            .filter(|(_, r)| *r == Reason::REFUSED_STREAM)
            .map(|(id, _)| id)
            .collect();
        assert_eq!(refused, [3, 5]);
    });
    let counted: Vec<u64> = snapshotter
        .snapshot()
        .into_vec()
        .into_iter()
        .filter(|(k, ..)| k.key().name() == weft_mux::STREAMS_REFUSED)
        .map(|(.., v)| match v {
            DebugValue::Counter(n) => n,
            other => panic!("not a counter: {other:?}"),
        })
        .collect();
    assert_eq!(counted, [2]);
}
