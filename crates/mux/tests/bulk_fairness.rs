//! A large transfer shares its connection fairly: the session hands out
//! data frames round robin, so a small message queued behind a large one
//! leaves after one frame of it; and on a modelled saturated link a small
//! call's p99 beside 1 MiB echoes stays within twice its p99 alone. Both
//! are exact (frame order; a paused clock), not wall-clock timings on a
//! shared machine: the wall-clock figure is `cargo xtask bench --bulk`'s.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use bytes::Bytes;
use weft_frame::FrameType;
use weft_mux::{Config, Connection, Metadata, Stream};
use weft_testkit::{echo_all, pair_over};

mod support;
use support::{Pair, bytes};

const LARGE: usize = 1024 * 1024;

async fn answer(mut st: Stream) -> usize {
    let mut got = 0;
    while let Some(c) = st.recv().await.unwrap() {
        got += c.data.len();
    }
    got
}

#[test]
fn a_small_message_leaves_after_one_frame_of_a_large_one() {
    let mut p = Pair::new();
    let large = p
        .client
        .open(Metadata::new(), Bytes::new(), false, p.now)
        .unwrap();
    let small = p
        .client
        .open(Metadata::new(), Bytes::new(), false, p.now)
        .unwrap();
    p.drive();
    // As much of a large message as the send buffer takes, then a small
    // message on the other stream.
    let room = p.client.send_room(large).unwrap();
    assert!(room > 64 * 1024, "room for more than one frame: {room}");
    p.client
        .send(large, Metadata::new(), bytes(room), false)
        .unwrap();
    p.client
        .send(small, Metadata::new(), Bytes::from_static(b"ping"), true)
        .unwrap();
    let mut ahead = 0;
    loop {
        let f = p.client.poll_transmit().expect("the small frame is queued");
        if f.ty != FrameType::DATA {
            continue;
        }
        if f.stream_id == small {
            break;
        }
        assert_eq!(f.stream_id, large);
        ahead += f.payload.len();
    }
    assert!(
        ahead <= weft_frame::DEFAULT_MAX_PAYLOAD as usize,
        "{ahead} bytes of the large message went first"
    );
}

/// The large-message target's bound, on a modelled link where it can be
/// checked exactly: a small call's p99 beside back-to-back 1 MiB echoes is
/// at most twice its p99 alone. The link (2 ms each way, 200 Mbit/s, a
/// 16 KiB queue, on a paused clock) is saturated by the transfer, and a
/// byte written ahead of the small call costs its transmission time and
/// nothing else: the figure is what weft queues ahead of a small message
/// (its write batch, the frame in flight, the session's frame order), not
/// how busy the machine is. Measured: 6 ms alone and beside (tokio's
/// timer rounds each hop to the millisecond); with 64 KiB frames, 20 ms
/// beside.
#[tokio::test(start_paused = true)]
async fn a_small_calls_p99_beside_a_1_mib_transfer_is_at_most_twice_alone() {
    use weft_testkit::{Link, link_pair};
    let link = Link {
        one_way: Duration::from_millis(2),
        rate: Some(25_000_000),
        queue: 16 * 1024,
    };
    let (a, b) = link_pair(link);
    let config = Config::default();
    let ((client, _), (_server, incoming)) = pair_over(a, b, config.clone(), config).await;
    tokio::spawn(echo_all(incoming));
    let small = || Bytes::from_static(b"ping");
    let p99 = |mut v: Vec<Duration>| {
        v.sort();
        v[(v.len() - 1) * 99 / 100]
    };
    let mut alone = Vec::new();
    for _ in 0..50 {
        alone.push(vcall(&client, small()).await);
    }
    let stop = Arc::new(AtomicBool::new(false));
    let bulk = {
        let (client, stop) = (client.clone(), stop.clone());
        tokio::spawn(async move {
            let large = Bytes::from(vec![7u8; LARGE]);
            let mut n = 0;
            while !stop.load(Ordering::Relaxed) {
                vcall(&client, large.clone()).await;
                n += 1;
            }
            n
        })
    };
    tokio::time::sleep(Duration::from_millis(5)).await;
    let mut beside = Vec::new();
    for _ in 0..50 {
        beside.push(vcall(&client, small()).await);
    }
    stop.store(true, Ordering::Relaxed);
    let echoes = bulk.await.unwrap();
    let (alone, beside) = (p99(alone), p99(beside));
    println!("p99 alone {alone:?}, beside {beside:?}, {echoes} large echoes meanwhile");
    assert!(echoes >= 2, "the transfer ran alongside: {echoes} echoes");
    assert!(
        beside <= alone * 2,
        "p99 beside a 1 MiB transfer {beside:?} against {alone:?} alone"
    );
}

/// [`call`] on tokio's clock (paused in the modelled-link test).
async fn vcall(client: &Connection, body: Bytes) -> Duration {
    let t0 = tokio::time::Instant::now();
    let len = body.len();
    let st = client.open(Metadata::new(), body, true).await.unwrap();
    assert_eq!(answer(st).await, len);
    t0.elapsed()
}
