//! The server's slot against the full stream it stands for. Each scenario
//! runs twice on a server session fed the same `OPEN|END_STREAM`, once with
//! slots off (the request is a full stream from its `OPEN`) and once with
//! them on, and everything the session shows — frames sent, events, what
//! an accept, a send or a receive returns, the table and window figures,
//! the cap, the next deadline, the stream's failure and metadata — must be
//! the same. The entry's kind after each step says which path it took.

use std::time::{Duration, Instant};

use bytes::Bytes;
use weft_frame::{Flags, Frame, FrameType, Metadata, Reason};

use crate::config::{BASELINE_WINDOW, Config};
use crate::error::CloseCause;
use crate::session::serving::{SLOTS, Slots};
use crate::session::table::EntryMut;
use crate::session::{Session, settings_frame};

/// What happens next.
#[derive(Clone, Debug)]
enum Step {
    /// The peer sends a frame.
    Feed(Frame),
    /// The peer opens stream `OTHER` with a whole request.
    OpenOther,
    /// The peer opens stream `id` with a whole request.
    Open(u32),
    /// The server accepts, taking the request (`accept_with_request`).
    AcceptTaking,
    /// The server accepts, leaving the request (`accept_with_metadata`).
    AcceptLeaving,
    /// The handler replies on stream `id` with `n` bytes and the end (a
    /// releasing send, as a `Stream`'s).
    Reply(u32, usize),
    /// The handler sends `n` bytes without the end.
    SendPart(usize),
    /// The handler sends its end with a plain (non-releasing) send.
    SendPlain,
    /// The handler reads (a releasing receive).
    Take,
    /// The handler's stream is dropped.
    Release,
    /// The handler resets the stream.
    Reset(Reason),
    /// The server stops accepting (its `Incoming` dropped).
    StopAccepting,
    /// Graceful shutdown.
    Shutdown,
    /// The transport failed.
    TransportClosed,
    /// The peer's clean end of file.
    PeerEof,
    /// Time passes and timers fire.
    Advance(Duration),
    /// Time passes, no timer fires.
    Wait(Duration),
    /// The transform could not deliver a frame of the stream.
    Unreadable,
    /// Steps with no write between them (frames made wait).
    Batch(Vec<Step>),
}

/// The entry of the request's stream after a step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Slot,
    Full,
    Gone,
}

const ID: u32 = 1;
const OTHER: u32 = 3;

fn open(id: u32) -> Frame {
    let mut f = Frame::new(
        FrameType::OPEN,
        Flags::END_STREAM,
        id,
        Bytes::from_static(b"request"),
    );
    f.metadata = Metadata::builder().custom(b"method", b"echo").finish();
    f
}

fn kind(s: &mut Session) -> Kind {
    match s.streams.lookup(ID) {
        Some(EntryMut::Serve(_)) => Kind::Slot,
        Some(EntryMut::Full(_)) => Kind::Full,
        Some(EntryMut::Unary(_)) => unreachable!("a server holds no call"),
        None => Kind::Gone,
    }
}

fn run(slots: Slots, config: &Config, steps: &[Step]) -> (Vec<String>, Vec<Kind>) {
    SLOTS.with(|s| s.set(slots));
    let start = Instant::now();
    let mut now = start;
    let mut s = Session::new(crate::session::Role::Server, config, now);
    s.handle_frame(
        settings_frame(1024 * 1024 - 64 * 1024, BASELINE_WINDOW),
        now,
    );
    while s.poll_transmit().is_some() {}
    while s.poll_event().is_some() {}
    s.handle_frame(open(ID), now);
    let mut trace = vec!["opened".to_string()];
    let mut kinds = vec![kind(&mut s)];
    observe(&mut s, start, &mut trace);
    for step in steps {
        let what = apply(&mut s, step, &mut now);
        trace.push(what);
        kinds.push(kind(&mut s));
        observe(&mut s, start, &mut trace);
    }
    (trace, kinds)
}

/// Takes `step` at `now` (moved on if it says so); says what it did.
fn apply(s: &mut Session, step: &Step, now: &mut Instant) -> String {
    let at = *now;
    match step {
        Step::Feed(f) => {
            s.handle_frame(f.clone(), at);
            format!("fed {:?}", f.ty)
        }
        Step::OpenOther => {
            s.handle_frame(open(OTHER), at);
            "opened other".into()
        }
        Step::Open(id) => {
            s.handle_frame(open(*id), at);
            format!("opened {id}")
        }
        Step::AcceptTaking => format!("accepted {:?}", s.accept_with_request()),
        Step::AcceptLeaving => format!("accepted {:?}", s.accept_with_metadata()),
        Step::Reply(id, n) => {
            let mut md = Metadata::builder().custom(b"status", b"0").finish();
            let mut data = Bytes::from(vec![5u8; *n]);
            let mut released = false;
            let r =
                s.send_some_releasing(*id, (&mut md, &mut data, true), &mut || at, &mut released);
            format!("replied {r:?}, released {released}, left {}", data.len())
        }
        Step::SendPart(n) => {
            let mut md = Metadata::new();
            let mut data = Bytes::from(vec![6u8; *n]);
            let r = s.send_some(ID, &mut md, &mut data, false);
            format!("sent {r:?}")
        }
        Step::SendPlain => {
            let (mut md, mut data) = (Metadata::new(), Bytes::from_static(b"x"));
            let r = s.send_some(ID, &mut md, &mut data, true);
            format!("sent {r:?}")
        }
        Step::Take => {
            let mut released = false;
            let r = s.recv_releasing(ID, &mut || at, &mut released);
            format!("took {r:?}, released {released}")
        }
        Step::Release => {
            s.release(ID, at);
            "released".into()
        }
        Step::Reset(reason) => {
            s.reset(ID, *reason);
            "reset".into()
        }
        Step::StopAccepting => {
            s.set_accepting(false);
            "stopped accepting".into()
        }
        Step::Shutdown => {
            s.shutdown(at, Duration::from_secs(5));
            "shut down".into()
        }
        Step::TransportClosed => {
            s.handle_transport_closed(CloseCause::local(Reason::INTERNAL_ERROR, "gone"));
            "transport closed".into()
        }
        Step::PeerEof => {
            s.handle_peer_eof(at);
            "peer eof".into()
        }
        Step::Advance(d) => {
            *now += *d;
            s.handle_timeout(*now);
            format!("advanced {d:?}")
        }
        Step::Wait(d) => {
            *now += *d;
            format!("waited {d:?}")
        }
        Step::Unreadable => {
            s.reset_unreadable(FrameType::DATA, ID, Reason::COMPRESSION_ERROR, &mut || at);
            "unreadable".into()
        }
        Step::Batch(steps) => {
            let done: Vec<String> = steps.iter().map(|st| apply(s, st, now)).collect();
            format!("{done:?}")
        }
    }
}

fn observe(s: &mut Session, start: Instant, trace: &mut Vec<String>) {
    while let Some(f) = s.poll_transmit() {
        trace.push(format!("sent {f:?}"));
    }
    while let Some(e) = s.poll_event() {
        trace.push(format!("event {e:?}"));
    }
    trace.push(format!("{:?}", s.stats()));
    trace.push(format!(
        "deadline {:?} failure {:?} metadata {:?} done {} closed {:?} senders {}",
        s.poll_timeout().map(|t| t - start),
        s.failure(ID),
        s.open_metadata(ID),
        s.is_done_by_app(ID),
        s.close_cause(),
        s.senders(),
    ));
}

/// Both runs, compared; the slot run's kinds returned.
fn same(config: &Config, steps: &[Step]) -> Vec<Kind> {
    same_traced(config, steps).0
}

/// [`same`], with the trace.
fn same_traced(config: &Config, steps: &[Step]) -> (Vec<Kind>, Vec<String>) {
    let (full, full_kinds) = run(Slots::Off, config, steps);
    let (slot, kinds) = run(Slots::On, config, steps);
    SLOTS.with(|s| s.set(Slots::On));
    assert!(
        full_kinds.iter().all(|k| *k != Kind::Slot),
        "slots off: never a slot"
    );
    for (i, (a, b)) in full.iter().zip(&slot).enumerate() {
        assert_eq!(a, b, "line {i} differs\nfull: {full:#?}\nslot: {slot:#?}");
    }
    assert_eq!(full.len(), slot.len());
    (kinds, slot)
}

fn plain() -> Config {
    Config::default()
}

fn reset(reason: Reason) -> Frame {
    Frame::reset(ID, reason)
}

use Kind::{Full, Gone, Slot};
use Step::*;

#[test]
fn an_accepted_request_answered_in_one_frame_frees_the_slot() {
    let kinds = same(&plain(), &[AcceptTaking, Reply(ID, 10)]);
    assert_eq!(kinds, [Slot, Slot, Gone]);
}

#[test]
fn an_unanswered_request_counts_under_the_stream_cap() {
    let mut config = plain();
    config.max_concurrent_streams(1);
    let refused = format!("{:?}", Frame::reset(OTHER, Reason::REFUSED_STREAM));
    let (kinds, trace) = same_traced(&config, &[AcceptTaking, OpenOther]);
    assert_eq!(kinds, [Slot, Slot, Slot]);
    assert!(trace.contains(&format!("sent {refused}")), "{trace:#?}");
    let (kinds, trace) = same_traced(&config, &[AcceptTaking, Reply(ID, 3), OpenOther]);
    assert_eq!(kinds, [Slot, Slot, Gone, Gone]);
    assert!(!trace.contains(&format!("sent {refused}")), "{trace:#?}");
}

#[test]
fn a_reset_before_the_accept_promotes_and_the_accept_takes_no_request() {
    let kinds = same(&plain(), &[Feed(reset(Reason::CANCEL)), AcceptTaking, Take]);
    assert_eq!(kinds[1], Full);
}

#[test]
fn a_reset_while_handling_reaches_the_handler_as_on_a_stream() {
    let kinds = same(
        &plain(),
        &[
            AcceptTaking,
            Feed(reset(Reason::CANCEL)),
            Reply(ID, 4),
            Release,
        ],
    );
    assert_eq!(kinds[..3], [Slot, Slot, Full]);
}

#[test]
fn a_frame_after_the_requests_end_is_a_stream_closed_error() {
    let data = Frame::new(
        FrameType::DATA,
        Flags::NONE,
        ID,
        Bytes::from_static(b"late"),
    );
    for steps in [
        vec![Feed(data.clone()), AcceptTaking],
        vec![AcceptTaking, Feed(data)],
    ] {
        let kinds = same(&plain(), &steps);
        assert!(kinds.contains(&Full), "{kinds:?}");
    }
}

#[test]
fn window_updates_for_the_stream_count_as_on_a_stream() {
    let kinds = same(
        &plain(),
        &[
            AcceptTaking,
            Feed(Frame::window_update(ID, 1000)),
            Reply(ID, 100),
        ],
    );
    assert_eq!(kinds, [Slot, Slot, Full, Gone]);
}

#[test]
fn a_reply_too_large_to_go_at_once_is_queued_on_the_full_stream() {
    let kinds = same(
        &plain(),
        &[
            AcceptTaking,
            Reply(ID, 40_000),
            Wait(Duration::from_secs(1)),
        ],
    );
    assert_eq!(kinds[..2], [Slot, Slot]);
    assert_ne!(kinds[2], Slot);
}

#[test]
fn a_reply_in_several_sends_is_the_full_streams() {
    let kinds = same(&plain(), &[AcceptTaking, SendPart(5), Reply(ID, 5)]);
    assert_eq!(kinds, [Slot, Slot, Full, Gone]);
    let kinds = same(&plain(), &[AcceptTaking, SendPlain, Take, Release]);
    assert_eq!(kinds[2], Full);
}

#[test]
fn a_request_accepted_for_reading_is_read_from_the_full_stream() {
    let kinds = same(&plain(), &[AcceptLeaving, Take, Take, Reply(ID, 2)]);
    assert_eq!(kinds[1], Full);
    let kinds = same(&plain(), &[AcceptTaking, Take, Reply(ID, 2)]);
    assert_eq!(kinds, [Slot, Slot, Full, Gone]);
}

#[test]
fn a_handler_that_lets_go_or_resets_cancels_the_stream() {
    for last in [Release, Reset(Reason::INTERNAL_ERROR)] {
        let kinds = same(&plain(), &[AcceptTaking, last.clone(), Reply(ID, 1)]);
        assert_eq!(kinds[..2], [Slot, Slot]);
        assert_ne!(kinds[2], Slot, "{last:?}");
    }
    let kinds = same(&plain(), &[Release, AcceptTaking]);
    assert_ne!(kinds[1], Slot);
}

#[test]
fn goaway_and_drain_wait_for_the_owed_reply() {
    let kinds = same(
        &plain(),
        &[
            AcceptTaking,
            Shutdown,
            Reply(ID, 8),
            Advance(Duration::from_millis(1)),
        ],
    );
    assert_eq!(kinds[1], Slot);
    let kinds = same(&plain(), &[Shutdown, AcceptTaking, Reply(ID, 8)]);
    assert!(!kinds.contains(&Slot) || kinds[1] == Slot, "{kinds:?}");
    same(&plain(), &[StopAccepting, AcceptTaking]);
}

#[test]
fn the_connections_loss_or_the_peers_end_fails_or_drains_as_on_a_stream() {
    same(&plain(), &[AcceptTaking, TransportClosed, Reply(ID, 1)]);
    same(&plain(), &[TransportClosed, AcceptTaking]);
    same(
        &plain(),
        &[
            AcceptTaking,
            PeerEof,
            Reply(ID, 1),
            Advance(Duration::from_secs(60)),
        ],
    );
    same(&plain(), &[PeerEof, AcceptTaking, Reply(ID, 1)]);
    same(&plain(), &[AcceptTaking, Unreadable, Reply(ID, 1)]);
}

#[test]
fn the_idle_clock_starts_when_the_reply_leaves() {
    let mut config = plain();
    config.idle_timeout(Some(Duration::from_secs(30)));
    let kinds = same(
        &config,
        &[
            AcceptTaking,
            Wait(Duration::from_secs(40)),
            Reply(ID, 1),
            Advance(Duration::from_secs(29)),
            Advance(Duration::from_secs(2)),
        ],
    );
    assert_eq!(kinds[..4], [Slot, Slot, Slot, Gone]);
}

#[test]
fn a_full_immediate_queue_leaves_the_reply_to_the_stream() {
    let mut config = plain();
    config.max_concurrent_streams(2);
    // Two replies wait for the writer (the bound is the stream cap): the
    // third goes on its stream, which stays in the table until written.
    let kinds = same(
        &config,
        &[Batch(vec![
            OpenOther,
            AcceptTaking,
            AcceptTaking,
            Reply(OTHER, 1),
            Open(5),
            AcceptTaking,
            Reply(5, 1),
            Reply(ID, 1),
        ])],
    );
    assert_eq!(kinds, [Slot, Full]);
}

#[test]
fn a_steady_stream_of_requests_reuses_one_slot_box() {
    let now = Instant::now();
    let mut s = Session::new(crate::session::Role::Server, &plain(), now);
    s.handle_frame(
        settings_frame(1024 * 1024 - 64 * 1024, BASELINE_WINDOW),
        now,
    );
    for round in 0..5u32 {
        let id = 2 * round + 1;
        s.handle_frame(open(id), now);
        let (got, md, request) = s.accept_with_request().expect("queued");
        assert_eq!((got, request.as_deref()), (id, Some(&b"request"[..])));
        assert_eq!(md.get(b"method"), Some(&b"echo"[..]));
        let (mut md, mut data) = (Metadata::new(), Bytes::from_static(b"ok"));
        let mut released = false;
        let sent =
            s.send_some_releasing(id, (&mut md, &mut data, true), &mut || now, &mut released);
        assert_eq!(sent, Ok(true));
        assert!(released);
        assert_eq!((s.stream_count(), s.streams.spare_serve_count()), (0, 1));
        while s.poll_transmit().is_some() {}
    }
}

#[test]
fn a_slot_holds_well_under_half_what_a_stream_state_does() {
    let (slot, full) = (
        std::mem::size_of::<super::ServeSlot>(),
        std::mem::size_of::<crate::session::stream::StreamState>(),
    );
    println!("ServeSlot {slot} bytes, StreamState {full} bytes");
    assert!(slot * 2 < full, "ServeSlot {slot}, StreamState {full}");
}
