//! Boundaries of the session's rules, each pinned by one test: the edges
//! a mutation test found unchecked (an off-by-one, a swapped `&&`).

mod support;

use std::time::Duration;

use bytes::Bytes;
use support::{Scripted, bytes, drain, events, goaway, resets};
use weft_frame::{Flags, Frame, FrameType};
use weft_mux::session::{Event, Recv};
use weft_mux::{Config, Metadata, Reason};

fn server() -> Scripted {
    Scripted::server(Config::default())
}

/// A server with one accepted stream (id 1) the peer keeps open.
fn with_stream() -> (Scripted, u32) {
    let mut t = server();
    t.open(1, b"", false);
    let id = t.s.accept().unwrap();
    t.out();
    (t, id)
}

#[test]
fn send_some_of_nothing_without_end_sends_nothing() {
    let (mut t, id) = with_stream();
    let (mut md, mut data) = (Metadata::new(), Bytes::new());
    assert_eq!(t.s.send_some(id, &mut md, &mut data, false), Ok(true));
    assert!(t.out().is_empty(), "no frame for an empty piece");
    // The stream still sends normally afterwards.
    let mut data = Bytes::from_static(b"x");
    assert_eq!(t.s.send_some(id, &mut md, &mut data, false), Ok(true));
    let out = t.out();
    assert_eq!(out.len(), 1);
    assert_eq!(&out[0].payload[..], b"x");
}

#[test]
fn send_some_queues_every_piece_behind_a_waiting_one() {
    // A piece sent while another waits for the socket takes the queue;
    // neither it nor its successor may be lost.
    let (mut t, id) = with_stream();
    let mut md = Metadata::new();
    let mut a = Bytes::from_static(b"first");
    assert_eq!(t.s.send_some(id, &mut md, &mut a, false), Ok(true));
    let mut b = Bytes::from_static(b"second");
    assert_eq!(t.s.send_some(id, &mut md, &mut b, false), Ok(true));
    let mut c = Bytes::from_static(b"third");
    assert_eq!(t.s.send_some(id, &mut md, &mut c, true), Ok(true));
    let payloads: Vec<(Vec<u8>, bool)> = t
        .out()
        .iter()
        .filter(|f| f.ty == FrameType::DATA)
        .map(|f| (f.payload.to_vec(), f.is_end_stream()))
        .collect();
    assert_eq!(
        payloads,
        vec![
            (b"first".to_vec(), false),
            (b"second".to_vec(), false),
            (b"third".to_vec(), true)
        ]
    );
}

#[test]
fn send_some_beyond_the_buffer_queues_the_part_that_fits() {
    let mut cfg = Config::default();
    cfg.max_send_buffer(64 * 1024);
    let mut t = Scripted::server(cfg);
    t.open(1, b"", false);
    let id = t.s.accept().unwrap();
    t.out();
    // Block the fast path: something else waits for the socket.
    let mut md = Metadata::new();
    let mut first = Bytes::from_static(b"a");
    assert_eq!(t.s.send_some(id, &mut md, &mut first, false), Ok(true));
    let mut big = bytes(100 * 1024);
    assert_eq!(t.s.send_some(id, &mut md, &mut big, false), Ok(false));
    assert!(!big.is_empty() && big.len() < 100 * 1024);
    let sent: usize = t
        .out()
        .iter()
        .filter(|f| f.ty == FrameType::DATA)
        .map(|f| f.payload.len())
        .sum();
    assert_eq!(sent, 1 + 100 * 1024 - big.len(), "the queued part goes out");
}

#[test]
fn frame_for_our_next_id_not_yet_opened_is_protocol_error() {
    // The server's first own id is 2; it has opened none.
    let mut t = server();
    t.feed(Frame::reset(2, Reason::CANCEL));
    let out = t.out();
    assert_eq!(goaway(&out), Some(Reason::PROTOCOL_ERROR), "{out:?}");
    // Once 2 is open, 4 is the next and still unknown.
    let mut t = server();
    let id =
        t.s.open(Metadata::new(), Bytes::new(), false, t.now)
            .unwrap();
    assert_eq!(id, 2);
    t.out();
    t.feed(Frame::window_update(4, 1000));
    let out = t.out();
    assert_eq!(goaway(&out), Some(Reason::PROTOCOL_ERROR), "{out:?}");
}

#[test]
fn open_of_exactly_the_stream_window_is_accepted() {
    let mut cfg = Config::default();
    cfg.stream_window(64 * 1024);
    let mut t = Scripted::server(cfg);
    t.feed(Frame::new(
        FrameType::OPEN,
        Flags::END_STREAM,
        1,
        bytes(64 * 1024),
    ));
    assert_eq!(resets(&t.out()), vec![]);
    let id = t.s.accept().expect("accepted");
    let (data, ended, err) = drain(&mut t.s, id);
    assert_eq!((data.len(), ended, err), (64 * 1024, true, None));
}

#[test]
fn streams_opened_before_the_peer_settings_get_its_larger_window() {
    use weft_mux::session::{Role, Session, settings_frame};
    let now = std::time::Instant::now();
    let mut c = Session::new(Role::Client, &Config::default(), now);
    // Opened before the peer's settings: the baseline window (64 KiB) holds.
    let id = c
        .open(Metadata::new(), bytes(200 * 1024), false, now)
        .unwrap();
    let sent = |c: &mut Session| -> usize {
        std::iter::from_fn(|| c.poll_transmit())
            .filter(|f| f.stream_id == id)
            .map(|f| f.payload.len())
            .sum()
    };
    assert_eq!(sent(&mut c), 64 * 1024);
    // The peer announces 256 KiB per stream: the open stream gets the
    // difference at once, without a WINDOW_UPDATE for it.
    c.handle_frame(settings_frame(1024 * 1024 - 64 * 1024, 256 * 1024), now);
    assert_eq!(sent(&mut c), 136 * 1024, "the rest goes out");
    assert!(!c.is_closed());
}

#[test]
fn a_reset_drops_the_data_queued_on_the_stream() {
    let (mut t, id) = with_stream();
    t.s.send(id, Metadata::new(), bytes(1000), false).unwrap();
    t.s.reset(id, Reason::CANCEL);
    let out = t.out();
    assert_eq!(resets(&out), vec![(id, Reason::CANCEL)]);
    assert!(
        out.iter().all(|f| f.ty != FrameType::DATA),
        "no DATA after the RESET: {out:?}"
    );
}

#[test]
fn readable_is_raised_once_until_the_queue_is_read() {
    let (mut t, id) = with_stream();
    events(&mut t.s);
    t.data(id, Bytes::from_static(b"a"), false);
    t.data(id, Bytes::from_static(b"b"), false);
    assert_eq!(events(&mut t.s), vec![Event::Readable(id)]);
    assert_eq!(drain(&mut t.s, id), (b"ab".to_vec(), false, None));
    t.data(id, Bytes::from_static(b"c"), false);
    assert_eq!(events(&mut t.s), vec![Event::Readable(id)]);
}

#[test]
fn an_open_with_data_is_incoming_only_and_its_data_kept() {
    let mut t = server();
    t.open(1, b"req", true);
    t.open(3, b"", false);
    // No `Readable` for the OPEN's own data: nobody can wait on it yet;
    // one `Incoming` for the two (see the next test).
    assert_eq!(events(&mut t.s), vec![Event::Incoming]);
    let (a, b) = (t.s.accept().unwrap(), t.s.accept().unwrap());
    assert_eq!((a, b), (1, 3));
    assert_eq!(drain(&mut t.s, 1), (b"req".to_vec(), true, None));
    assert_eq!(drain(&mut t.s, 3), (Vec::new(), false, None));
}

#[test]
fn incoming_is_raised_once_until_the_accept_queue_is_emptied() {
    let mut t = server();
    t.open(1, b"a", true);
    t.open(3, b"b", true);
    t.open(5, b"c", true);
    assert_eq!(events(&mut t.s), vec![Event::Incoming]);
    // Taking some leaves the rest queued: no new event is owed for them,
    // nor for a stream opened while they wait.
    assert_eq!(t.s.accept(), Some(1));
    t.open(7, b"d", true);
    assert_eq!(events(&mut t.s), vec![]);
    let mut taken = Vec::new();
    while let Some(id) = t.s.accept() {
        taken.push(id);
    }
    assert_eq!(
        taken,
        [3, 5, 7],
        "every stream is still handed over, in order"
    );
    // Emptied: the next stream raises it again.
    t.open(9, b"e", true);
    assert_eq!(events(&mut t.s), vec![Event::Incoming]);
    assert_eq!(t.s.accept(), Some(9));
    assert_eq!(t.s.accept(), None);
}

#[test]
fn writable_waits_until_the_queue_is_below_the_buffer() {
    let cap = 64 * 1024;
    let mut cfg = Config::default();
    cfg.max_send_buffer(cap);
    let mut t = Scripted::server(cfg);
    t.open(1, b"", false);
    let id = t.s.accept().unwrap();
    t.out();
    // What one queued item costs beyond its bytes.
    let overhead = cap - t.s.send_room(id).unwrap();
    t.s.send(id, Metadata::new(), bytes(10), false).unwrap();
    t.s.send(id, Metadata::new(), bytes(cap - overhead), false)
        .unwrap();
    assert_eq!(t.s.send_room(id), Ok(0), "full: Writable wanted");
    events(&mut t.s);
    // The first item goes: the queue holds exactly the buffer, still full.
    let f = t.s.poll_transmit().unwrap();
    assert_eq!(f.payload.len(), 10);
    assert_eq!(events(&mut t.s), vec![]);
    t.out();
    assert_eq!(events(&mut t.s), vec![Event::Writable(id)]);
}

#[test]
fn a_close_fails_a_stream_only_the_peer_had_ended() {
    let mut t = server();
    t.open(1, b"req", true);
    let id = t.s.accept().unwrap();
    t.s.close(Reason::NO_ERROR, "bye");
    // The request was read in full, but the answer never went: the reader
    // learns of the close, not a clean end.
    let (data, ended, err) = drain(&mut t.s, id);
    assert_eq!((data, ended), (b"req".to_vec(), false));
    assert!(err.is_some());
}

#[test]
fn a_reset_after_both_ends_sends_nothing() {
    let mut t = server();
    t.open(1, b"req", true);
    let id = t.s.accept().unwrap();
    t.s.send(id, Metadata::new(), Bytes::from_static(b"ok"), true)
        .unwrap();
    t.out();
    t.s.reset(id, Reason::CANCEL);
    assert_eq!(resets(&t.out()), vec![], "the stream had completed");
    assert_eq!(drain(&mut t.s, id), (b"req".to_vec(), true, None));
}

#[test]
fn releasing_a_stream_open_either_way_resets_it() {
    // Our end sent, the peer's half still open.
    let (mut t, id) = with_stream();
    t.s.send(id, Metadata::new(), Bytes::from_static(b"ok"), true)
        .unwrap();
    t.out();
    t.s.release(id, t.now);
    assert_eq!(resets(&t.out()), vec![(id, Reason::CANCEL)]);
    // The peer's end received, ours not sent.
    let mut t = server();
    t.open(1, b"req", true);
    let id = t.s.accept().unwrap();
    t.s.release(id, t.now);
    assert_eq!(resets(&t.out()), vec![(id, Reason::CANCEL)]);
}

#[test]
fn no_stream_credit_is_granted_back_after_the_peers_end() {
    let (mut t, id) = with_stream();
    // Most of the 64 KiB window: well past the quarter that is granted back.
    for i in 0..4 {
        t.data(id, bytes(15 * 1024), i == 3);
    }
    let (data, ended, _) = drain(&mut t.s, id);
    assert_eq!((data.len(), ended), (60 * 1024, true));
    let updates: Vec<u32> = t
        .out()
        .iter()
        .filter(|f| f.ty == FrameType::WINDOW_UPDATE)
        .map(|f| f.stream_id)
        .collect();
    // (The connection's quarter, 256 KiB, is not reached either.)
    assert_eq!(updates, Vec::<u32>::new(), "nothing more will come");
}

#[test]
fn frames_keep_within_the_peers_smaller_payload_limit() {
    let (mut t, id) = with_stream();
    t.s.set_peer_max_payload(16 * 1024);
    t.s.send(id, Metadata::new(), bytes(40 * 1024), true)
        .unwrap();
    let sizes: Vec<usize> = t
        .out()
        .iter()
        .filter(|f| f.ty == FrameType::DATA)
        .map(|f| f.payload.len())
        .collect();
    assert_eq!(sizes, vec![16 * 1024, 16 * 1024, 8 * 1024]);
}

#[test]
fn the_idle_clock_waits_for_the_last_stream_not_any() {
    let mut t = server();
    t.open(1, b"", true);
    t.open(3, b"", false);
    let (a, _b) = (t.s.accept().unwrap(), t.s.accept().unwrap());
    t.s.send(a, Metadata::new(), Bytes::new(), true).unwrap();
    t.s.release(a, t.now);
    t.out();
    assert_eq!(t.s.stats().streams, 1, "one stream left, one open");
    t.advance(Duration::from_secs(60));
    assert!(!t.s.is_closed(), "not idle while a stream is open");
}

#[test]
fn release_if_done_reads_the_clock_only_for_the_last_stream() {
    let mut t = server();
    t.open(1, b"", true);
    t.open(3, b"", false);
    let (a, b) = (t.s.accept().unwrap(), t.s.accept().unwrap());
    assert!(matches!(t.s.recv(a), Recv::End));
    assert!(!t.s.release_if_done(a, || unreachable!("not done yet")));
    t.s.send(a, Metadata::new(), Bytes::new(), true).unwrap();
    t.out();
    // Finished while stream 3 stays: no clock read.
    assert!(t.s.release_if_done(a, || panic!("read the clock")));
    assert_eq!(t.s.stats().streams, 1);
    t.data(b, Bytes::new(), true);
    assert!(matches!(t.s.recv(b), Recv::End));
    t.s.send(b, Metadata::new(), Bytes::new(), true).unwrap();
    t.out();
    // The last one: the idle clock starts at the time it is given.
    let later = t.now + Duration::from_secs(7);
    assert!(t.s.release_if_done(b, || later));
    assert_eq!(t.s.stats().streams, 0);
    assert_eq!(t.s.poll_timeout(), Some(later + Duration::from_secs(30)));
}

#[test]
fn a_releasing_send_releases_once_both_ends_are_in_and_not_before() {
    let mut t = server();
    t.open(1, b"ask", true);
    t.open(3, b"", false);
    let (a, _b) = (t.s.accept().unwrap(), t.s.accept().unwrap());
    let mut released = false;
    let mut clock = || panic!("read the clock: another stream stays");
    // Our end not sent yet: the peer's last piece releases nothing.
    let got = t.s.recv_releasing(a, &mut clock, &mut released);
    assert!(matches!(got, Recv::Chunk(c) if c.end && &c.data[..] == b"ask"));
    assert!(!released);
    assert!(!t.s.is_done_by_app(a), "our end is not queued yet");
    // Our end queued: released in that call, and gone once written.
    let (mut md, mut data) = (Metadata::new(), Bytes::from_static(b"reply"));
    let sent =
        t.s.send_some_releasing(a, (&mut md, &mut data, true), &mut clock, &mut released);
    assert_eq!(sent, Ok(true));
    assert!(released);
    assert!(!t.s.is_done_by_app(a), "released: nothing left to release");
    t.out();
    assert_eq!(t.s.stats().streams, 1, "only stream 3 stays");
}

#[test]
fn a_releasing_send_that_ends_nothing_releases_nothing() {
    let mut t = server();
    t.open(1, b"", true);
    let a = t.s.accept().unwrap();
    assert!(matches!(t.s.recv(a), Recv::End));
    let mut released = false;
    let mut clock = || panic!("nothing to release");
    let (mut md, mut data) = (Metadata::new(), Bytes::from_static(b"part"));
    let sent =
        t.s.send_some_releasing(a, (&mut md, &mut data, false), &mut clock, &mut released);
    assert_eq!(sent, Ok(true));
    assert!(!released);
    assert!(!t.s.is_done_by_app(a), "our end is still to come");
    // A queued end (behind the piece still waiting) releases it too.
    let mut data = Bytes::from_static(b"last");
    let later = t.now + Duration::from_secs(3);
    let mut clock = || later;
    let sent =
        t.s.send_some_releasing(a, (&mut md, &mut data, true), &mut clock, &mut released);
    assert_eq!(sent, Ok(true));
    assert!(released);
    let out = t.out();
    assert!(out.last().is_some_and(|f| f.is_end_stream()));
    assert_eq!(t.s.stats().streams, 0);
}

#[test]
fn a_releasing_recv_releases_at_the_peers_end_after_ours() {
    let mut t = server();
    t.open(1, b"", false);
    let a = t.s.accept().unwrap();
    t.s.send(a, Metadata::new(), Bytes::from_static(b"early"), true)
        .unwrap();
    t.out();
    t.data(a, Bytes::from_static(b"x"), false);
    t.data(a, Bytes::new(), true);
    let mut released = false;
    let later = t.now + Duration::from_secs(5);
    let mut clock = || later;
    // Not the last piece: nothing released.
    let got = t.s.recv_releasing(a, &mut clock, &mut released);
    assert!(matches!(got, Recv::Chunk(c) if !c.end));
    assert!(!released);
    // The bare end: released, and the last stream leaving starts the
    // idle clock at the time given.
    assert!(matches!(
        t.s.recv_releasing(a, &mut clock, &mut released),
        Recv::End
    ));
    assert!(released);
    assert_eq!(t.s.stats().streams, 0);
    assert_eq!(t.s.poll_timeout(), Some(later + Duration::from_secs(30)));
    // A plain `recv` of a stream in the same state releases nothing.
    t.open(3, b"", false);
    let b = t.s.accept().unwrap();
    t.s.send(b, Metadata::new(), Bytes::new(), true).unwrap();
    t.out();
    t.data(b, Bytes::new(), true);
    assert!(matches!(t.s.recv(b), Recv::End));
    assert!(t.s.is_done_by_app(b));
    // Its end taken already: a releasing `recv` that finds only the end
    // releases it.
    released = false;
    assert!(matches!(
        t.s.recv_releasing(b, &mut clock, &mut released),
        Recv::End
    ));
    assert!(released);
    assert_eq!(t.s.stats().streams, 0);
}

#[test]
fn accept_with_metadata_takes_the_open_metadata_and_holds_the_stream() {
    let mut t = server();
    let md = Metadata::builder().method("m").finish();
    let mut open = Frame::new(
        FrameType::OPEN,
        Flags::END_STREAM,
        1,
        Bytes::from_static(b"x"),
    );
    open.metadata = md.clone();
    t.feed(open);
    let (id, got) = t.s.accept_with_metadata().unwrap();
    assert_eq!((id, got), (1, md));
    assert!(
        t.s.open_metadata(1).is_some_and(Metadata::is_empty),
        "taken"
    );
    assert!(t.s.accept_with_metadata().is_none());
    // Accepted: the application holds it, so ending it both ways leaves
    // it done by the application.
    assert!(matches!(t.s.recv(1), Recv::Chunk(c) if c.end));
    t.s.send(1, Metadata::new(), Bytes::new(), true).unwrap();
    assert!(t.s.is_done_by_app(1));
}

/// Opens stream `id`, ends it both ways and releases it at `at`.
fn one_call(t: &mut Scripted, id: u32, at: std::time::Instant) {
    t.open(id, b"", true);
    let s = t.s.accept().unwrap();
    assert!(matches!(t.s.recv(s), Recv::End));
    t.s.send(s, Metadata::new(), Bytes::new(), true).unwrap();
    t.out();
    t.s.release(s, at);
    assert_eq!(t.s.stats().streams, 0);
}

#[test]
fn a_restarted_idle_clock_is_news_only_before_the_last_answer() {
    let idle = Duration::from_secs(30);
    let mut t = server();
    t.s.take_timer_changed();
    let start = t.now;
    // Nothing answered yet: the first idle deadline is news.
    assert_eq!(t.s.poll_timeout(), Some(start + idle));
    one_call(&mut t, 1, start);
    assert!(!t.s.take_timer_changed(), "the same deadline again");
    let later = start + Duration::from_secs(1);
    one_call(&mut t, 3, later);
    assert!(
        !t.s.take_timer_changed(),
        "a later idle deadline than the armed one is no news"
    );
    assert_eq!(t.s.poll_timeout(), Some(later + idle));
    // The last answer was a later deadline (a keepalive's): the idle
    // deadline comes first, so the driver must hear of it.
    let mut c = Config::default();
    c.keepalive_interval(Some(Duration::from_secs(60)));
    let mut t = Scripted::server(c);
    t.open(1, b"", false);
    let s = t.s.accept().unwrap();
    t.out();
    t.s.take_timer_changed();
    assert_eq!(t.s.poll_timeout(), Some(t.now + Duration::from_secs(60)));
    t.data(s, Bytes::new(), true);
    assert!(matches!(t.s.recv(s), Recv::End));
    t.s.send(s, Metadata::new(), Bytes::new(), true).unwrap();
    t.out();
    t.s.release(s, t.now);
    assert!(t.s.take_timer_changed(), "an earlier deadline is news");
    assert_eq!(t.s.poll_timeout(), Some(t.now + idle));
}

#[test]
fn a_second_shutdown_sends_no_second_goaway_nor_moves_the_drain() {
    let mut c = Config::default();
    c.idle_timeout(None);
    let mut t = Scripted::server(c);
    t.open(1, b"", false);
    t.s.accept().unwrap();
    t.out();
    t.s.shutdown(t.now, Duration::from_secs(10));
    t.s.shutdown(t.now, Duration::from_secs(60));
    let out = t.out();
    let goaways = out.iter().filter(|f| f.ty == FrameType::GOAWAY).count();
    assert_eq!(goaways, 1, "{out:?}");
    assert_eq!(t.s.poll_timeout(), Some(t.now + Duration::from_secs(10)));
}

#[test]
fn the_drain_deadline_closes_without_a_second_goaway() {
    let mut c = Config::default();
    c.idle_timeout(None);
    let mut t = Scripted::server(c);
    t.open(1, b"", false);
    t.s.accept().unwrap();
    t.s.shutdown(t.now, Duration::from_secs(10));
    assert_eq!(goaway(&t.out()), Some(Reason::NO_ERROR));
    t.advance(Duration::from_secs(10));
    assert!(t.s.is_closed());
    let out = t.out();
    assert!(out.is_empty(), "the GOAWAY went already: {out:?}");
}

#[test]
fn a_stream_window_update_of_64_bytes_is_not_tiny() {
    let mut cfg = Config::default();
    cfg.empty_frame_budget(3);
    let mut t = Scripted::server(cfg);
    t.open(1, b"", false);
    t.s.accept().unwrap();
    for _ in 0..10 {
        t.feed(Frame::window_update(1, 64));
    }
    assert!(!t.s.is_closed(), "64 bytes is the smallest ordinary update");
    for _ in 0..4 {
        t.feed(Frame::window_update(1, 63));
    }
    assert_eq!(goaway(&t.out()), Some(Reason::ENHANCE_YOUR_CALM));
}

#[test]
fn a_piece_of_exactly_the_payload_limit_goes_whole_with_its_end() {
    let (mut t, id) = with_stream();
    t.s.set_peer_max_payload(16 * 1024);
    t.s.send(id, Metadata::new(), bytes(16 * 1024), true)
        .unwrap();
    let data: Vec<(usize, bool)> = t
        .out()
        .iter()
        .filter(|f| f.ty == FrameType::DATA)
        .map(|f| (f.payload.len(), f.is_end_stream()))
        .collect();
    assert_eq!(
        data,
        vec![(16 * 1024, true)],
        "one frame, not a bare END after it"
    );
}

#[test]
fn send_some_with_credit_and_nothing_waiting_makes_the_frame_at_once() {
    let (mut t, id) = with_stream();
    let room = t.s.send_room(id).unwrap();
    let (mut md, mut data) = (Metadata::new(), Bytes::from_static(b"hello"));
    assert_eq!(t.s.send_some(id, &mut md, &mut data, false), Ok(true));
    assert_eq!(t.s.send_room(id), Ok(room), "not queued: the frame is made");
    assert!(t.s.has_transmit());
    let out = t.out();
    assert_eq!((out.len(), &out[0].payload[..]), (1, &b"hello"[..]));
}

/// A drain that ends once the last stream is done closes gracefully, as
/// the peer's going away when only the peer sent `GOAWAY`, and as our own
/// shutdown once we sent ours too (whatever the peer said after it).
#[test]
fn a_finished_drain_names_who_went_away() {
    for ours in [false, true] {
        let mut c = Config::default();
        c.idle_timeout(None);
        let mut t = Scripted::server(c);
        t.open(1, b"", false);
        let s = t.s.accept().unwrap();
        t.out();
        if ours {
            t.s.shutdown(t.now, Duration::from_secs(60));
        }
        t.feed(Frame::goaway(0, Reason::NO_ERROR, b"restarting"));
        t.data(s, Bytes::new(), true);
        assert!(matches!(t.s.recv(s), Recv::End));
        t.s.send(s, Metadata::new(), Bytes::new(), true).unwrap();
        t.out();
        t.s.release(s, t.now);
        let cause =
            t.s.close_cause()
                .expect("closed once the last stream is done");
        assert_eq!(cause.reason, Reason::NO_ERROR);
        let want = if ours {
            weft_mux::Origin::Local
        } else {
            weft_mux::Origin::Peer
        };
        assert_eq!(cause.origin, want, "ours: {ours}, {cause:?}");
    }
}
