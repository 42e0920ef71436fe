//! A stream's receive queue: the first chunk inline, the rest in a
//! `VecDeque`. Most streams (every unary call) hold at most one chunk at a
//! time, so they never allocate a queue.

use std::collections::VecDeque;

use super::stream::Chunk;

/// FIFO of received chunks. Invariant: `rest` is empty whenever `first` is.
#[derive(Debug, Default)]
pub(crate) struct ChunkQueue {
    first: Option<Chunk>,
    rest: VecDeque<Chunk>,
}

impl ChunkQueue {
    pub(crate) fn is_empty(&self) -> bool {
        self.first.is_none()
    }

    pub(crate) fn push_back(&mut self, chunk: Chunk) {
        if self.first.is_none() {
            self.first = Some(chunk);
        } else {
            self.rest.push_back(chunk);
        }
    }

    pub(crate) fn pop_front(&mut self) -> Option<Chunk> {
        let head = self.first.take()?;
        self.first = self.rest.pop_front();
        Some(head)
    }

    pub(crate) fn clear(&mut self) {
        self.first = None;
        self.rest.clear();
    }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;

    use super::*;

    fn chunk(n: u8) -> Chunk {
        Chunk {
            data: Bytes::from(vec![n]),
            ..Chunk::default()
        }
    }

    #[test]
    fn keeps_order_across_the_inline_slot_and_the_rest() {
        let mut q = ChunkQueue::default();
        assert!(q.is_empty());
        for n in 0..5 {
            q.push_back(chunk(n));
        }
        assert_eq!(q.pop_front().unwrap().data[0], 0);
        q.push_back(chunk(5));
        let order: Vec<u8> = std::iter::from_fn(|| q.pop_front().map(|c| c.data[0])).collect();
        assert_eq!(order, [1, 2, 3, 4, 5]);
        assert!(q.is_empty());
        q.push_back(chunk(9));
        q.push_back(chunk(10));
        q.clear();
        assert!(q.is_empty() && q.pop_front().is_none());
    }
}
