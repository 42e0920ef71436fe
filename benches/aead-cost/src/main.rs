//! One small AEAD record's cost in each AEAD crate a Rust stack could use:
//! `aead-cost IMPL OP SIZE COUNT` seals (`seal`) or seals then opens
//! (`both`) COUNT records of SIZE bytes with a 16-byte AD under one key, the
//! nonce a counter as weft's (4 zero bytes, then the counter big-endian).
//! `measure.sh` runs it under callgrind and prints instructions per seal
//! and per open. `aead-cost features` prints the CPU features the crates
//! can detect (under valgrind, VAES, VPCLMULQDQ and AVX-512 read false, so
//! the counts are of the AES-NI + PCLMULQDQ paths).
//!
//! Every open checks the tag its seal made with the same nonce, and inputs
//! and outputs pass through `black_box`, so no work is optimised away.

use std::hint::black_box;

fn nonce12(i: u64) -> [u8; 12] {
    let mut n = [0u8; 12];
    n[4..].copy_from_slice(&i.to_be_bytes());
    n
}

trait Aead {
    fn seal(&self, n: u64, ad: &[u8; 16], buf: &mut [u8]) -> [u8; 16];
    fn open(&self, n: u64, ad: &[u8; 16], buf: &mut [u8], tag: &[u8; 16]);
}

struct Ring(ring::aead::LessSafeKey);
impl Aead for Ring {
    #[inline(never)]
    fn seal(&self, n: u64, ad: &[u8; 16], buf: &mut [u8]) -> [u8; 16] {
        let t = self
            .0
            .seal_in_place_separate_tag(
                ring::aead::Nonce::assume_unique_for_key(nonce12(n)),
                ring::aead::Aad::from(ad),
                buf,
            )
            .unwrap();
        let mut o = [0u8; 16];
        o.copy_from_slice(t.as_ref());
        o
    }
    #[inline(never)]
    fn open(&self, n: u64, ad: &[u8; 16], buf: &mut [u8], tag: &[u8; 16]) {
        // The tag apart, as it arrives after the ciphertext: no copy.
        let r = self.0.open_in_place_separate_tag(
            ring::aead::Nonce::assume_unique_for_key(nonce12(n)),
            ring::aead::Aad::from(ad),
            ring::aead::Tag::from(*tag),
            buf,
            0..,
        );
        r.expect("open failed");
    }
}

#[cfg(feature = "awslc")]
struct AwsLc(aws_lc_rs::aead::LessSafeKey);
#[cfg(feature = "awslc")]
impl Aead for AwsLc {
    #[inline(never)]
    fn seal(&self, n: u64, ad: &[u8; 16], buf: &mut [u8]) -> [u8; 16] {
        let t = self
            .0
            .seal_in_place_separate_tag(
                aws_lc_rs::aead::Nonce::assume_unique_for_key(nonce12(n)),
                aws_lc_rs::aead::Aad::from(ad),
                buf,
            )
            .unwrap();
        let mut o = [0u8; 16];
        o.copy_from_slice(t.as_ref());
        o
    }
    #[inline(never)]
    fn open(&self, n: u64, ad: &[u8; 16], buf: &mut [u8], tag: &[u8; 16]) {
        let r = self.0.open_in_place_separate_tag(
            aws_lc_rs::aead::Nonce::assume_unique_for_key(nonce12(n)),
            aws_lc_rs::aead::Aad::from(ad),
            tag,
            buf,
        );
        r.expect("open failed");
    }
}

struct Null;
impl Aead for Null {
    #[inline(never)]
    fn seal(&self, n: u64, _ad: &[u8; 16], buf: &mut [u8]) -> [u8; 16] {
        let mut o = [0u8; 16];
        o[..8].copy_from_slice(&n.to_be_bytes());
        black_box(buf);
        o
    }
    #[inline(never)]
    fn open(&self, _n: u64, _ad: &[u8; 16], buf: &mut [u8], _tag: &[u8; 16]) {
        black_box(buf);
    }
}

struct RcAes(aes_gcm::Aes256Gcm);
impl Aead for RcAes {
    #[inline(never)]
    fn seal(&self, n: u64, ad: &[u8; 16], buf: &mut [u8]) -> [u8; 16] {
        use aes_gcm::aead::AeadInPlace;
        let t = self
            .0
            .encrypt_in_place_detached(&nonce12(n).into(), ad, buf)
            .unwrap();
        t.into()
    }
    #[inline(never)]
    fn open(&self, n: u64, ad: &[u8; 16], buf: &mut [u8], tag: &[u8; 16]) {
        use aes_gcm::aead::AeadInPlace;
        self.0
            .decrypt_in_place_detached(&nonce12(n).into(), ad, buf, tag.into())
            .expect("open failed");
    }
}

struct RcChacha(chacha20poly1305::ChaCha20Poly1305);
impl Aead for RcChacha {
    #[inline(never)]
    fn seal(&self, n: u64, ad: &[u8; 16], buf: &mut [u8]) -> [u8; 16] {
        use chacha20poly1305::aead::AeadInPlace;
        let t = self
            .0
            .encrypt_in_place_detached(&nonce12(n).into(), ad, buf)
            .unwrap();
        t.into()
    }
    #[inline(never)]
    fn open(&self, n: u64, ad: &[u8; 16], buf: &mut [u8], tag: &[u8; 16]) {
        use chacha20poly1305::aead::AeadInPlace;
        self.0
            .decrypt_in_place_detached(&nonce12(n).into(), ad, buf, tag.into())
            .expect("open failed");
    }
}

fn make(name: &str) -> Box<dyn Aead> {
    let key = [0x42u8; 32];
    match name {
        "ring-aes" => Box::new(Ring(ring::aead::LessSafeKey::new(
            ring::aead::UnboundKey::new(&ring::aead::AES_256_GCM, &key).unwrap(),
        ))),
        "ring-chacha" => Box::new(Ring(ring::aead::LessSafeKey::new(
            ring::aead::UnboundKey::new(&ring::aead::CHACHA20_POLY1305, &key).unwrap(),
        ))),
        #[cfg(feature = "awslc")]
        "awslc-aes" => Box::new(AwsLc(aws_lc_rs::aead::LessSafeKey::new(
            aws_lc_rs::aead::UnboundKey::new(&aws_lc_rs::aead::AES_256_GCM, &key).unwrap(),
        ))),
        #[cfg(feature = "awslc")]
        "awslc-chacha" => Box::new(AwsLc(aws_lc_rs::aead::LessSafeKey::new(
            aws_lc_rs::aead::UnboundKey::new(&aws_lc_rs::aead::CHACHA20_POLY1305, &key).unwrap(),
        ))),
        "null" => Box::new(Null),
        "rc-aes" => {
            use aes_gcm::KeyInit;
            Box::new(RcAes(aes_gcm::Aes256Gcm::new(&key.into())))
        }
        "rc-chacha" => {
            use chacha20poly1305::KeyInit;
            Box::new(RcChacha(chacha20poly1305::ChaCha20Poly1305::new(
                &key.into(),
            )))
        }
        _ => panic!("unknown impl {name}"),
    }
}

fn main() {
    let a: Vec<String> = std::env::args().collect();
    if a[1] == "features" {
        println!(
            "aes={} pclmulqdq={} avx={} avx2={} movbe={} vaes={} vpclmulqdq={} avx512f={} sha={} ssse3={}",
            std::is_x86_feature_detected!("aes"),
            std::is_x86_feature_detected!("pclmulqdq"),
            std::is_x86_feature_detected!("avx"),
            std::is_x86_feature_detected!("avx2"),
            std::is_x86_feature_detected!("movbe"),
            std::is_x86_feature_detected!("vaes"),
            std::is_x86_feature_detected!("vpclmulqdq"),
            std::is_x86_feature_detected!("avx512f"),
            std::is_x86_feature_detected!("sha"),
            std::is_x86_feature_detected!("ssse3"),
        );
        return;
    }
    let (imp, op, size, count): (&str, &str, usize, u64) =
        (&a[1], &a[2], a[3].parse().unwrap(), a[4].parse().unwrap());
    let k = make(imp);
    let k: &dyn Aead = &*k;
    let ad = [7u8; 16];
    let mut buf = vec![0xa5u8; size];
    let mut acc = 0u8;
    // op "seal": seal only. op "both": seal then open with same nonce (open = both - seal).
    let both = match op {
        "seal" => false,
        "both" => true,
        _ => panic!("op"),
    };
    let run = |start: u64, n: u64, buf: &mut Vec<u8>, acc: &mut u8| {
        for i in start..start + n {
            let t = k.seal(black_box(i), black_box(&ad), black_box(&mut buf[..]));
            let t = black_box(t);
            if both {
                k.open(black_box(i), black_box(&ad), black_box(&mut buf[..]), &t);
            }
            *acc ^= black_box(&buf[..])[0] ^ t[0];
        }
    };
    run(0, 100, &mut buf, &mut acc); // warm-up
    run(1000, count, &mut buf, &mut acc);
    println!("{acc} {}", buf[size / 2]);
}
