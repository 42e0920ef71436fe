//! How handler inputs and outputs become messages: raw `Bytes` as they are,
//! typed values through JSON (feature `json`).

use bytes::Bytes;

use crate::codec::{self, Framed};
use crate::status::Status;

/// A request type a handler can take.
pub(crate) trait Decode: Sized + Send + 'static {
    fn decode(body: Bytes) -> Result<Self, Status>;
}

/// A response type a handler can return.
pub(crate) trait Encode: Send + 'static {
    fn encode(self, max: usize) -> Result<Framed, Status>;
}

impl Decode for Bytes {
    fn decode(body: Bytes) -> Result<Bytes, Status> {
        Ok(body)
    }
}

impl Encode for Bytes {
    fn encode(self, max: usize) -> Result<Framed, Status> {
        codec::frame(self, max)
    }
}

/// A typed value carried as JSON.
#[cfg(feature = "json")]
#[derive(Debug)]
pub(crate) struct Json<T>(pub(crate) T);

#[cfg(feature = "json")]
impl<T: serde::de::DeserializeOwned + Send + 'static> Decode for Json<T> {
    fn decode(body: Bytes) -> Result<Self, Status> {
        from_json(&body).map(Json)
    }
}

#[cfg(feature = "json")]
impl<T: serde::Serialize + Send + 'static> Encode for Json<T> {
    fn encode(self, max: usize) -> Result<Framed, Status> {
        to_json(&self.0, max).map(Framed::One)
    }
}

/// Decodes a JSON message; malformed input is `INVALID_ARGUMENT`. An empty
/// message reads as `null` (a nil request: `()` and `Option<T>` accept it).
#[cfg(feature = "json")]
pub(crate) fn from_json<T: serde::de::DeserializeOwned>(body: &[u8]) -> Result<T, Status> {
    // A branch rather than a choice of slice before one parse (two
    // conditional moves and an address on every message); the empty
    // message reads `null` as a value, not as text, so that the parse of
    // the body stays the one call of serde_json's, inlined here.
    if body.is_empty() {
        return from_null();
    }
    serde_json::from_slice(body).map_err(malformed)
}

/// [`from_json`] of an empty message: `null`. Out of line: rare.
#[cfg(feature = "json")]
#[cold]
#[inline(never)]
fn from_null<T: serde::de::DeserializeOwned>() -> Result<T, Status> {
    T::deserialize(serde_json::Value::Null).map_err(malformed)
}

/// The status of a message serde_json could not read. Out of line, as
/// [`cannot_encode`]: the formatting stays out of every call's path.
#[cfg(feature = "json")]
#[cold]
#[inline(never)]
fn malformed(e: serde_json::Error) -> Status {
    Status::invalid_argument(format!("malformed JSON message: {e}"))
}

/// The status of a value serde_json could not write.
#[cfg(feature = "json")]
#[cold]
#[inline(never)]
fn cannot_encode(e: serde_json::Error) -> Status {
    Status::internal(format!("cannot encode JSON: {e}"))
}

/// Encodes a value as one framed JSON message, written into the framing
/// arena (no allocation in steady state).
#[cfg(feature = "json")]
pub(crate) fn to_json<T: serde::Serialize + ?Sized>(
    value: &T,
    max: usize,
) -> Result<Bytes, Status> {
    codec::frame_written(
        max,
        |buf| serde_json::to_writer(codec::Append(buf), value),
        cannot_encode,
        |too_large| too_large,
    )
}

#[cfg(all(test, feature = "json"))]
mod tests {
    use super::*;
    use crate::status::Code;

    #[test]
    fn json_round_trip_and_errors() {
        let b = to_json(&serde_json::json!({"n": 1}), 64).unwrap();
        assert_eq!(&b[..], b"\0\0\0\x07{\"n\":1}");
        let v: serde_json::Value = from_json(&b[4..]).unwrap();
        assert_eq!(v["n"], 1);
        let e = from_json::<serde_json::Value>(b"{nope").unwrap_err();
        assert_eq!(e.code(), Code::INVALID_ARGUMENT);
        assert_eq!(
            to_json(&"x".repeat(100), 10).unwrap_err().code(),
            Code::RESOURCE_EXHAUSTED
        );
        struct Bad;
        impl serde::Serialize for Bad {
            fn serialize<S: serde::Serializer>(&self, _: S) -> Result<S::Ok, S::Error> {
                Err(serde::ser::Error::custom("refuses"))
            }
        }
        assert_eq!(to_json(&Bad, 64).unwrap_err().code(), Code::INTERNAL);
        let nil: Option<u32> = from_json(b"").unwrap();
        assert_eq!(nil, None);
        from_json::<()>(b"").unwrap();
        assert!(from_json::<u32>(b"").is_err());
        let Json(n) = <Json<u32>>::decode(Bytes::from_static(b"5")).unwrap();
        assert_eq!(n, 5);
        assert!(matches!(Json(5u32).encode(64).unwrap(), Framed::One(_)));
        assert_eq!(Bytes::decode(Bytes::from_static(b"x")).unwrap(), "x");
    }

    /// A struct goes out token by token through the framing arena's
    /// writer: byte for byte what serde_json writes into a `Vec`, also
    /// when it outgrows the room the arena had (a reserve mid-message).
    #[test]
    fn a_struct_is_written_as_serde_json_writes_it() {
        #[derive(Debug, PartialEq, serde::Serialize, serde::Deserialize)]
        struct Record {
            id: u64,
            name: String,
            score: i32,
            ttl: Option<u32>,
            tags: Vec<String>,
        }
        for tags in [2, 5_000] {
            let r = Record {
                id: u64::MAX,
                name: "Ada \"L\"\n\u{e9}".into(),
                score: -12,
                ttl: None,
                tags: (0..tags).map(|i| format!("tag-{i}")).collect(),
            };
            let b = to_json(&r, usize::MAX).unwrap();
            let want = serde_json::to_vec(&r).unwrap();
            assert_eq!(&b[..4], &(want.len() as u32).to_be_bytes());
            assert_eq!(&b[4..], &want[..]);
            assert_eq!(from_json::<Record>(&b[4..]).unwrap(), r);
        }
    }
}
