//! Whether a pod's required node affinity allows the requested platform,
//! read straight from its JSON text (`spec.affinity`, kept raw by the pod
//! view), with nothing kept but the verdict: no `serde_json::Value` tree,
//! no allocation. Building and dropping a `Value` (an ordered map per
//! object) for this was a fifth of the mutation's own cost on a 10 KB pod
//! (docs/performance.md, "Why the code is shaped this way").
//!
//! The seed (`OpenSandbox`'s `ensure_platform_compatible_with_affinity` and
//! `node_selector_term_satisfiable`) reads untyped dicts, and so does this,
//! exactly: a step that is not an object, a list or a string as expected
//! counts as missing; terms are OR-ed, expressions AND-ed; only object terms
//! count, so a list of nothing but non-objects allows nothing; `In`, `NotIn`
//! and `DoesNotExist` on a requested key are the only operators that can
//! rule a term out; `values` that is not a list counts as empty. A key given
//! twice in an object means its last value, as in a JSON object decoded by
//! the seed.

use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};

use crate::json::text::Text;

/// The node labels a platform pins (at most two: os and arch).
type Requested<'r> = &'r [(&'static str, &'static str)];

/// `false` when `affinity` (the JSON text of `spec.affinity`) has required
/// node selector terms and none of them can select a node with the
/// `requested` labels.
///
/// Text a `serde_json::Value` refuses (a number beyond `f64`, a lone
/// surrogate escape) anywhere in it counts as no affinity, as it did when
/// the affinity was read into a `Value` before: what is not read is still
/// checked as a `Value` would check it ([`Strict`]).
pub(crate) fn allows(affinity: &str, requested: Requested<'_>) -> bool {
    let mut de = serde_json::Deserializer::from_str(affinity);
    let verdict = Path(
        &[
            "nodeAffinity",
            "requiredDuringSchedulingIgnoredDuringExecution",
        ],
        requested,
    )
    .deserialize(&mut de);
    verdict.unwrap_or(Terms::NoConstraint) != Terms::Unsatisfiable
}

/// What the required terms say.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Terms {
    /// No term list, or an empty one.
    NoConstraint,
    Satisfiable,
    Unsatisfiable,
}

/// Walks down objects along `.0` (each step: the key's last value), then
/// reads `nodeSelectorTerms` there. Anything else along the way is
/// no constraint.
struct Path<'p, 'r>(&'p [&'static str], Requested<'r>);

seed_by_visitor! {
    impl for Path<'_, '_>, value Terms, expecting "any JSON value";
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Terms, A::Error> {
        let (step, rest) = match self.0 {
            [step, rest @ ..] => (*step, rest),
            [] => ("nodeSelectorTerms", &[][..]),
        };
        let mut terms = Terms::NoConstraint;
        while let Some(Text(key)) = map.next_key()? {
            if key != step {
                map.next_value::<Strict>()?;
            } else if self.0.is_empty() {
                terms = map.next_value_seed(TermList(self.1))?;
            } else {
                terms = map.next_value_seed(Path(rest, self.1))?;
            }
        }
        Ok(terms)
    }
    not_this_shape!(Terms::NoConstraint, lists as Strict, null too);
}

/// `nodeSelectorTerms`: OR-ed; only object terms count.
struct TermList<'r>(Requested<'r>);

seed_by_visitor! {
    impl for TermList<'_>, value Terms, expecting "any JSON value";
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Terms, A::Error> {
        let mut any = false;
        let mut satisfiable = false;
        while let Some(term) = seq.next_element_seed(Term(self.0))? {
            any = true;
            satisfiable |= term == Some(true);
        }
        Ok(match (any, satisfiable) {
            (false, _) => Terms::NoConstraint,
            (true, true) => Terms::Satisfiable,
            (true, false) => Terms::Unsatisfiable,
        })
    }
    not_this_shape!(Terms::NoConstraint, objects as Strict, null too);
}

/// One term: `None` when it is not an object, else whether its
/// `matchExpressions` (the last given) can all hold. A term without a list
/// of expressions is satisfiable.
struct Term<'r>(Requested<'r>);

seed_by_visitor! {
    impl for Term<'_>, value Option<bool>, expecting "any JSON value";
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Option<bool>, A::Error> {
        let mut satisfiable = true;
        while let Some(Text(key)) = map.next_key()? {
            if key == "matchExpressions" {
                satisfiable = map.next_value_seed(Expressions(self.0))?;
            } else {
                map.next_value::<Strict>()?;
            }
        }
        Ok(Some(satisfiable))
    }
    not_this_shape!(None, lists as Strict, null too);
}

/// `matchExpressions`: `true` unless an object expression rules the term
/// out; not a list counts as no expressions.
struct Expressions<'r>(Requested<'r>);

seed_by_visitor! {
    impl for Expressions<'_>, value bool, expecting "any JSON value";
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<bool, A::Error> {
        let mut holds = true;
        while let Some(allowed) = seq.next_element_seed(Expression(self.0))? {
            holds &= allowed;
        }
        Ok(holds)
    }
    not_this_shape!(true, objects as Strict, null too);
}

/// One expression: whether it lets a node with the requested labels
/// through (anything but an object does).
struct Expression<'r>(Requested<'r>);

seed_by_visitor! {
    impl for Expression<'_>, value bool, expecting "any JSON value";
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<bool, A::Error> {
        let (mut key, mut operator, mut listed) = (None, None, 0u8);
        while let Some(Text(field)) = map.next_key()? {
            match &*field {
                "key" => key = map.next_value::<MaybeText<'de>>()?.0,
                "operator" => operator = map.next_value::<MaybeText<'de>>()?.0,
                "values" => listed = map.next_value_seed(Listed(self.0))?,
                _ => {
                    map.next_value::<Strict>()?;
                }
            }
        }
        let Some(at) = key.and_then(|key| self.0.iter().position(|(k, _)| *k == key)) else {
            return Ok(true);
        };
        let listed = listed & (1 << at) != 0;
        Ok(match operator.as_deref() {
            Some("In") => listed,
            Some("NotIn") => !listed,
            Some("DoesNotExist") => false,
            _ => true,
        })
    }
    not_this_shape!(true, lists as Strict, null too);
}

/// `values`: bit `i` is set when the list holds the value of
/// `requested[i]`; not a list holds nothing.
struct Listed<'r>(Requested<'r>);

seed_by_visitor! {
    impl for Listed<'_>, value u8, expecting "any JSON value";
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<u8, A::Error> {
        let mut listed = 0;
        while let Some(MaybeText(value)) = seq.next_element()? {
            for (i, (_, wanted)) in self.0.iter().enumerate() {
                if value.as_deref() == Some(*wanted) {
                    listed |= 1 << i;
                }
            }
        }
        Ok(listed)
    }
    not_this_shape!(0, objects as Strict, null too);
}

/// Any JSON value, read through and dropped, but checked as a `Value`
/// would check it: serde's `IgnoredAny` only scans the syntax, and would
/// let through the numbers and escapes that made a `Value` refuse the
/// whole affinity (an apiserver never sends them; a fuzzed body can).
struct Strict;

impl<'de> de::Deserialize<'de> for Strict {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(Strict)
    }
}

impl<'de> Visitor<'de> for Strict {
    type Value = Strict;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_str<E: de::Error>(self, _: &str) -> Result<Strict, E> {
        Ok(Strict)
    }
    fn visit_unit<E: de::Error>(self) -> Result<Strict, E> {
        Ok(Strict)
    }
    non_string_scalars!(|_v| Strict);
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Strict, A::Error> {
        while seq.next_element::<Strict>()?.is_some() {}
        Ok(Strict)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Strict, A::Error> {
        while map.next_entry::<Strict, Strict>()?.is_some() {}
        Ok(Strict)
    }
}

/// A string, or `None` for any other value (read through).
struct MaybeText<'a>(Option<std::borrow::Cow<'a, str>>);

deserialize_by_visitor! {
    impl<'de, 'a> for MaybeText<'a>, visitor V<'a> where ['de: 'a];
    expecting "any JSON value", by deserialize_any;
    fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
        Ok(MaybeText(Some(std::borrow::Cow::Borrowed(v))))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        Ok(MaybeText(Some(std::borrow::Cow::Owned(v.to_owned()))))
    }
    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(MaybeText(None))
    }
    non_string_scalars!(|_v| MaybeText(None));
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        while seq.next_element::<Strict>()?.is_some() {}
        Ok(MaybeText(None))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        while map.next_entry::<Strict, Strict>()?.is_some() {}
        Ok(MaybeText(None))
    }
}

#[cfg(test)]
mod tests;
