//! Keepalive and idle semantics on the sans-I/O session with a virtual
//! clock (hostile catalogue items 34 and 48): a peer's PINGs count as
//! activity for the idle timeout, our own pings' answers do not, and a
//! silent peer is still closed.

mod support;

use std::time::Duration;

use support::{Pair, Scripted, goaway};
use weft_frame::Frame;
use weft_mux::{Config, Reason};

fn server(idle: Duration) -> Scripted {
    let mut c = Config::default();
    c.idle_timeout(Some(idle));
    Scripted::server(c)
}

#[test]
fn a_peer_pinging_more_often_than_the_idle_timeout_is_never_closed() {
    let mut t = server(Duration::from_secs(30));
    // A client with keepalive every 5 s, for ten minutes.
    for i in 0..120u64 {
        t.advance(Duration::from_secs(5));
        assert!(!t.s.is_closed(), "closed after {} s of pings", (i + 1) * 5);
        t.feed(Frame::ping(i.to_be_bytes(), false));
        let out = t.out();
        assert!(goaway(&out).is_none());
    }
    // Then it goes silent: closed one idle timeout after its last ping.
    t.advance(Duration::from_secs(29));
    assert!(!t.s.is_closed());
    t.advance(Duration::from_secs(1));
    let out = t.out();
    assert_eq!(goaway(&out), Some(Reason::NO_ERROR));
    assert_eq!(t.s.close_cause().unwrap().detail, "idle timeout");
}

#[test]
fn answers_to_our_own_keepalive_do_not_hold_an_idle_connection_open() {
    let mut server = Config::default();
    server
        .idle_timeout(Some(Duration::from_secs(30)))
        .keepalive_interval(Some(Duration::from_secs(5)))
        .keepalive_timeout(Duration::from_secs(20));
    let mut client = Config::default();
    client.idle_timeout(None);
    let mut p = Pair::with(client, server);
    for _ in 0..7 {
        p.advance(Duration::from_secs(5));
        p.drive();
    }
    // The client answered every ping, yet the server's idle timeout fired.
    assert!(p.server.is_closed());
    assert_eq!(p.server.close_cause().unwrap().detail, "idle timeout");
}

#[test]
fn the_deadline_is_the_next_ping_then_its_answer() {
    let mut c = Config::default();
    c.idle_timeout(None)
        .keepalive_interval(Some(Duration::from_secs(5)))
        .keepalive_timeout(Duration::from_secs(20));
    let mut t = Scripted::server(c);
    let start = t.now;
    assert_eq!(t.s.poll_timeout(), Some(start + Duration::from_secs(5)));
    t.advance(Duration::from_secs(5));
    assert!(t.out().iter().any(|f| f.ty == weft_frame::FrameType::PING));
    assert_eq!(
        t.s.poll_timeout(),
        Some(start + Duration::from_secs(25)),
        "the ping's answer is due within the keepalive timeout"
    );
}

#[test]
fn an_ack_that_does_not_echo_our_ping_is_not_its_answer() {
    let mut c = Config::default();
    c.idle_timeout(None)
        .keepalive_interval(Some(Duration::from_secs(5)))
        .keepalive_timeout(Duration::from_secs(20));
    let mut t = Scripted::server(c);
    t.advance(Duration::from_secs(5));
    let ping = t
        .out()
        .into_iter()
        .find(|f| f.ty == weft_frame::FrameType::PING);
    let ours = ping.unwrap().parse_ping().unwrap();
    let mut other = ours;
    other[7] ^= 1;
    t.feed(Frame::ping(other, true));
    t.advance(Duration::from_secs(20));
    assert!(t.s.is_closed(), "the real answer never came");
    assert_eq!(t.s.close_cause().unwrap().reason, Reason::TIMEOUT);
}
