//! Over a link with 20 ms each way, a fixed 64 KiB stream window (the
//! default first window) caps a transfer at about 1.6 MiB/s. With adaptive windows (the default) the
//! receiver's bandwidth-delay estimates grow its windows and the transfer
//! speeds up; with them off the windows stay and so does the rate.
//!
//! The link is in memory on a paused tokio clock: time moves only while
//! every task waits on it, so the measured rate is the link's and flow
//! control's alone, the same on a loaded machine as on a quiet one.

use std::time::Duration;

use bytes::Bytes;
use tokio::time::Instant;
use weft_mux::{Config, Metadata};
use weft_testkit::{delay_pair, pair_over};

const ONE_WAY: Duration = Duration::from_millis(20);
const MIB: usize = 1 << 20;
/// The transfer: long enough for several growth steps at the slow rate.
const TOTAL: usize = 48 * MIB;
const PIECE: usize = 256 * 1024;

/// What one transfer measured, on the receiving side.
#[derive(Debug)]
struct Run {
    /// Time to receive the first and the last quarter of the bytes.
    first_quarter: Duration,
    last_quarter: Duration,
    total: Duration,
    /// The receiver's connection window and stream window target at the end.
    conn_window: u32,
    stream_window: u32,
}

/// Sends [`TOTAL`] bytes on one stream from client to server over the
/// delayed link; the server reads them as they come.
async fn transfer(adaptive: Option<u32>) -> Run {
    let (a, b) = delay_pair(ONE_WAY);
    let mut config = Config::default();
    config.adaptive_window(adaptive);
    let ((client, _), (server, mut incoming)) = pair_over(a, b, config.clone(), config).await;
    let sender = tokio::spawn(async move {
        let piece = Bytes::from(vec![5u8; PIECE]);
        let mut st = client
            .open(Metadata::new(), Bytes::new(), false)
            .await
            .unwrap();
        for i in 0..TOTAL / PIECE {
            st.send(piece.clone(), i + 1 == TOTAL / PIECE)
                .await
                .unwrap();
        }
        // Keep the connection and the stream (dropping it half open
        // would cancel it) until the receiver is done.
        (client, st)
    });
    let mut st = incoming.accept().await.expect("the stream");
    let t0 = Instant::now();
    let (mut got, mut quarter, mut three_quarters) = (0, None, None);
    while let Some(chunk) = st.recv().await.unwrap() {
        got += chunk.data.len();
        if got >= TOTAL / 4 && quarter.is_none() {
            quarter = Some(t0.elapsed());
        }
        if got >= TOTAL * 3 / 4 && three_quarters.is_none() {
            three_quarters = Some(t0.elapsed());
        }
    }
    let total = t0.elapsed();
    assert_eq!(got, TOTAL);
    let stats = server.stats();
    drop(sender.await.unwrap());
    Run {
        first_quarter: quarter.unwrap(),
        last_quarter: total - three_quarters.unwrap(),
        total,
        conn_window: stats.conn_recv_size,
        stream_window: stats.stream_recv_target,
    }
}

#[tokio::test(start_paused = true)]
async fn windows_grow_on_a_long_link_and_the_rate_follows() {
    let fixed = transfer(None).await;
    let grown = transfer(Some(weft_mux::DEFAULT_WINDOW_CAP)).await;
    println!("fixed: {fixed:?}\ngrown: {grown:?}");
    // Off: the windows stay as configured, and every quarter goes at the
    // window-bound rate (64 KiB per 40 ms round trip: 12 MiB in ~7.7 s).
    assert_eq!(
        (fixed.conn_window, fixed.stream_window),
        (1 << 20, 64 << 10)
    );
    let bound = Duration::from_millis(7200);
    assert!(fixed.first_quarter >= bound && fixed.last_quarter >= bound);
    // On: the windows grew many times over ...
    assert!(
        grown.stream_window >= 16 * (64 << 10) && grown.conn_window >= 4 << 20,
        "{grown:?}"
    );
    // ... and the rate followed: the last quarter at least four times as
    // fast as the first, and the whole at least twice as fast as fixed.
    // (Measured from the 64 KiB first window, granted back at a quarter:
    // off 7.72 s per quarter, 30.9 s in all; on 1.28 s and 0.12 s, 1.92 s,
    // windows 4 MiB. From the former 256 KiB window granted back at a
    // half: off 1.98 s and 1.92 s, 7.74 s; on 0.66 s and 0.12 s, 1.14 s.
    // The margins leave room for changes to the growth schedule, not for
    // noise: the clock is virtual.)
    assert!(grown.last_quarter * 4 <= grown.first_quarter, "{grown:?}");
    assert!(grown.total * 2 <= fixed.total, "{grown:?} vs {fixed:?}");
}
