//! A request wakes the accepting task directly: while `Incoming::accept`
//! waits, it is the socket's waiter and reads the request itself, so a
//! server that answers inline (as the rpc server does) handles a sequential
//! round trip on one task, without waking the connection task first.
//!
//! The server's transport records which task read each chunk of bytes; on a
//! current-thread runtime the order of wake-ups is fixed, so every request
//! after the first must be read on the accepting task (and none on it when
//! the task waits with `poll_accept`, which leaves reading to the
//! connection task).

mod support;

use bytes::Bytes;
use support::io::TestIo;
use weft_mux::{Config, Metadata};
use weft_testkit::pair_over;

/// Runs 100 sequential unary calls (after one to warm up) against a server
/// that answers each inline on its accepting task, which waits with
/// `accept()` or, with `polled`, with `poll_accept`. Returns how many
/// reads of the server's socket ran on the accepting task, and elsewhere.
async fn sequential_calls(polled: bool) -> (usize, usize) {
    let (a, b) = tokio::io::duplex(64 * 1024);
    let server_io = TestIo::new(b);
    let reads = server_io.read_tasks();
    let ((client, _client_incoming), (_server, mut incoming)) =
        pair_over(a, server_io, Config::default(), Config::default()).await;
    let acceptor = tokio::spawn(async move {
        loop {
            let accepted = if polled {
                std::future::poll_fn(|cx| incoming.poll_accept(cx)).await
            } else {
                incoming.accept().await
            };
            let Some(mut st) = accepted else { return };
            if let Ok(Some(c)) = st.recv().await {
                let _ = st.send(c.data, true).await;
            }
        }
    });
    let call = |i: u32| {
        let client = client.clone();
        async move {
            let msg = Bytes::from(format!("call {i}"));
            let mut st = client
                .open(Metadata::new(), msg.clone(), true)
                .await
                .unwrap();
            let reply = st.recv().await.unwrap().unwrap();
            assert_eq!(reply.data, msg);
        }
    };
    // The first call may find the connection task watching the socket.
    call(0).await;
    reads.lock().unwrap().clear();
    for i in 1..=100 {
        call(i).await;
    }
    let reads = std::mem::take(&mut *reads.lock().unwrap());
    let here = reads.iter().filter(|t| **t == Some(acceptor.id())).count();
    (here, reads.len() - here)
}

#[tokio::test(flavor = "current_thread")]
async fn the_accepting_task_reads_each_request_itself() {
    let (here, elsewhere) = sequential_calls(false).await;
    assert!(here >= 100, "{here} reads on the acceptor");
    assert_eq!(
        elsewhere,
        0,
        "{elsewhere} of {} reads ran on another task than the acceptor",
        here + elsewhere
    );
}

#[tokio::test(flavor = "current_thread")]
async fn poll_accept_leaves_reading_to_the_connection_task() {
    let (here, elsewhere) = sequential_calls(true).await;
    assert_eq!(here, 0, "poll_accept read the socket {here} times");
    assert!(elsewhere >= 100, "{elsewhere} reads elsewhere");
}
