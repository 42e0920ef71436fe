//! Keys as text and the allow-list: what `weft keygen`, `--server-key` and
//! `--allow FILE` rely on, tested at the library (the CLI's own tests go
//! through files and flags).

use weft_transform::noise::CipherState;
use weft_transform::{
    AllowList, KeyHex, KeyParseError, Psk, StaticKey, canonical_key, parse_key_hex,
    parse_public_key_hex,
};

const KEY: [u8; 32] = [
    0x00, 0x01, 0x02, 0x0a, 0x0f, 0x10, 0x7f, 0x80, 0xab, 0xcd, 0xef, 0xff, 1, 2, 3, 4, 5, 6, 7, 8,
    9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20,
];

#[test]
fn a_key_prints_as_64_lower_case_hex_digits_and_parses_back_in_either_case() {
    let text = KeyHex(&KEY).to_string();
    assert_eq!(text.len(), 64);
    assert!(text.starts_with("0001020a0f107f80abcdefff"));
    assert_eq!(format!("{:?}", KeyHex(&KEY)), text);
    assert_eq!(parse_key_hex(&text), Ok(KEY));
    assert_eq!(
        parse_key_hex(&format!("  {}\n", text.to_uppercase())),
        Ok(KEY)
    );
}

#[test]
fn a_key_of_the_wrong_length_or_with_a_non_hex_digit_is_refused_saying_which() {
    let e = parse_key_hex("abcd").unwrap_err();
    assert_eq!(e, KeyParseError::Length(4));
    assert_eq!(
        e.to_string(),
        "a key is 64 hex digits, this is 4 characters"
    );
    let mut bad = KeyHex(&KEY).to_string();
    bad.replace_range(10..11, "g");
    let e = parse_key_hex(&bad).unwrap_err();
    assert_eq!(e, KeyParseError::NotHex);
    assert!(e.to_string().contains("another character"));
}

#[test]
fn an_allow_list_file_takes_one_key_per_line_with_names_comments_and_blanks() {
    let other = [7u8; 32];
    let text = format!(
        "# clients of the test\n\n{} alice\n   {}   # bob, indented\n",
        KeyHex(&KEY),
        KeyHex(&other)
    );
    assert_eq!(AllowList::parse_keys(&text), Ok(vec![KEY, other]));
    let e = AllowList::parse_keys(&format!("{}\nnot-a-key\n", KeyHex(&KEY))).unwrap_err();
    assert_eq!(
        e,
        KeyParseError::Line(2, Box::new(KeyParseError::Length(9)))
    );
    assert_eq!(
        e.to_string(),
        "line 2: a key is 64 hex digits, this is 9 characters"
    );
}

#[test]
fn an_allow_list_is_shared_by_its_clones_and_replaced_whole() {
    let list = AllowList::new([KEY]);
    let seen_by_a_connection = list.clone();
    assert_eq!(list, seen_by_a_connection);
    assert_ne!(list, AllowList::new([KEY]), "equal means the same list");
    assert!(seen_by_a_connection.contains(&KEY));
    assert_eq!((list.len(), list.is_empty()), (1, false));
    list.replace([[1u8; 32], [2u8; 32]]);
    assert!(!seen_by_a_connection.contains(&KEY), "a reload revokes");
    assert!(seen_by_a_connection.contains(&[2u8; 32]));
    assert_eq!(format!("{list:?}"), "AllowList { keys: 2 }");
    list.replace([]);
    assert!(list.is_empty());
}

#[test]
fn a_psk_keeps_its_bytes_and_never_prints_them() {
    let psk = Psk::from(KEY);
    assert_eq!(psk.as_bytes(), &KEY);
    assert_eq!(psk, Psk::new(KEY));
    let shown = format!("{psk:?}");
    assert_eq!(shown, "Psk(<redacted>)");
    assert!(!shown.contains("0001"));
}

/// p = 2^255 - 19, little-endian.
const P: [u8; 32] = {
    let mut p = [0xff; 32];
    p[0] = 0xed;
    p[31] = 0x7f;
    p
};

#[test]
fn a_public_key_has_one_encoding_bit_255_cleared_and_reduced_mod_p() {
    let real = StaticKey::from_private([5; 32]).public_key();
    assert_eq!(canonical_key(real), real, "X25519's own keys are canonical");
    let mut high = real;
    high[31] |= 0x80;
    assert_eq!(canonical_key(high), real);
    // p + k is k, for each of the 19 values at or above p (with or without
    // bit 255 set); p - 1 is already canonical.
    for k in 0..19u8 {
        let mut above = P;
        above[0] += k;
        let mut want = [0; 32];
        want[0] = k;
        assert_eq!(canonical_key(above), want, "p + {k}");
        above[31] |= 0x80;
        assert_eq!(canonical_key(above), want, "p + {k} with bit 255");
    }
    let mut below = P;
    below[0] -= 1;
    assert_eq!(canonical_key(below), below);
    // Shown, parsed, listed and looked up canonically.
    assert_eq!(KeyHex(&high).to_string(), KeyHex(&real).to_string());
    assert_eq!(parse_public_key_hex(&hex::encode(high)), Ok(real));
    assert_eq!(
        parse_key_hex(&hex::encode(high)),
        Ok(high),
        "private keys stay whole"
    );
    let list = AllowList::new([high]);
    assert!(list.contains(&real) && list.contains(&high));
    list.replace([real]);
    assert!(list.contains(&high));
    list.deny_all();
    assert!(list.is_empty() && !list.contains(&real));
}

#[test]
fn a_private_key_prints_whole_as_hex_and_reads_back() {
    let private: [u8; 32] = std::array::from_fn(|i| 0xf0 ^ i as u8);
    let key = StaticKey::from_private(private);
    assert_eq!(key.private_hex().as_str(), hex::encode(private));
    assert_eq!(parse_key_hex(&key.private_hex()), Ok(private));
}

#[test]
fn a_failed_encryption_leaves_no_plaintext_behind() {
    let secret = b"do not leave me in the buffer";
    // A cipher at its nonce limit: every operation fails.
    let mut spent = CipherState::with_limit(&[1; 32], 0);
    let mut out = b"prefix".to_vec();
    assert!(spent.encrypt(b"", secret, &mut out).is_err());
    assert_eq!(out, b"prefix");
    // `encrypt` zeroes its copy through `encrypt_in_place` before it
    // truncates; the zeroing itself is visible in place.
    let mut buf = secret.to_vec();
    assert!(spent.encrypt_in_place(b"", &mut buf).is_err());
    assert_eq!(buf, vec![0; secret.len()], "in place: zeroed on failure");
    // A record that does not open leaves nothing readable, whether it
    // failed the tag or met a spent key.
    for mut cipher in [CipherState::new(&[1; 32]), spent] {
        let mut ct = secret.to_vec();
        ct.extend_from_slice(&[0; 16]);
        assert!(cipher.decrypt_in_place(b"", &mut ct).is_err());
        assert!(ct.iter().all(|&b| b == 0), "unauthenticated bytes zeroed");
    }
}
