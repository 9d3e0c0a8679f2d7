//! The scaffolding the crate's hand-written readers share: macros, declared
//! in the first module of the crate (`#[macro_use]` in `lib.rs` and in
//! `json`) so that every module after it can use them, and the visitor
//! that [`objects_only!`] expands to.

/// The `Visitor` methods for booleans and numbers, each returning `$value`
/// with the visited value bound to `$v`.
macro_rules! non_string_scalars {
    (|$v:ident| $value:expr) => {
        fn visit_bool<E: de::Error>(self, $v: bool) -> Result<Self::Value, E> {
            Ok($value)
        }
        fn visit_i64<E: de::Error>(self, $v: i64) -> Result<Self::Value, E> {
            Ok($value)
        }
        fn visit_u64<E: de::Error>(self, $v: u64) -> Result<Self::Value, E> {
            Ok($value)
        }
        fn visit_f64<E: de::Error>(self, $v: f64) -> Result<Self::Value, E> {
            Ok($value)
        }
    };
}

/// The `Visitor` methods of a reader that wants one shape and counts the
/// others as "not it" (`$value`): `lists as $skip` for a reader of objects
/// (a list, a string, a boolean or a number is not it), `objects as $skip`
/// for a reader of lists (an object, a string, a boolean or a number). What
/// is not it is read through as `$skip`: `IgnoredAny`, or a type that
/// reports the syntax errors a `Value` would. `null too` counts null as not
/// it as well, for a reader that no `Option` stands in front of.
macro_rules! not_this_shape {
    ($value:expr, $other:ident as $skip:ty, null too) => {
        not_this_shape!($value, $other as $skip);
        fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok($value)
        }
    };
    ($value:expr, lists as $skip:ty) => {
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
            while seq.next_element::<$skip>()?.is_some() {}
            Ok($value)
        }
        fn visit_str<E: de::Error>(self, _: &str) -> Result<Self::Value, E> {
            Ok($value)
        }
        non_string_scalars!(|_v| $value);
    };
    ($value:expr, objects as $skip:ty) => {
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            while map.next_entry::<$skip, $skip>()?.is_some() {}
            Ok($value)
        }
        fn visit_str<E: de::Error>(self, _: &str) -> Result<Self::Value, E> {
            Ok($value)
        }
        non_string_scalars!(|_v| $value);
    };
}

/// `impl Deserialize for $ty` through a visitor made of the given methods:
/// the scaffolding every hand-written reader of `pod` and `policy` shares
/// (serde's derive borrows neither list items nor map keys, and cannot read
/// "any JSON value" without building a tree). The visitor's parameters are
/// the type's; `'de` is always the first of the impl's, and the bounds are
/// in brackets (`where ['de: 'a]`) so that the `;` after them ends them.
macro_rules! deserialize_by_visitor {
    (
        impl<'de $(, $param:tt)*> for $ty:ty, visitor V<$($vparam:tt),*>
        $(where [$($bound:tt)+])?;
        expecting $expecting:literal, by $entry:ident;
        $($method:item)*
    ) => {
        impl<'de $(, $param)*> serde::Deserialize<'de> for $ty $(where $($bound)+)? {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                struct V<$($vparam),*>(std::marker::PhantomData<fn() -> $ty>);
                impl<'de $(, $param)*> serde::de::Visitor<'de> for V<$($vparam),*>
                $(where $($bound)+)?
                {
                    type Value = $ty;
                    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                        f.write_str($expecting)
                    }
                    $($method)*
                }
                d.$entry(V(std::marker::PhantomData))
            }
        }
    };
}

/// A `DeserializeSeed` that reads any JSON value through itself, and
/// that `Visitor`, made of the given methods: the scaffolding of the
/// seeded readers of `affinity`, which carry the requested labels down.
macro_rules! seed_by_visitor {
    (
        impl for $ty:ty, value $value:ty, expecting $expecting:literal;
        $($method:item)*
    ) => {
        impl<'de> serde::de::DeserializeSeed<'de> for $ty {
            type Value = $value;
            fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<$value, D::Error> {
                d.deserialize_any(self)
            }
        }
        impl<'de> serde::de::Visitor<'de> for $ty {
            type Value = $value;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str($expecting)
            }
            $($method)*
        }
    };
}

/// `impl Deserialize for $ty` that takes a JSON object only, through the
/// reader serde derives for it with `#[serde(remote = "Self")]` (an
/// inherent `deserialize`, which [`FromObject`] calls). serde's derived
/// struct reader also takes an array and reads its items into the fields in
/// order, so `"securityContext": [true]` would read as `privileged: true`:
/// no Kubernetes object is an array, and a pod read that way would be
/// admitted without having been understood. Bounds are in brackets, as in
/// [`deserialize_by_visitor!`]. The views' `Option` fields carry no
/// `#[serde(default)]`: serde's derive reads a missing `Option` as `None`.
macro_rules! objects_only {
    (impl<'de $(, $param:tt)*> for $ty:ty $(where [$($bound:tt)+])?;) => {
        impl<'de $(, $param)*> $crate::json::visit::FromObject<'de> for $ty $(where $($bound)+)? {
            fn from_map<A: serde::de::MapAccess<'de>>(map: A) -> Result<Self, A::Error> {
                <$ty>::deserialize(serde::de::value::MapAccessDeserializer::new(map))
            }
        }
        impl<'de $(, $param)*> serde::Deserialize<'de> for $ty $(where $($bound)+)? {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                d.deserialize_map($crate::json::visit::ObjectVisitor(std::marker::PhantomData))
            }
        }
    };
}

/// A type read from the entries of a JSON object ([`objects_only!`]).
pub(crate) trait FromObject<'de>: Sized {
    fn from_map<A: serde::de::MapAccess<'de>>(map: A) -> Result<Self, A::Error>;
}

/// Reads a JSON object into `T`, and anything else not at all.
pub(crate) struct ObjectVisitor<T>(pub std::marker::PhantomData<fn() -> T>);

impl<'de, T: FromObject<'de>> serde::de::Visitor<'de> for ObjectVisitor<T> {
    type Value = T;
    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("an object")
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, map: A) -> Result<T, A::Error> {
        T::from_map(map)
    }
}
