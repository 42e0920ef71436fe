//! Progress deadlines (hostile catalogue item 46) on the sans-I/O session
//! with a virtual clock: a stream that waits on a silent peer is reset with
//! `TIMEOUT`; one that progresses, or waits on the local application, is not.

mod support;

use std::time::Duration;

use bytes::Bytes;
use support::{Scripted, bytes, drain, resets};
use weft_mux::{Config, Metadata, Reason};

const TIMEOUT: Duration = Duration::from_secs(10);

fn server() -> Scripted {
    let mut c = Config::default();
    c.progress_timeout(Some(TIMEOUT)).idle_timeout(None);
    Scripted::server(c)
}

/// Advances the clock in one-second steps, as a driver wakes at each
/// deadline.
fn wait(t: &mut Scripted, d: Duration) {
    let steps = d.as_millis() / 1000;
    for _ in 0..steps {
        t.advance(Duration::from_secs(1));
    }
    t.advance(d - Duration::from_secs(steps as u64));
}

fn timed_out(t: &mut Scripted, id: u32) -> bool {
    resets(&t.out()).contains(&(id, Reason::TIMEOUT))
}

#[test]
fn item_46_a_half_open_stream_from_a_silent_peer_is_reset() {
    let mut t = server();
    t.open(1, b"part of a message", false);
    assert_eq!(t.s.accept(), Some(1));
    let _ = drain(&mut t.s, 1);
    wait(&mut t, TIMEOUT - Duration::from_millis(1));
    assert!(!timed_out(&mut t, 1), "not before one timeout");
    wait(&mut t, TIMEOUT / 2 + Duration::from_millis(1));
    assert!(
        timed_out(&mut t, 1),
        "reset within 1.5 timeouts of its last frame"
    );
    let (_, ended, err) = drain(&mut t.s, 1);
    assert!(!ended && err.is_some_and(|e| e.reason() == Some(Reason::TIMEOUT)));
    assert!(!t.s.is_closed(), "only the stream goes");
}

#[test]
fn a_stream_that_keeps_progressing_is_never_reset() {
    let mut t = server();
    t.open(1, b"", false);
    assert_eq!(t.s.accept(), Some(1));
    for _ in 0..40 {
        t.advance(Duration::from_secs(3));
        t.data(1, Bytes::from_static(b"tick"), false);
        let _ = drain(&mut t.s, 1);
        assert!(!timed_out(&mut t, 1));
    }
}

/// A stalled stream is not kept alive by frames that move nothing: empty
/// `DATA` frames, or window updates while it has nothing waiting to send.
#[test]
fn frames_that_carry_nothing_do_not_count_as_progress() {
    let mut t = server();
    t.open(1, b"part of a message", false);
    t.open(3, b"part of another", false);
    assert_eq!(t.s.accept(), Some(1));
    assert_eq!(t.s.accept(), Some(3));
    let _ = (drain(&mut t.s, 1), drain(&mut t.s, 3));
    let mut reset = (false, false);
    for _ in 0..6 {
        t.advance(Duration::from_secs(3));
        t.data(1, Bytes::new(), false);
        t.feed(weft_frame::Frame::window_update(3, 1024));
        let out = resets(&t.out());
        reset.0 |= out.contains(&(1, Reason::TIMEOUT));
        reset.1 |= out.contains(&(3, Reason::TIMEOUT));
    }
    assert!(reset.0, "empty DATA frames kept a stalled stream alive");
    assert!(reset.1, "window updates kept a stalled stream alive");
}

#[test]
fn a_stream_waiting_on_the_local_application_is_not_reset() {
    let mut t = server();
    // The request is complete; a slow handler has not answered yet.
    t.open(1, b"request", true);
    assert_eq!(t.s.accept(), Some(1));
    let _ = drain(&mut t.s, 1);
    // And one whose data the application has not read.
    t.open(3, b"unread", false);
    assert_eq!(t.s.accept(), Some(3));
    for _ in 0..20 {
        wait(&mut t, Duration::from_secs(5));
        let out = resets(&t.out());
        assert!(out.is_empty(), "{out:?}");
    }
}

#[test]
fn item_31_a_send_stalled_by_a_peer_that_grants_no_credit_is_reset() {
    let mut t = server();
    t.open(1, b"", true);
    assert_eq!(t.s.accept(), Some(1));
    // More than the peer's stream window (256 KiB): the rest waits for
    // credit that never comes.
    for _ in 0..5 {
        t.s.send(1, Metadata::new(), bytes(64 * 1024), false)
            .unwrap();
        let _ = t.out();
    }
    wait(&mut t, TIMEOUT + TIMEOUT / 2);
    assert!(timed_out(&mut t, 1));
}

#[test]
fn a_stream_that_spent_its_credit_with_nothing_left_to_send_is_not_reset() {
    let mut t = server();
    t.open(1, b"request", true);
    assert_eq!(t.s.accept(), Some(1));
    let _ = drain(&mut t.s, 1);
    // Exactly the peer's stream window (256 KiB): all of it goes, the
    // window is spent, nothing waits for credit.
    for _ in 0..4 {
        t.s.send(1, Metadata::new(), bytes(64 * 1024), false)
            .unwrap();
        let _ = t.out();
    }
    for _ in 0..10 {
        wait(&mut t, Duration::from_secs(5));
        let out = resets(&t.out());
        assert!(out.is_empty(), "{out:?}");
    }
}

#[test]
fn a_tick_woken_half_a_timeout_late_moves_the_next_one_on() {
    let mut t = server();
    let start = t.now;
    assert_eq!(t.s.poll_timeout(), Some(start + TIMEOUT / 2));
    // Woken exactly one tick late: the next tick is half a timeout on,
    // not due at once.
    t.advance(TIMEOUT);
    assert_eq!(t.s.poll_timeout(), Some(t.now + TIMEOUT / 2));
}
