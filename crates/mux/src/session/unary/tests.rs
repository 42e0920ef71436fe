//! The unary slot against the full stream it stands for. Each scenario
//! runs twice on a client session, once with the call's stream opened as a
//! full stream (`open` with `end`) and once as a call (`open_call`, a slot
//! while the exchange stays a one-frame reply), and everything the session
//! shows — frames sent, events, what a receive returns, the table and
//! window figures, the cap, the next deadline — must be the same. The
//! entry's kind after each step says which path the call took.

use std::time::{Duration, Instant};

use bytes::Bytes;
use weft_frame::{Flags, Frame, FrameType, Metadata, Reason};

use crate::config::{BASELINE_WINDOW, Config};
use crate::error::CloseCause;
use crate::session::table::EntryMut;
use crate::session::{Session, settings_frame_with_cap};

/// How the call's stream is opened.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Opened {
    Stream,
    Call,
}

/// What happens next.
#[derive(Clone, Debug)]
enum Step {
    /// The peer sends a frame.
    Feed(Frame),
    /// The caller takes the next piece (a releasing receive, as `call`).
    Take,
    /// The caller lets go (a dropped `Call` or `Answer`).
    Release,
    /// The caller resets the stream.
    Reset(Reason),
    /// The transport failed.
    TransportClosed,
    /// The peer's clean end of file.
    PeerEof,
    /// Time passes and timers fire.
    Advance(Duration),
    /// Time passes, no timer fires (the session reads the clock only if
    /// it must).
    Wait(Duration),
    /// The transform could not deliver a frame of the call's stream.
    Unreadable,
    /// The peer's settings, with its stream window; as a first step, the
    /// call is opened before them.
    Settings(u32),
    /// The application opens another stream (`OTHER`), not ending it.
    OpenOther,
}

/// The entry of the call's stream after a step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Slot,
    Full,
    Gone,
}

const ID: u32 = 1;
const OTHER: u32 = 3;

fn reply(data: &'static [u8], end: bool) -> Frame {
    let flags = if end { Flags::END_STREAM } else { Flags::NONE };
    let mut f = Frame::new(FrameType::DATA, flags, ID, Bytes::from_static(data));
    f.metadata = Metadata::builder().custom(b"status", b"0").finish();
    f
}

fn kind(s: &mut Session) -> Kind {
    match s.streams.lookup(ID) {
        Some(EntryMut::Unary(_)) => Kind::Slot,
        Some(EntryMut::Full(_)) => Kind::Full,
        Some(EntryMut::Serve(_)) => unreachable!("a client holds no served request"),
        None => Kind::Gone,
    }
}

/// Runs `steps` on a client session whose peer caps our streams at `cap`,
/// after a call of `request` bytes: the trace of everything observable,
/// and the entry's kind after the open and after each step.
fn run(
    opened: Opened,
    config: &Config,
    cap: u32,
    request: usize,
    steps: &[Step],
) -> (Vec<String>, Vec<Kind>) {
    let start = Instant::now();
    let mut now = start;
    let mut s = Session::new(crate::session::Role::Client, config, now);
    if !matches!(steps.first(), Some(Step::Settings(_))) {
        s.handle_frame(
            settings_frame_with_cap(1024 * 1024 - 64 * 1024, BASELINE_WINDOW, cap),
            now,
        );
    }
    while s.poll_transmit().is_some() {}
    while s.poll_event().is_some() {}
    let md = Metadata::builder().custom(b"method", b"echo").finish();
    let payload = Bytes::from(vec![7u8; request]);
    let id = match opened {
        Opened::Stream => s.open(md, payload, true, now),
        Opened::Call => s.open_call(md, payload),
    };
    let mut trace = vec![format!("open: {id:?}")];
    let mut kinds = vec![kind(&mut s)];
    observe(&mut s, start, &mut trace);
    for step in steps {
        let what = match step {
            Step::Feed(f) => {
                s.handle_frame(f.clone(), now);
                format!("fed {:?}", f.ty)
            }
            Step::Take => {
                let mut released = false;
                let r = s.recv_releasing(ID, &mut || now, &mut released);
                format!("took {r:?}, released {released}")
            }
            Step::Release => {
                s.release(ID, now);
                "released".into()
            }
            Step::Reset(reason) => {
                s.reset(ID, *reason);
                "reset".into()
            }
            Step::TransportClosed => {
                s.handle_transport_closed(CloseCause::local(Reason::INTERNAL_ERROR, "gone"));
                "transport closed".into()
            }
            Step::PeerEof => {
                s.handle_peer_eof(now);
                "peer eof".into()
            }
            Step::Advance(d) => {
                now += *d;
                s.handle_timeout(now);
                format!("advanced {d:?}")
            }
            Step::Wait(d) => {
                now += *d;
                format!("waited {d:?}")
            }
            Step::Unreadable => {
                s.reset_unreadable(FrameType::DATA, ID, Reason::COMPRESSION_ERROR, &mut || now);
                "unreadable".into()
            }
            Step::Settings(window) => {
                s.handle_frame(
                    settings_frame_with_cap(1024 * 1024 - 64 * 1024, *window, cap),
                    now,
                );
                format!("settings {window}")
            }
            Step::OpenOther => {
                let id = s.open(Metadata::new(), Bytes::from_static(b"o"), false, now);
                format!("opened {id:?}")
            }
        };
        trace.push(what);
        kinds.push(kind(&mut s));
        observe(&mut s, start, &mut trace);
    }
    (trace, kinds)
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
        "credit {} deadline {:?} failure {:?} closed {:?}",
        s.open_credit(),
        s.poll_timeout().map(|t| t - start),
        s.failure(ID),
        s.close_cause(),
    ));
}

/// Both runs, compared; the call's kinds returned.
fn same(config: &Config, cap: u32, request: usize, steps: &[Step]) -> Vec<Kind> {
    let (full, full_kinds) = run(Opened::Stream, config, cap, request, steps);
    let (call, kinds) = run(Opened::Call, config, cap, request, steps);
    assert!(
        full_kinds.iter().all(|k| *k != Kind::Slot),
        "an open is never a slot"
    );
    for (i, (a, b)) in full.iter().zip(&call).enumerate() {
        assert_eq!(a, b, "line {i} differs\nfull: {full:#?}\ncall: {call:#?}");
    }
    assert_eq!(full.len(), call.len());
    kinds
}

fn plain() -> Config {
    Config::default()
}

use Kind::{Full, Gone, Slot};
use Step::*;

#[test]
fn a_one_frame_reply_stays_in_the_slot_until_taken_and_frees_it() {
    let steps = [Feed(reply(b"pong", true)), Take, Take, Release];
    assert_eq!(
        same(&plain(), 100, 5, &steps),
        [Slot, Slot, Gone, Gone, Gone]
    );
}

#[test]
fn a_bare_end_is_the_end() {
    let steps = [Feed(reply(b"", true)), Take];
    let mut bare = Frame::new(FrameType::DATA, Flags::END_STREAM, ID, Bytes::new());
    bare.metadata = Metadata::new();
    assert_eq!(same(&plain(), 100, 5, &steps), [Slot, Slot, Gone]);
    assert_eq!(
        same(&plain(), 100, 5, &[Feed(bare), Take]),
        [Slot, Slot, Gone]
    );
}

#[test]
fn the_slot_counts_under_the_peers_cap_until_its_reply_is_taken() {
    // Cap 1: the open credit comes back (with its event) at the take.
    let steps = [Feed(reply(b"pong", true)), Take];
    assert_eq!(same(&plain(), 1, 5, &steps), [Slot, Slot, Gone]);
}

#[test]
fn a_reply_in_several_frames_promotes_the_slot() {
    let steps = [
        Feed(reply(b"one", false)),
        Take,
        Take,
        Feed(reply(b"two", true)),
        Take,
        Take,
    ];
    assert_eq!(
        same(&plain(), 100, 5, &steps),
        [Slot, Full, Full, Full, Full, Gone, Gone]
    );
}

#[test]
fn a_reply_beyond_our_window_is_a_flow_control_error_as_on_a_stream() {
    let big: &'static [u8] = Vec::leak(vec![1u8; BASELINE_WINDOW as usize + 1]);
    let mut c = plain();
    c.stream_window(BASELINE_WINDOW);
    let steps = [Feed(reply(big, true)), Take, Release];
    assert_eq!(same(&c, 100, 5, &steps), [Slot, Full, Full, Gone]);
}

#[test]
fn a_request_that_does_not_go_whole_is_a_full_stream() {
    // Beyond the peer's stream window: the rest follows as DATA.
    let steps = [
        Feed(Frame::window_update(ID, 1 << 16)),
        Feed(reply(b"ok", true)),
        Take,
    ];
    let n = BASELINE_WINDOW as usize + 10;
    assert_eq!(same(&plain(), 100, n, &steps), [Full, Full, Full, Gone]);
}

#[test]
fn a_watched_progress_deadline_keeps_calls_full_streams() {
    let mut c = plain();
    c.progress_timeout(Some(Duration::from_secs(1)));
    let steps = [
        Advance(Duration::from_millis(600)),
        Advance(Duration::from_millis(600)),
        Advance(Duration::from_millis(600)),
        Take,
    ];
    let kinds = same(&c, 100, 5, &steps);
    assert!(kinds.iter().all(|k| *k != Slot), "{kinds:?}");
}

#[test]
fn a_reset_while_waiting_fails_the_call_as_it_fails_a_stream() {
    for reason in [
        Reason::CANCEL,
        Reason::REFUSED_STREAM,
        Reason::INTERNAL_ERROR,
    ] {
        let steps = [Feed(Frame::reset(ID, reason)), Take, Release];
        assert_eq!(same(&plain(), 100, 5, &steps), [Slot, Full, Full, Gone]);
    }
}

#[test]
fn a_reset_after_the_reply_arrived_wins_as_on_a_stream() {
    let steps = [
        Feed(reply(b"pong", true)),
        Feed(Frame::reset(ID, Reason::CANCEL)),
        Take,
        Release,
    ];
    same(&plain(), 100, 5, &steps);
}

#[test]
fn a_goaway_below_the_call_refuses_it_and_above_keeps_it() {
    let below = [
        Feed(Frame::goaway(0, Reason::NO_ERROR, b"bye")),
        Take,
        Release,
    ];
    same(&plain(), 100, 5, &below);
    let above = [
        Feed(Frame::goaway(ID, Reason::NO_ERROR, b"bye")),
        Feed(reply(b"pong", true)),
        Take,
    ];
    same(&plain(), 100, 5, &above);
}

#[test]
fn the_connections_loss_fails_a_waiting_call_but_not_a_replied_one() {
    same(&plain(), 100, 5, &[TransportClosed, Take, Release]);
    same(
        &plain(),
        100,
        5,
        &[Feed(reply(b"pong", true)), TransportClosed, Take],
    );
    same(&plain(), 100, 5, &[PeerEof, Take, Release]);
    same(
        &plain(),
        100,
        5,
        &[Feed(reply(b"pong", true)), PeerEof, Take],
    );
    // An end of file while another stream owes the peer its end: the
    // waiting call is reset and fails with the connection's cause.
    let mut other_end = Frame::new(FrameType::DATA, Flags::END_STREAM, OTHER, Bytes::new());
    other_end.metadata = Metadata::new();
    let steps = [OpenOther, Feed(other_end), PeerEof, Take, Release];
    assert_eq!(
        same(&plain(), 100, 5, &steps),
        [Slot, Slot, Slot, Full, Full, Gone]
    );
}

#[test]
fn a_call_let_go_before_its_reply_is_cancelled_and_its_late_reply_dropped() {
    let steps = [Release, Feed(reply(b"late", true)), Take];
    assert_eq!(same(&plain(), 100, 5, &steps), [Slot, Gone, Gone, Gone]);
    // Let go with the reply unread, and reset by the caller.
    same(&plain(), 100, 5, &[Feed(reply(b"pong", true)), Release]);
    same(&plain(), 100, 5, &[Reset(Reason::CANCEL), Take, Release]);
}

#[test]
fn a_second_frame_after_the_reply_is_a_stream_closed_error() {
    let steps = [
        Feed(reply(b"pong", true)),
        Feed(reply(b"more", true)),
        Take,
        Release,
    ];
    same(&plain(), 100, 5, &steps);
}

#[test]
fn an_unreadable_reply_resets_the_call_as_it_resets_a_stream() {
    let steps = [Unreadable, Take, Release];
    assert_eq!(same(&plain(), 100, 5, &steps), [Slot, Full, Full, Gone]);
}

#[test]
fn a_call_opened_before_the_peers_settings_stays_a_slot_with_their_window() {
    let steps = [
        Settings(BASELINE_WINDOW * 4),
        Feed(reply(b"pong", true)),
        Take,
    ];
    assert_eq!(same(&plain(), 100, 5, &steps), [Slot, Slot, Slot, Gone]);
    // The window the settings gave counts: this update overflows it only
    // if the resize was applied.
    let over = crate::config::MAX_WINDOW - BASELINE_WINDOW * 4 + 6;
    for window in [BASELINE_WINDOW, BASELINE_WINDOW * 4] {
        let steps = [
            Settings(window),
            Feed(Frame::window_update(ID, over)),
            Take,
            Release,
        ];
        assert_eq!(
            same(&plain(), 100, 5, &steps),
            [Slot, Slot, Full, Full, Gone]
        );
    }
}

#[test]
fn window_updates_for_the_call_count_as_on_a_stream() {
    let steps = [
        Feed(Frame::window_update(ID, 1000)),
        Feed(Frame::window_update(ID, u32::MAX >> 1)),
        Take,
        Release,
    ];
    same(&plain(), 100, 5, &steps);
}

#[test]
fn the_idle_clock_starts_when_the_reply_is_taken() {
    let mut c = plain();
    c.idle_timeout(Some(Duration::from_secs(10)));
    let steps = [
        Advance(Duration::from_secs(4)),
        Feed(reply(b"pong", true)),
        Wait(Duration::from_secs(4)),
        Take,
        Advance(Duration::from_secs(9)),
        Advance(Duration::from_secs(2)),
    ];
    same(&c, 100, 5, &steps);
}

#[test]
fn a_steady_stream_of_calls_reuses_one_slot_box() {
    let now = Instant::now();
    let mut s = Session::new(crate::session::Role::Client, &plain(), now);
    s.handle_frame(settings_frame_with_cap(1 << 20, BASELINE_WINDOW, 100), now);
    for i in 0..50u32 {
        let id = s
            .open_call(Metadata::new(), Bytes::from_static(b"x"))
            .unwrap();
        assert_eq!(id, 2 * i + 1);
        let mut f = Frame::new(
            FrameType::DATA,
            Flags::END_STREAM,
            id,
            Bytes::from_static(b"y"),
        );
        f.metadata = Metadata::new();
        s.handle_frame(f, now);
        let mut released = false;
        let r = s.recv_releasing(id, &mut || now, &mut released);
        assert!(
            released && matches!(r, crate::session::Recv::Chunk(_)),
            "{r:?}"
        );
        assert_eq!(s.streams.spare_slot_count(), 1);
    }
    assert_eq!(s.stream_count(), 0);
    s.release_spares();
    assert_eq!(s.streams.spare_slot_count(), 0);
}
