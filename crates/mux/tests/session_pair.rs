//! The sans-I/O core driven as an in-memory pair with a virtual clock.

mod support;

use bytes::Bytes;
use support::{Pair, bytes, drain};
use weft_mux::Metadata;

#[test]
fn large_transfer_through_windows() {
    let mut p = Pair::new();
    let id = p
        .client
        .open(Metadata::new(), Bytes::new(), false, p.now)
        .unwrap();
    let data = bytes(3_000_000);
    let mut sent = 0;
    let mut got = Vec::new();
    let mut accepted = None;
    while got.len() < data.len() {
        let room = p.client.send_room(id).unwrap();
        if room > 0 && sent < data.len() {
            let n = room.min(data.len() - sent);
            p.client
                .send(id, Metadata::new(), data.slice(sent..sent + n), false)
                .unwrap();
            sent += n;
        }
        let moved = p.drive();
        if accepted.is_none() {
            accepted = p.server.accept();
        }
        let sid = accepted.unwrap();
        let (chunk, _, err) = drain(&mut p.server, sid);
        assert!(err.is_none());
        if chunk.is_empty() && moved == 0 && room == 0 {
            panic!(
                "stuck at {} of {}: client {:?} server {:?}",
                got.len(),
                data.len(),
                p.client.stats(),
                p.server.stats()
            );
        }
        got.extend_from_slice(&chunk);
    }
    assert!(got == data[..]);
}
