//! [`Text`]: a string read from the request, borrowed where it can be.

use std::borrow::Cow;
use std::ops::Deref;

use serde::de;

/// A string borrowed from the request unless it holds escapes. serde borrows
/// a `Cow<str>` field marked `borrow`, but not the items of a list, the
/// keys of a map, or an `Option<Cow<str>>` (read owned, one allocation per
/// field and request): those need this newtype. Read as a string, not as a
/// newtype, so that a reader that tracks paths sees a map key it reads.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Text<'a>(pub Cow<'a, str>);

deserialize_by_visitor! {
    impl<'de, 'a> for Text<'a>, visitor V<'a> where ['de: 'a];
    expecting "a string", by deserialize_str;
    fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
        Ok(Text(Cow::Borrowed(v)))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        Ok(Text(Cow::Owned(v.to_owned())))
    }
}

impl PartialEq<str> for Text<'_> {
    fn eq(&self, other: &str) -> bool {
        self.0 == other
    }
}

impl Deref for Text<'_> {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}
