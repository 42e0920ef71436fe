//! A data frame `send_some` made directly goes out before control frames
//! queued after it that depend on it: our `RESET` of its stream, and an
//! `OPEN` that takes the slot its `END_STREAM` freed.

mod support;

use bytes::Bytes;
use support::Scripted;
use weft_frame::{Flags, FrameType};
use weft_mux::session::Role;
use weft_mux::{Config, Metadata, Reason};

/// A client session with stream 1 open and its `OPEN` sent, after
/// `send_some` made one `DATA` frame directly (with `END_STREAM` if `end`).
fn data_made_directly(end: bool) -> Scripted {
    let mut t = Scripted::new(Role::Client, Config::default());
    let id =
        t.s.open(Metadata::new(), Bytes::new(), false, t.now)
            .unwrap();
    assert_eq!(id, 1);
    assert_eq!(t.out().len(), 1, "the OPEN");
    let mut data = Bytes::from_static(b"last words");
    let all =
        t.s.send_some(1, &mut Metadata::new(), &mut data, end)
            .unwrap();
    assert!(all);
    t
}

/// The frames out, as (type, stream, END_STREAM).
fn order(t: &mut Scripted) -> Vec<(FrameType, u32, bool)> {
    t.out()
        .iter()
        .map(|f| (f.ty, f.stream_id, f.flags.contains(Flags::END_STREAM)))
        .collect()
}

#[test]
fn a_reset_goes_out_after_the_streams_last_data() {
    let mut t = data_made_directly(false);
    t.s.reset(1, Reason::CANCEL);
    assert_eq!(
        order(&mut t),
        [(FrameType::DATA, 1, false), (FrameType::RESET, 1, false)]
    );
}

#[test]
fn an_open_goes_out_after_the_end_made_before_it() {
    let mut t = data_made_directly(true);
    let id =
        t.s.open(Metadata::new(), Bytes::new(), true, t.now)
            .unwrap();
    assert_eq!(
        order(&mut t),
        [(FrameType::DATA, 1, true), (FrameType::OPEN, id, true)]
    );
}
