//! One Python-style JSON writer (`json.dump` with its defaults) for every document we write:
//! the result files (`output::json` builds them) and the error texts Python's client builds
//! with `json.dumps` (`super::json_dumps`). `", "` and `": "` separators, keys in insertion
//! order, `ensure_ascii` escaping, floats as Python's `repr`, and `null` for a non-finite
//! float (our documents are strict JSON; see `output::json`).

use std::borrow::Cow;
use std::collections::HashMap;
use std::fmt::Write as _;

use super::push_float_repr;

/// A JSON value. Per-request number lists have their own variants so large runs (millions of
/// ITL samples) are written straight from the outcomes without one node per number.
#[derive(Debug, Clone, PartialEq)]
pub enum Json<'a> {
    Null,
    Bool(bool),
    Int(i64),
    UInt(u64),
    Float(f64),
    Str(Cow<'a, str>),
    Floats(Cow<'a, [f64]>),
    UInts(Cow<'a, [u64]>),
    List(Vec<Json<'a>>),
    Object(JsonObject<'a>),
    /// A serde value (a shard's section, a server's error object), written by the same
    /// rules.
    Value(Cow<'a, serde_json::Value>),
}

impl<'a> Json<'a> {
    /// A string value.
    pub fn str(s: impl Into<Cow<'a, str>>) -> Self {
        Json::Str(s.into())
    }

    /// `null` for `None`.
    pub fn opt<T>(value: Option<T>, f: impl FnOnce(T) -> Json<'a>) -> Self {
        value.map_or(Json::Null, f)
    }

    /// The same value holding its own data (a document kept after its run is dropped).
    pub fn into_owned(self) -> Json<'static> {
        match self {
            Json::Null => Json::Null,
            Json::Bool(b) => Json::Bool(b),
            Json::Int(i) => Json::Int(i),
            Json::UInt(u) => Json::UInt(u),
            Json::Float(f) => Json::Float(f),
            Json::Str(s) => Json::Str(Cow::Owned(s.into_owned())),
            Json::Floats(v) => Json::Floats(Cow::Owned(v.into_owned())),
            Json::UInts(v) => Json::UInts(Cow::Owned(v.into_owned())),
            Json::List(v) => Json::List(v.into_iter().map(Json::into_owned).collect()),
            Json::Object(o) => Json::Object(o.into_owned()),
            Json::Value(v) => Json::Value(Cow::Owned(v.into_owned())),
        }
    }

    /// The `json.dump` text of this value.
    pub fn to_json_string(&self) -> String {
        let mut out = String::new();
        self.write_to(&mut out);
        out
    }

    /// Appends the `json.dump` text of this value.
    pub fn write_to(&self, out: &mut String) {
        match self {
            Json::Null => out.push_str("null"),
            Json::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
            Json::Int(i) => {
                let _ = write!(out, "{i}");
            }
            Json::UInt(u) => {
                let _ = write!(out, "{u}");
            }
            Json::Float(f) => write_float(out, *f),
            Json::Str(s) => write_str(out, s),
            Json::Floats(v) => write_seq(out, v.iter(), |out, f| write_float(out, *f)),
            Json::UInts(v) => write_seq(out, v.iter(), |out, u| {
                let _ = write!(out, "{u}");
            }),
            Json::List(v) => write_seq(out, v.iter(), |out, item| item.write_to(out)),
            Json::Object(o) => o.write_to(out),
            Json::Value(v) => write_value(out, v),
        }
    }
}

/// An insertion-ordered JSON object with Python dict assignment semantics.
///
/// Small objects (most of a result document) find a key by a linear search; from
/// [`INDEX_FROM`] keys on, a hash index keeps `set` and `get` O(1), so an object built from a
/// server's `/metrics` with 100,000 names costs no quadratic key search.
#[derive(Debug, Clone, Default)]
pub struct JsonObject<'a> {
    entries: Vec<(Cow<'a, str>, Json<'a>)>,
    /// Each key's position in `entries`, once there are [`INDEX_FROM`] keys or more.
    index: Option<HashMap<Box<str>, usize>>,
}

/// From this many keys on an object keeps a hash index of them.
const INDEX_FROM: usize = 32;

impl PartialEq for JsonObject<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.entries == other.entries
    }
}

impl<'a> JsonObject<'a> {
    /// An empty object.
    pub fn new() -> Self {
        Self::default()
    }

    /// Where `key` is in `entries`.
    fn position(&self, key: &str) -> Option<usize> {
        match &self.index {
            Some(index) => index.get(key).copied(),
            None => self.entries.iter().position(|(k, _)| k == key),
        }
    }

    /// Builds the index when the object has grown large enough to need it (or drops it).
    fn reindex(&mut self) {
        self.index = (self.entries.len() >= INDEX_FROM).then(|| {
            let keys = self.entries.iter().enumerate();
            keys.map(|(i, (k, _))| (Box::from(k.as_ref()), i)).collect()
        });
    }

    /// `d[key] = value`: replaces the value of an existing key in place, else appends.
    pub fn set(&mut self, key: impl Into<Cow<'a, str>>, value: Json<'a>) {
        let key = key.into();
        if let Some(i) = self.position(&key) {
            self.entries[i].1 = value;
            return;
        }
        let at = self.entries.len();
        match &mut self.index {
            Some(index) => {
                index.insert(Box::from(key.as_ref()), at);
                self.entries.push((key, value));
            }
            None => {
                self.entries.push((key, value));
                if self.entries.len() >= INDEX_FROM {
                    self.reindex();
                }
            }
        }
    }

    /// `del d[key]` if present; returns the removed value.
    pub fn remove(&mut self, key: &str) -> Option<Json<'a>> {
        let i = self.position(key)?;
        let removed = self.entries.remove(i).1;
        if self.index.is_some() {
            self.reindex();
        }
        Some(removed)
    }

    /// The value of `key`, if present.
    pub fn get(&self, key: &str) -> Option<&Json<'a>> {
        self.position(key).map(|i| &self.entries[i].1)
    }

    /// The keys, in order.
    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.entries.iter().map(|(k, _)| k.as_ref())
    }

    /// The same object holding its own data.
    pub fn into_owned(self) -> JsonObject<'static> {
        JsonObject {
            entries: self
                .entries
                .into_iter()
                .map(|(k, v)| (Cow::Owned(k.into_owned()), v.into_owned()))
                .collect(),
            index: self.index,
        }
    }

    /// The keys and values, in order.
    pub fn into_entries(self) -> impl Iterator<Item = (Cow<'a, str>, Json<'a>)> {
        self.entries.into_iter()
    }

    /// Number of keys.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True when the object has no keys.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Appends the `json.dump` text of this object.
    pub fn write_to(&self, out: &mut String) {
        let members = self.entries.iter().map(|(k, v)| (k.as_ref(), v));
        write_object(out, members, |out, v| v.write_to(out));
    }

    /// The `json.dump` text of this object.
    pub fn to_json_string(&self) -> String {
        let mut out = String::new();
        self.write_to(&mut out);
        out
    }
}

fn write_seq<T>(
    out: &mut String,
    items: impl Iterator<Item = T>,
    mut f: impl FnMut(&mut String, T),
) {
    out.push('[');
    for (i, item) in items.enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        f(out, item);
    }
    out.push(']');
}

/// A float as `json.dump` writes it (`repr`), but `null` for a non-finite one where Python
/// writes `NaN` / `Infinity`: our documents are strict JSON (see the module doc).
fn write_float(out: &mut String, f: f64) {
    if f.is_finite() {
        push_float_repr(out, f);
    } else {
        out.push_str("null");
    }
}

/// A string with `ensure_ascii=True` escaping (one implementation, Python's `json`).
fn write_str(out: &mut String, s: &str) {
    push_json_str(out, s);
}

fn write_value(out: &mut String, value: &serde_json::Value) {
    use serde_json::Value;
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => match (n.as_i64(), n.as_u64(), n.as_f64()) {
            (Some(i), _, _) => {
                let _ = write!(out, "{i}");
            }
            (None, Some(u), _) => {
                let _ = write!(out, "{u}");
            }
            (_, _, Some(f)) => write_float(out, f),
            _ => out.push_str("null"),
        },
        Value::String(s) => write_str(out, s),
        Value::Array(items) => write_seq(out, items.iter(), write_value),
        Value::Object(members) => {
            let members = members.iter().map(|(k, v)| (k.as_str(), v));
            write_object(out, members, write_value);
        }
    }
}

/// `{"k": v, ...}` with Python's separators.
fn write_object<'k, V>(
    out: &mut String,
    members: impl Iterator<Item = (&'k str, V)>,
    mut f: impl FnMut(&mut String, V),
) {
    out.push('{');
    for (i, (k, v)) in members.enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        write_str(out, k);
        out.push_str(": ");
        f(out, v);
    }
    out.push('}');
}

/// A JSON string literal as Python's `json` writes it with `ensure_ascii=True`: printable
/// ASCII as is, the usual short escapes, everything else as `\uXXXX` (lowercase hex,
/// surrogate pairs above U+FFFF).
pub fn push_json_str(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            ' '..='~' => out.push(c),
            _ => {
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    let _ = write!(out, "\\u{unit:04x}");
                }
            }
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_large_object_keeps_dict_semantics_with_its_index() {
        let mut o = JsonObject::new();
        for i in 0..1000u64 {
            o.set(format!("k{i}"), Json::UInt(i));
        }
        // Assigning an existing key replaces it in place, small object or large.
        o.set("k3", Json::str("three"));
        o.set("k999", Json::Null);
        assert_eq!(o.len(), 1000);
        assert_eq!(o.get("k3"), Some(&Json::str("three")));
        assert_eq!(o.keys().nth(3), Some("k3"));
        assert_eq!(o.remove("k0"), Some(Json::UInt(0)));
        assert_eq!(o.get("k0"), None);
        assert_eq!(
            o.get("k1"),
            Some(&Json::UInt(1)),
            "positions after a removal"
        );
        o.set("k0", Json::UInt(7));
        assert_eq!(o.keys().last(), Some("k0"), "a new key goes last");
        let owned = o.clone().into_owned();
        assert_eq!(owned.get("k500"), Some(&Json::UInt(500)));
        assert_eq!(owned, o);
    }

    #[test]
    fn setting_100k_distinct_keys_is_not_quadratic() {
        // A linear search per `set` made this 5 * 10^9 key comparisons; indexed it is a
        // few milliseconds (the bound is generous: a regression guard, not a benchmark).
        let started = std::time::Instant::now();
        let mut o = JsonObject::new();
        for i in 0..100_000u64 {
            o.set(format!("vllm:metric_{i}"), Json::UInt(i));
        }
        assert_eq!(o.len(), 100_000);
        assert!(
            started.elapsed() < std::time::Duration::from_secs(5),
            "{:?}",
            started.elapsed()
        );
    }
}
