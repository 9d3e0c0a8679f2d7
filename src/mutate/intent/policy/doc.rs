//! The policy annotation read in one pass into a borrowed document that
//! accepts any JSON value; `super::parse` checks its shape afterwards.

use std::borrow::Cow;

use serde::de::{self, Deserialize, MapAccess, SeqAccess};
use serde_json::Value;

use crate::json::text::Text;

// --- the borrowed document ------------------------------------------------
//
// Every visitor below accepts any JSON value, so the only errors serde_json
// reports are syntax errors, exactly as when parsing into a `Value`. Values
// the checks do not look into are still parsed as a `Value` (numbers out of
// range are syntax errors there too); they are rare and off the fast path.
// Duplicate keys: the last value wins and an unknown key is reported where it
// first appeared, as with a `Value` object.

/// A JSON value that is either an object read as `T` or anything else.
pub(super) enum Node<T> {
    Object(T),
    Other,
}

/// A value the checks want as a string; `null` is told apart because a
/// `null` defaultAction means "not given".
pub(super) enum Scalar<'a> {
    Null,
    Str(Cow<'a, str>),
    Other,
}

pub(super) enum Rules<'a> {
    Null,
    List(Vec<Node<RuleDoc<'a>>>),
    Other,
}

#[derive(Default)]
pub(super) struct PolicyDoc<'a> {
    pub(super) default_action: Option<Scalar<'a>>,
    pub(super) egress: Option<Rules<'a>>,
    pub(super) unknown: Option<Cow<'a, str>>,
}

#[derive(Default)]
pub(super) struct RuleDoc<'a> {
    pub(super) action: Option<Scalar<'a>>,
    pub(super) target: Option<Scalar<'a>>,
    pub(super) unknown: Option<Cow<'a, str>>,
}

/// Reads the fields of one object into `T`; the first unknown key is kept.
trait Fields<'de>: Default {
    fn field<A: MapAccess<'de>>(&mut self, key: Cow<'de, str>, map: &mut A)
    -> Result<(), A::Error>;
}

/// One `Fields` impl per document: JSON key => field, any other key is
/// read (so syntax errors still count) and the first one remembered.
macro_rules! fields {
    ($doc:ident { $($key:literal => $field:ident),+ }) => {
        impl<'de> Fields<'de> for $doc<'de> {
            fn field<A: MapAccess<'de>>(
                &mut self,
                key: Cow<'de, str>,
                map: &mut A,
            ) -> Result<(), A::Error> {
                match key.as_ref() {
                    $($key => self.$field = Some(map.next_value()?),)+
                    _ => {
                        map.next_value::<Value>()?;
                        self.unknown.get_or_insert(key);
                    }
                }
                Ok(())
            }
        }
    };
}

fields!(PolicyDoc { "defaultAction" => default_action, "egress" => egress });
fields!(RuleDoc { "action" => action, "target" => target });

deserialize_by_visitor! {
    impl<'de, T> for Node<T>, visitor V<T> where [T: Fields<'de>];
    expecting "any JSON value", by deserialize_any;
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut fields = T::default();
        while let Some(Text(key)) = map.next_key()? {
            fields.field(key, &mut map)?;
        }
        Ok(Node::Object(fields))
    }
    not_this_shape!(Node::Other, lists as Value, null too);
}

deserialize_by_visitor! {
    impl<'de> for Scalar<'de>, visitor V<'de>;
    expecting "any JSON value", by deserialize_any;
    fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
        Ok(Scalar::Str(Cow::Borrowed(v)))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        Ok(Scalar::Str(Cow::Owned(v.to_owned())))
    }
    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(Scalar::Null)
    }
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        Value::deserialize(de::value::MapAccessDeserializer::new(map))?;
        Ok(Scalar::Other)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
        Value::deserialize(de::value::SeqAccessDeserializer::new(seq))?;
        Ok(Scalar::Other)
    }
    non_string_scalars!(|_v| Scalar::Other);
}

deserialize_by_visitor! {
    impl<'de> for Rules<'de>, visitor V<'de>;
    expecting "any JSON value", by deserialize_any;
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut rules = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(64));
        while let Some(rule) = seq.next_element()? {
            rules.push(rule);
        }
        Ok(Rules::List(rules))
    }
    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(Rules::Null)
    }
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        Value::deserialize(de::value::MapAccessDeserializer::new(map))?;
        Ok(Rules::Other)
    }
    fn visit_str<E: de::Error>(self, _: &str) -> Result<Self::Value, E> {
        Ok(Rules::Other)
    }
    non_string_scalars!(|_v| Rules::Other);
}
