//! The nil message of the JSON codec: `null`, what `()`, `None` and unit
//! structs are written as (the `Empty` of a gRPC service), without
//! serde_json.
//!
//! A nil request or reply is common and always the same four bytes, yet
//! through serde_json it cost as much as any small message: a serializer,
//! a write into the framing arena and a split off it to send; a
//! deserializer and its trailing-input check to read. Here a value that
//! serializes as `null` is sent as one static message (no arena, no
//! allocation), and a `null` (or empty) body is read by a deserializer
//! that only knows `null`.
//!
//! Both are probes that mirror serde_json exactly where they answer and
//! decline everything else: [`is_null`] says yes only for a value whose
//! serde_json output is `null`, and [`from_null`] makes a value only
//! through the visitor calls serde_json makes for `null`, so the value is
//! the one serde_json would make. Whatever they decline (or a value
//! serde_json would refuse) goes through serde_json as before, errors and
//! their messages included. The bytes on the wire do not change.

use std::fmt;

use bytes::Bytes;
use serde::de::{self, Deserializer, Visitor};
use serde::ser::{self, Impossible, Serialize, Serializer};

/// The JSON of a nil value.
pub(crate) const NULL: &[u8] = b"null";

/// [`NULL`] framed: its length prefix, then the four bytes.
const NULL_MESSAGE: &[u8] = b"\0\0\0\x04null";

/// The framed nil message, shared: a static, so sending it allocates and
/// copies nothing.
pub(crate) fn null_message() -> Bytes {
    Bytes::from_static(NULL_MESSAGE)
}

/// Whether serde_json would write `value` as `null`: a unit, a unit
/// struct, `None`, or any of those inside `Some` or a newtype (serde_json
/// writes both transparently). Declines at the first other call, so for
/// any other value this is one failed call (folded away when `serialize`
/// is inlined). A non-finite float, which serde_json also writes as
/// `null`, is declined: it simply takes the usual path.
pub(crate) fn is_null<T: Serialize + ?Sized>(value: &T) -> bool {
    value.serialize(NullProbe).is_ok()
}

/// `T` made from a `null` message, as serde_json would make it, or `None`
/// when `T` does not take `null` the way this probe offers it (the caller
/// then asks serde_json, which has the final say and the error message).
pub(crate) fn from_null<T: de::DeserializeOwned>() -> Option<T> {
    T::deserialize(NullInput).ok()
}

/// The probe's answer "not `null`", for both directions: it carries
/// nothing, so declining formats and allocates nothing.
#[derive(Debug)]
pub(crate) struct NotNull;

impl fmt::Display for NotNull {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("not the nil value")
    }
}

impl std::error::Error for NotNull {}

impl ser::Error for NotNull {
    fn custom<M: fmt::Display>(_msg: M) -> Self {
        NotNull
    }
}

impl de::Error for NotNull {
    fn custom<M: fmt::Display>(_msg: M) -> Self {
        NotNull
    }
}

/// A serializer that succeeds only on what serde_json writes as `null`.
struct NullProbe;

/// The serializer methods the probe declines (everything but the nil
/// values and the two transparent wrappers).
macro_rules! decline {
    ($($name:ident($($arg:ty),*);)*) => {
        $(
            fn $name(self, $(_: $arg),*) -> Result<(), NotNull> {
                Err(NotNull)
            }
        )*
    };
}

impl Serializer for NullProbe {
    type Ok = ();
    type Error = NotNull;
    type SerializeSeq = Impossible<(), NotNull>;
    type SerializeTuple = Impossible<(), NotNull>;
    type SerializeTupleStruct = Impossible<(), NotNull>;
    type SerializeTupleVariant = Impossible<(), NotNull>;
    type SerializeMap = Impossible<(), NotNull>;
    type SerializeStruct = Impossible<(), NotNull>;
    type SerializeStructVariant = Impossible<(), NotNull>;

    fn serialize_unit(self) -> Result<(), NotNull> {
        Ok(())
    }

    fn serialize_unit_struct(self, _name: &'static str) -> Result<(), NotNull> {
        Ok(())
    }

    fn serialize_none(self) -> Result<(), NotNull> {
        Ok(())
    }

    fn serialize_some<V: Serialize + ?Sized>(self, value: &V) -> Result<(), NotNull> {
        value.serialize(self)
    }

    fn serialize_newtype_struct<V: Serialize + ?Sized>(
        self,
        _name: &'static str,
        value: &V,
    ) -> Result<(), NotNull> {
        value.serialize(self)
    }

    decline! {
        serialize_bool(bool);
        serialize_i8(i8);
        serialize_i16(i16);
        serialize_i32(i32);
        serialize_i64(i64);
        serialize_i128(i128);
        serialize_u8(u8);
        serialize_u16(u16);
        serialize_u32(u32);
        serialize_u64(u64);
        serialize_u128(u128);
        serialize_f32(f32);
        serialize_f64(f64);
        serialize_char(char);
        serialize_str(&str);
        serialize_bytes(&[u8]);
        serialize_unit_variant(&'static str, u32, &'static str);
    }

    fn serialize_newtype_variant<V: Serialize + ?Sized>(
        self,
        _name: &'static str,
        _index: u32,
        _variant: &'static str,
        _value: &V,
    ) -> Result<(), NotNull> {
        Err(NotNull)
    }

    fn serialize_seq(self, _len: Option<usize>) -> Result<Self::SerializeSeq, NotNull> {
        Err(NotNull)
    }

    fn serialize_tuple(self, _len: usize) -> Result<Self::SerializeTuple, NotNull> {
        Err(NotNull)
    }

    fn serialize_tuple_struct(
        self,
        _name: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeTupleStruct, NotNull> {
        Err(NotNull)
    }

    fn serialize_tuple_variant(
        self,
        _name: &'static str,
        _index: u32,
        _variant: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeTupleVariant, NotNull> {
        Err(NotNull)
    }

    fn serialize_map(self, _len: Option<usize>) -> Result<Self::SerializeMap, NotNull> {
        Err(NotNull)
    }

    fn serialize_struct(
        self,
        _name: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeStruct, NotNull> {
        Err(NotNull)
    }

    fn serialize_struct_variant(
        self,
        _name: &'static str,
        _index: u32,
        _variant: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeStructVariant, NotNull> {
        Err(NotNull)
    }

    fn collect_str<V: fmt::Display + ?Sized>(self, _value: &V) -> Result<(), NotNull> {
        // The default would format `value` into a `String` first.
        Err(NotNull)
    }
}

/// A deserializer holding the JSON `null`: each method answers as
/// serde_json's does on `null`, or declines where serde_json would fail.
struct NullInput;

/// The deserializer methods that fail on `null` in serde_json: declined
/// before the visitor is called.
macro_rules! refuse {
    ($($name:ident($($arg:ident: $ty:ty),*);)*) => {
        $(
            fn $name<V: Visitor<'de>>(self, $($arg: $ty,)* _visitor: V) -> Result<V::Value, NotNull> {
                $(let _ = $arg;)*
                Err(NotNull)
            }
        )*
    };
}

impl<'de> Deserializer<'de> for NullInput {
    type Error = NotNull;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, NotNull> {
        visitor.visit_unit()
    }

    fn deserialize_unit<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, NotNull> {
        visitor.visit_unit()
    }

    fn deserialize_unit_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, NotNull> {
        visitor.visit_unit()
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, NotNull> {
        visitor.visit_none()
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, NotNull> {
        // serde_json reads a newtype's field from the same input. Its one
        // special newtype (`RawValue`) expects a map from this call and
        // so declines here.
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_ignored_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, NotNull> {
        visitor.visit_unit()
    }

    refuse! {
        deserialize_bool();
        deserialize_i8();
        deserialize_i16();
        deserialize_i32();
        deserialize_i64();
        deserialize_i128();
        deserialize_u8();
        deserialize_u16();
        deserialize_u32();
        deserialize_u64();
        deserialize_u128();
        deserialize_f32();
        deserialize_f64();
        deserialize_char();
        deserialize_str();
        deserialize_string();
        deserialize_bytes();
        deserialize_byte_buf();
        deserialize_seq();
        deserialize_tuple(len: usize);
        deserialize_tuple_struct(name: &'static str, len: usize);
        deserialize_map();
        deserialize_struct(name: &'static str, fields: &'static [&'static str]);
        deserialize_enum(name: &'static str, variants: &'static [&'static str]);
        deserialize_identifier();
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::marker::PhantomData;

    use serde::{Deserialize, Serialize};

    use super::*;

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct Unit;

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct Wrapped(Option<u32>);

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct Fields {
        a: u32,
    }

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct Defaulted {
        #[serde(default)]
        a: u32,
    }

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    enum Kind {
        A,
        B(u32),
    }

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    #[serde(untagged)]
    enum Loose {
        Nothing(()),
        Number(u32),
    }

    /// The probe's verdict on `value` against serde_json's own output.
    fn agrees<T: Serialize + ?Sized>(value: &T) {
        let json = serde_json::to_vec(value).unwrap();
        let nil = is_null(value);
        if nil {
            assert_eq!(json, NULL, "probe said null");
        }
        // Only the non-finite floats are null and declined.
        assert_eq!(nil, json == NULL, "{}", String::from_utf8_lossy(&json));
    }

    #[test]
    fn a_value_is_null_exactly_when_serde_json_writes_null() {
        agrees(&());
        agrees(&Unit);
        agrees(&None::<u32>);
        agrees(&Some(()));
        agrees(&Some(None::<String>));
        agrees(&Wrapped(None));
        agrees(&PhantomData::<u64>);
        agrees(&serde_json::Value::Null);
        agrees(&Loose::Nothing(()));
        agrees(&Wrapped(Some(0)));
        agrees(&0u32);
        agrees(&false);
        agrees(&"");
        agrees(&"null");
        agrees(&Vec::<u8>::new());
        agrees(&[(); 0]);
        agrees(&((),));
        agrees(&Fields { a: 0 });
        agrees(&BTreeMap::<String, ()>::new());
        agrees(&Kind::A);
        agrees(&Kind::B(0));
        agrees(&serde_json::json!({}));
        assert!(
            !is_null(&f64::NAN),
            "declined, though serde_json writes null"
        );
        assert_eq!(&null_message()[..], b"\0\0\0\x04null");
    }

    /// `from_null`'s verdict on `T` against serde_json reading `null`:
    /// the same value whenever it answers, and it answers for the nil
    /// types.
    fn reads_as_serde_json<T>(answers: bool)
    where
        T: de::DeserializeOwned + PartialEq + fmt::Debug,
    {
        let probe = from_null::<T>();
        let json = serde_json::from_slice::<T>(NULL);
        match (probe, json) {
            (Some(p), Ok(j)) => assert_eq!(p, j),
            (Some(p), Err(e)) => panic!("probe made {p:?} where serde_json failed: {e}"),
            (None, _) => {}
        }
        assert_eq!(from_null::<T>().is_some(), answers);
    }

    #[test]
    fn null_reads_as_serde_json_reads_it() {
        reads_as_serde_json::<()>(true);
        reads_as_serde_json::<Unit>(true);
        reads_as_serde_json::<Option<u32>>(true);
        reads_as_serde_json::<Option<Fields>>(true);
        reads_as_serde_json::<Wrapped>(true);
        reads_as_serde_json::<PhantomData<u8>>(true);
        reads_as_serde_json::<serde_json::Value>(true);
        reads_as_serde_json::<Loose>(true);
        reads_as_serde_json::<u32>(false);
        reads_as_serde_json::<bool>(false);
        reads_as_serde_json::<String>(false);
        reads_as_serde_json::<Vec<u8>>(false);
        reads_as_serde_json::<Fields>(false);
        reads_as_serde_json::<Defaulted>(false);
        reads_as_serde_json::<Kind>(false);
        reads_as_serde_json::<BTreeMap<String, u32>>(false);
        reads_as_serde_json::<((),)>(false);
    }
}
