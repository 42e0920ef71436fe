//! Key updates at the real default limits, reached in a test that runs in
//! seconds: the counters jump close to a limit through a test-only hook and
//! the records that cross it are real.

use bytes::{Bytes, BytesMut};
use weft_frame::{Flags, Frame, FrameType, Metadata};

use super::*;
use crate::{EncryptionPolicy, HandshakeConfig, Offer, Session, handshake_in_memory};

fn encrypted(rekey: RekeyLimits) -> (Session, Session) {
    let config = HandshakeConfig {
        offer: Offer {
            encryption: EncryptionPolicy::Required,
            ..Offer::default()
        },
        rekey,
        ..HandshakeConfig::default()
    };
    handshake_in_memory(config.clone(), config).unwrap()
}

fn frame(i: u64) -> Frame {
    Frame {
        ty: FrameType::DATA,
        flags: Flags::NONE,
        stream_id: 1,
        metadata: Metadata::builder().method("svc/m").finish(),
        payload: Bytes::from(i.to_be_bytes().to_vec()),
    }
}

/// Sends `n` frames from `a` to `b` in one batch (all in flight before any
/// is read) and checks each arrives intact.
fn send(a: &mut Session, b: &mut Session, from: u64, n: u64) {
    let mut wire = BytesMut::new();
    for i in from..from + n {
        a.outbound.encode(&frame(i), &mut wire).unwrap();
    }
    for i in from..from + n {
        let got = b
            .inbound
            .decode(&mut wire)
            .unwrap()
            .expect("a whole record");
        assert_eq!(got, frame(i));
    }
    assert!(wire.is_empty());
}

#[test]
fn the_default_limits_carry_a_direction_past_2_pow_24_records() {
    let (mut a, mut b) = encrypted(RekeyLimits::default());
    let mut sent = 0;
    // Each round jumps both ends to 4 records before the default update
    // point and sends 8 real records across it: 17 rounds pass 2^24.
    for round in 1..=17u64 {
        let used = a.outbound.send_key_mut().records;
        let jump = DEFAULT_REKEY_RECORDS - 4 - used;
        a.outbound.send_key_mut().skip_for_testing(jump);
        b.inbound.open_key_mut().skip_for_testing(jump);
        send(&mut a, &mut b, sent, 8);
        sent += 8;
        assert_eq!(a.outbound.key_updates(), round);
        assert_eq!(b.inbound.key_updates(), round);
        // Never more than the update point under one key.
        assert!(a.outbound.send_key_mut().records < DEFAULT_REKEY_RECORDS);
    }
    assert!(a.outbound.records() > 1 << 24, "{}", a.outbound.records());
    assert_eq!(a.outbound.records(), b.inbound.records());
    // The other direction is independent: it never updated.
    send(&mut b, &mut a, 0, 3);
    assert_eq!((b.outbound.key_updates(), a.inbound.key_updates()), (0, 0));
}

#[test]
fn a_peer_past_the_hard_record_limit_is_refused() {
    // A sender configured at the hard limit, pushed past it: its update
    // record would be the key's 2^24 + 1st, which the receiver refuses.
    let (mut a, mut b) = encrypted(RekeyLimits {
        records: MAX_RECORDS_PER_KEY,
        ..RekeyLimits::default()
    });
    a.outbound
        .send_key_mut()
        .skip_for_testing(MAX_RECORDS_PER_KEY);
    b.inbound
        .open_key_mut()
        .skip_for_testing(MAX_RECORDS_PER_KEY);
    let mut wire = BytesMut::new();
    a.outbound.encode(&frame(0), &mut wire).unwrap();
    let err = b.inbound.decode(&mut wire).unwrap_err();
    assert!(err.is_record_limit() && err.is_fatal(), "{err}");
}

#[test]
fn a_sender_fails_only_when_no_key_update_is_possible() {
    // Noise's nonce space (2^64 - 1) nearly used up: one update and two
    // records still fit, then the sender refuses for good.
    let (mut a, mut b) = encrypted(RekeyLimits::default());
    a.outbound.send_key_mut().skip_for_testing(u64::MAX - 3);
    // The receiver's nonce only: it has opened nothing under this key.
    b.inbound
        .open_key_mut()
        .cipher
        .skip_for_testing(u64::MAX - 3);
    send(&mut a, &mut b, 0, 1);
    assert_eq!(a.outbound.key_updates(), 1);
    send(&mut a, &mut b, 1, 1);
    let mut wire = BytesMut::new();
    let err = a.outbound.encode(&frame(2), &mut wire).unwrap_err();
    assert!(err.is_record_limit() && err.is_fatal(), "{err}");
    assert!(wire.is_empty(), "nothing written");
    assert!(a.outbound.encode(&frame(3), &mut wire).is_err(), "poisoned");
}

/// A sender that never updates its key (its own count was not kept, only
/// its nonce advanced): the receiver counts each record it opens itself
/// and refuses the one past 2^24 under one key.
#[test]
fn the_receiver_counts_records_itself() {
    let (mut a, mut b) = encrypted(RekeyLimits::default());
    let before = MAX_RECORDS_PER_KEY - 1;
    a.outbound.send_key_mut().cipher.skip_for_testing(before);
    b.inbound.open_key_mut().skip_for_testing(before);
    send(&mut a, &mut b, 0, 1);
    assert_eq!(b.inbound.open_key_mut().records, MAX_RECORDS_PER_KEY);
    let mut wire = BytesMut::new();
    a.outbound.encode(&frame(1), &mut wire).unwrap();
    let err = b.inbound.decode(&mut wire).unwrap_err();
    assert!(err.is_record_limit() && err.is_fatal(), "{err}");
}

/// The receiver's byte count: each record adds its plaintext (metadata and
/// payload); a record that would take the key past 2^38 bytes is refused,
/// one that reaches exactly 2^38 is not.
#[test]
fn the_receiver_counts_plaintext_bytes_itself() {
    let (mut a, mut b) = encrypted(RekeyLimits::default());
    let plaintext = (frame(0).metadata.len() + frame(0).payload.len()) as u64;
    b.inbound.open_key_mut().bytes = 3;
    send(&mut a, &mut b, 0, 1);
    assert_eq!(b.inbound.open_key_mut().bytes, 3 + plaintext);
    assert_eq!(b.inbound.open_key_mut().records, 1);
    b.inbound.open_key_mut().bytes = MAX_BYTES_PER_KEY - plaintext;
    send(&mut a, &mut b, 1, 1);
    assert_eq!(b.inbound.open_key_mut().bytes, MAX_BYTES_PER_KEY);
    let mut wire = BytesMut::new();
    a.outbound.encode(&frame(2), &mut wire).unwrap();
    let err = b.inbound.decode(&mut wire).unwrap_err();
    assert!(err.is_record_limit() && err.is_fatal(), "{err}");
}

/// The process-wide counters count each update sent and received (other
/// tests update keys at the same time, so only a lower bound holds).
#[test]
fn key_updates_counts_both_directions() {
    let before = key_updates();
    let (mut a, mut b) = encrypted(RekeyLimits {
        records: 2,
        ..RekeyLimits::default()
    });
    send(&mut a, &mut b, 0, 3);
    assert!(a.outbound.key_updates() >= 1);
    let after = key_updates();
    assert!(after.sent >= before.sent + a.outbound.key_updates());
    assert!(after.received >= before.received + b.inbound.key_updates());
}

/// The byte limit is inclusive: a key may carry exactly `bytes` plaintext
/// bytes (the update record's 8 counted), one more makes the key due.
#[test]
fn a_key_carries_exactly_its_byte_limit() {
    let plaintext = (frame(0).metadata.len() + frame(0).payload.len()) as u64;
    let (mut a, mut b) = encrypted(RekeyLimits {
        bytes: 2 * plaintext + KEY_UPDATE_BODY as u64,
        ..RekeyLimits::default()
    });
    send(&mut a, &mut b, 0, 2);
    assert_eq!(a.outbound.key_updates(), 0, "exactly at the limit");
    send(&mut a, &mut b, 2, 1);
    assert_eq!(a.outbound.key_updates(), 1, "one record more");
}

/// An update needs two nonces (the `KEY_UPDATE` record and the record it
/// precedes): with exactly two left it goes ahead; with one left the
/// sender fails with nothing written, not even the update record.
#[test]
fn an_update_needs_two_nonces_left() {
    for (left, ok) in [(2, true), (1, false)] {
        let (mut a, mut b) = encrypted(RekeyLimits::default());
        let key = a.outbound.send_key_mut();
        key.cipher.skip_for_testing(u64::MAX - left);
        key.records = DEFAULT_REKEY_RECORDS; // due
        b.inbound
            .open_key_mut()
            .cipher
            .skip_for_testing(u64::MAX - left);
        let mut wire = BytesMut::new();
        let sent = a.outbound.encode(&frame(0), &mut wire);
        assert_eq!(sent.is_ok(), ok, "{left} left: {sent:?}");
        if ok {
            assert_eq!(a.outbound.key_updates(), 1);
            assert_eq!(b.inbound.decode(&mut wire).unwrap().unwrap(), frame(0));
        } else {
            assert!(wire.is_empty(), "nothing written");
        }
    }
}

/// A receiver whose nonce space is used up reports the record limit, not
/// a record that failed to authenticate.
#[test]
fn a_receiver_out_of_nonces_reports_the_record_limit() {
    let (mut a, mut b) = encrypted(RekeyLimits::default());
    b.inbound.open_key_mut().cipher.skip_for_testing(u64::MAX);
    let mut wire = BytesMut::new();
    a.outbound.encode(&frame(0), &mut wire).unwrap();
    let err = b.inbound.decode(&mut wire).unwrap_err();
    assert!(err.is_record_limit() && err.is_fatal(), "{err}");
}
