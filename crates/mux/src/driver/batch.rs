//! Sealing the small frames of one write as one record (PROTOCOL 5.2),
//! where the peer said it reads such batches: one AEAD operation for many
//! small frames instead of one each, which at many calls in flight is
//! most of what encryption costs a small call.
//!
//! Only small frames ride in a batch. A large frame's own record costs
//! little beside its bytes, and a batch is opened only once all of it has
//! arrived: a small frame sealed together with a large one would wait for
//! the large one's bytes (on a slow link, its transmission time).

use bytes::BytesMut;
use weft_frame::Frame;

use crate::pipeline::{Batch, Outbound, TransformError};

/// Frames whose encoded size is at most this ride in batches; larger ones
/// go as their own records (between batches, in order).
const SMALL_FRAME: usize = 2 * 1024;

/// Whether this fill of the write buffer batches, and the batch open now.
#[derive(Debug)]
pub(super) enum Batching {
    /// Every frame goes as its own record: the peer reads no batches, or
    /// one stream alone is open (its frame is encoded as a record at once,
    /// not pushed into a batch that sealing would turn into that record).
    Off,
    /// Small frames go in a batch, begun at the next one.
    Idle,
    /// The batch small frames go in, at the end of the buffer.
    Open(Batch),
}

impl Batching {
    /// How a fill of the buffer with `streams` open batches: it goes on
    /// with `open`, the batch frames made since the last write began (see
    /// [`put`]), if any (taken: the fill seals it). Batches allowed tested
    /// first: a plain connection, which has none, pays that one test.
    #[inline]
    pub(super) fn start(out: &Outbound, streams: usize, open: &mut Option<Batch>) -> Batching {
        if !out.batches_allowed() {
            return Batching::Off;
        }
        if let Some(batch) = open.take() {
            return Batching::Open(batch);
        }
        if streams < 2 {
            return Batching::Off;
        }
        Batching::Idle
    }

    /// Puts `frame` in a batch at the end of `dst`: `Ok(false)` when it goes
    /// as its own record instead (batching is off, or the frame is large:
    /// the open batch is then sealed first, so order is kept).
    #[inline]
    pub(super) fn push(
        &mut self,
        out: &mut Outbound,
        dst: &mut BytesMut,
        frame: &Frame,
    ) -> Result<bool, TransformError> {
        if matches!(self, Batching::Off) {
            return Ok(false);
        }
        if frame.encoded_len() > SMALL_FRAME {
            self.seal(out, dst)?;
            return Ok(false);
        }
        // One call of `Outbound::push` (inlined, it is the frame's
        // encoder): the open batch, else a new one.
        let mut fresh = false;
        loop {
            if let Batching::Open(batch) = self {
                if out.push(batch, frame, dst)? {
                    return Ok(true);
                }
                // Full: sealed, and the frame goes in a new one. (A small
                // frame fits an empty batch; were it not to, the empty
                // batch is sealed, leaving nothing, before the frame goes.)
                self.seal(out, dst)?;
                if fresh {
                    return Ok(false);
                }
            }
            let Some(batch) = out.begin_batch(dst)? else {
                *self = Batching::Off;
                return Ok(false);
            };
            *self = Batching::Open(batch);
            fresh = true;
        }
    }

    /// Seals the open batch, if any: before any of its bytes is written.
    #[inline]
    pub(super) fn seal(
        &mut self,
        out: &mut Outbound,
        dst: &mut BytesMut,
    ) -> Result<(), TransformError> {
        match std::mem::replace(self, Batching::Idle) {
            Batching::Open(batch) => out.seal_batch(batch, dst),
            Batching::Off => {
                *self = Batching::Off;
                Ok(())
            }
            Batching::Idle => Ok(()),
        }
    }
}

/// Puts `frame`, made by an application command, in `open`, the batch at
/// the end of `dst` (begun here if none is open), as the writer's loop
/// would have pushed it; false, with nothing written, when it goes
/// through the queues instead: the frame is too large to ride in a batch,
/// the batch is full, or the frame fails (the writer then meets the same
/// failure). A lone frame is not worth a batch, but `seal_batch` seals a
/// batch of one as the frame's own record, so the batch is begun before
/// it is known whether another frame follows.
#[inline(always)]
pub(super) fn put(
    open: &mut Option<Batch>,
    out: &mut Outbound,
    dst: &mut BytesMut,
    frame: &Frame,
) -> bool {
    if frame.encoded_len() > SMALL_FRAME {
        return false;
    }
    let batch = match open {
        Some(batch) => batch,
        None => match out.begin_batch(dst) {
            Ok(Some(batch)) => open.insert(batch),
            _ => return false,
        },
    };
    matches!(out.push(batch, frame, dst), Ok(true))
}

#[cfg(all(test, not(loom)))]
mod tests {
    use bytes::Bytes;
    use weft_frame::{Flags, FrameType};

    use super::*;
    use crate::driver::write::tests::sealed_pair;

    /// Small frames fill a batch up to the peer's max payload; the frame
    /// that does not fit goes in a new batch once the full one is sealed,
    /// and the reader gets every frame, in order.
    #[test]
    fn a_full_batch_is_sealed_and_the_next_frame_starts_another() {
        let (mut a, mut b) = sealed_pair();
        assert!(a.outbound.allow_batches());
        let frame = |i: usize| {
            let payload = Bytes::from(vec![i as u8; SMALL_FRAME - weft_frame::HEADER_LEN]);
            Frame::new(FrameType::DATA, Flags::NONE, 1, payload)
        };
        // More small frames than one batch holds.
        let n = a.negotiated.peer_limits.max_payload as usize / SMALL_FRAME + 2;
        let mut sealed = Batching::start(&a.outbound, 2, &mut None);
        let mut wire = BytesMut::new();
        for i in 0..n {
            assert!(sealed.push(&mut a.outbound, &mut wire, &frame(i)).unwrap());
        }
        sealed.seal(&mut a.outbound, &mut wire).unwrap();
        assert_eq!(a.outbound.records(), 2, "one full batch, then another");
        let mut got = Vec::new();
        while let Some(f) = b.inbound.decode(&mut wire).unwrap() {
            got.push(f);
        }
        assert!(wire.is_empty(), "{} bytes left", wire.len());
        assert_eq!(got, (0..n).map(frame).collect::<Vec<_>>());
    }
}
