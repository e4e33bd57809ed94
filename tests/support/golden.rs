//! The placeholders of golden exchanges (`fixtures/acp/*.ndjson`): matching what the agent sent
//! against a `recv` line, and, for `UPDATE_GOLDEN=1`, merging what it sent into the line so that the
//! placeholders which still match stay where they are and the file stays the same from run to run.
//!
//! Placeholders: `"$any"` matches any value; `"${name}"` captures a value on first sight and must
//! match it afterwards; `$home` inside a string stands for the agent's home directory.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::fmt;

use serde::de::{Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::Value;

pub const ANY: &str = "$any";

/// A JSON value that keeps the keys of its objects in the order they were written, so a rewritten
/// line lists them as the file did.
#[derive(Debug, Clone, PartialEq)]
pub enum Json {
    Scalar(Value),
    Array(Vec<Json>),
    Object(Vec<(String, Json)>),
}

impl Json {
    pub fn parse(text: &str) -> Result<Self, serde_json::Error> {
        serde_json::from_str(text)
    }

    pub fn to_value(&self) -> Value {
        match self {
            Self::Scalar(v) => v.clone(),
            Self::Array(items) => Value::Array(items.iter().map(Self::to_value).collect()),
            Self::Object(entries) => Value::Object(entries.iter().map(|(k, v)| (k.clone(), v.to_value())).collect()),
        }
    }

    pub fn get(&self, key: &str) -> Option<&Self> {
        match self {
            Self::Object(entries) => entries.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    fn str(&self) -> Option<&str> {
        match self {
            Self::Scalar(Value::String(s)) => Some(s),
            _ => None,
        }
    }
}

/// Compact, as `serde_json::to_string` writes it, but in the value's own key order.
impl fmt::Display for Json {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Scalar(v) => write!(f, "{v}"),
            Self::Array(items) => {
                f.write_str("[")?;
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        f.write_str(",")?;
                    }
                    write!(f, "{item}")?;
                }
                f.write_str("]")
            }
            Self::Object(entries) => {
                f.write_str("{")?;
                for (i, (k, v)) in entries.iter().enumerate() {
                    if i > 0 {
                        f.write_str(",")?;
                    }
                    write!(f, "{}:{v}", Value::String(k.clone()))?;
                }
                f.write_str("}")
            }
        }
    }
}

impl<'de> Deserialize<'de> for Json {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(JsonVisitor)
    }
}

struct JsonVisitor;

impl<'de> Visitor<'de> for JsonVisitor {
    type Value = Json;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_unit<E>(self) -> Result<Json, E> {
        Ok(Json::Scalar(Value::Null))
    }
    fn visit_bool<E>(self, v: bool) -> Result<Json, E> {
        Ok(Json::Scalar(v.into()))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Json, E> {
        Ok(Json::Scalar(v.into()))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Json, E> {
        Ok(Json::Scalar(v.into()))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Json, E> {
        Ok(Json::Scalar(v.into()))
    }
    fn visit_str<E>(self, v: &str) -> Result<Json, E> {
        Ok(Json::Scalar(v.into()))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Json, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element()? {
            items.push(item);
        }
        Ok(Json::Array(items))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Json, A::Error> {
        let mut entries: Vec<(String, Json)> = Vec::new();
        while let Some((k, v)) = map.next_entry::<String, Json>()? {
            // As serde_json: a repeated key keeps its last value.
            entries.retain(|(key, _)| *key != k);
            entries.push((k, v));
        }
        Ok(Json::Object(entries))
    }
}

fn var_name(s: &str) -> Option<&str> {
    s.strip_prefix("${")?.strip_suffix('}')
}

/// What the placeholders of one exchange stand for: the captured values and the agent's home.
#[derive(Debug)]
pub struct Bindings {
    vars: BTreeMap<String, Value>,
    home: String,
}

impl Bindings {
    pub fn new(home: &str) -> Self {
        Self { vars: BTreeMap::new(), home: home.to_owned() }
    }

    /// A `send` message with its `"${name}"` and `$home` replaced.
    pub fn substitute(&self, value: &Value) -> Result<Value, String> {
        Ok(match value {
            Value::String(s) => match var_name(s) {
                Some(name) => self.vars.get(name).cloned().ok_or_else(|| format!("${{{name}}} used before capture"))?,
                None => Value::String(s.replace("$home", &self.home)),
            },
            Value::Array(items) => Value::Array(items.iter().map(|v| self.substitute(v)).collect::<Result<_, _>>()?),
            Value::Object(map) => Value::Object(
                map.iter().map(|(k, v)| Ok((k.clone(), self.substitute(v)?))).collect::<Result<_, String>>()?,
            ),
            other => other.clone(),
        })
    }

    /// Checks `actual` against a `recv` value, capturing on first sight; the error names the path.
    pub fn matches(&mut self, expected: &Value, actual: &Value, path: &str) -> Result<(), String> {
        match expected {
            Value::String(s) if s == ANY => Ok(()),
            Value::String(s) if var_name(s).is_some() => {
                let name = var_name(s).unwrap_or_default().to_owned();
                match self.vars.get(&name) {
                    Some(v) if v == actual => Ok(()),
                    Some(v) => Err(format!("{path}: ${{{name}}} was {v}, now {actual}")),
                    None => {
                        self.vars.insert(name, actual.clone());
                        Ok(())
                    }
                }
            }
            Value::String(s) => {
                let want = s.replace("$home", &self.home);
                (actual.as_str() == Some(want.as_str()))
                    .then_some(())
                    .ok_or_else(|| format!("{path}: want {want:?}, got {actual}"))
            }
            Value::Object(want) => {
                let got = actual.as_object().ok_or_else(|| format!("{path}: want an object, got {actual}"))?;
                let mut want_keys: Vec<&String> = want.keys().collect();
                let mut got_keys: Vec<&String> = got.keys().collect();
                want_keys.sort();
                got_keys.sort();
                if want_keys != got_keys {
                    return Err(format!("{path}: keys {want_keys:?} != {got_keys:?}"));
                }
                want.iter().try_for_each(|(k, v)| self.matches(v, &got[k], &format!("{path}.{k}")))
            }
            Value::Array(want) => {
                let got = actual.as_array().ok_or_else(|| format!("{path}: want an array, got {actual}"))?;
                if want.len() != got.len() {
                    return Err(format!("{path}: length {} != {}", want.len(), got.len()));
                }
                want.iter().zip(got).enumerate().try_for_each(|(i, (w, g))| self.matches(w, g, &format!("{path}[{i}]")))
            }
            other => (other == actual).then_some(()).ok_or_else(|| format!("{path}: want {other}, got {actual}")),
        }
    }

    /// The `recv` value to write for `actual`: what the agent sent, with the placeholders of
    /// `expected` kept wherever they still match, and `expected`'s key order (keys it lacks come
    /// after, in the order the agent sent them). When `actual` matches, the result is `expected`.
    pub fn merge(&mut self, expected: &Json, actual: &Json, key: Option<&str>) -> Json {
        match (expected, actual) {
            (Json::Scalar(Value::String(s)), _) if s == ANY => expected.clone(),
            (Json::Scalar(Value::String(s)), _) if var_name(s).is_some() => {
                let name = var_name(s).unwrap_or_default().to_owned();
                let value = actual.to_value();
                match self.vars.get(&name) {
                    None => {
                        self.vars.insert(name, value);
                        expected.clone()
                    }
                    Some(v) if *v == value => expected.clone(),
                    Some(_) => self.fresh(actual, key),
                }
            }
            (Json::Scalar(Value::String(s)), Json::Scalar(Value::String(a)))
                if s.replace("$home", &self.home) == *a =>
            {
                expected.clone()
            }
            (Json::Object(want), Json::Object(got)) => {
                let mut out = Vec::new();
                for (k, w) in want {
                    if let Some(g) = actual.get(k) {
                        out.push((k.clone(), self.merge(w, g, Some(k))));
                    }
                }
                for (k, g) in got {
                    if expected.get(k).is_none() {
                        out.push((k.clone(), self.fresh(g, Some(k))));
                    }
                }
                Json::Object(out)
            }
            (Json::Array(want), Json::Array(got)) => Json::Array(
                got.iter()
                    .enumerate()
                    .map(|(i, g)| match want.get(i) {
                        Some(w) => self.merge(w, g, key),
                        None => self.fresh(g, key),
                    })
                    .collect(),
            ),
            (Json::Scalar(w), Json::Scalar(a)) if w == a => expected.clone(),
            _ => self.fresh(actual, key),
        }
    }

    /// A value the file has no line for yet, made as stable as it can be: a value captured before
    /// becomes its `"${name}"`, a time becomes `"$any"`, a generated id (32 hex digits, as the
    /// agent's `sess_…`, `msg_…` and `call_…`) a new capture named after its key, and the home
    /// directory `$home`.
    pub fn fresh(&mut self, actual: &Json, key: Option<&str>) -> Json {
        match actual {
            Json::Scalar(Value::String(s)) => {
                let placeholder = |name: &str| Json::Scalar(Value::String(format!("${{{name}}}")));
                if let Some(name) = self.vars.iter().find(|(_, v)| v.as_str() == Some(s)).map(|(n, _)| n.clone()) {
                    placeholder(&name)
                } else if looks_like_a_time(s) {
                    Json::Scalar(ANY.into())
                } else if looks_generated(s) {
                    let base = key.unwrap_or("id");
                    let name = (1..)
                        .map(|n| if n == 1 { base.to_owned() } else { format!("{base}{n}") })
                        .find(|n| !self.vars.contains_key(n))
                        .unwrap_or_default();
                    self.vars.insert(name.clone(), actual.to_value());
                    placeholder(&name)
                } else {
                    Json::Scalar(Value::String(s.replace(&self.home, "$home")))
                }
            }
            Json::Array(items) => Json::Array(items.iter().map(|v| self.fresh(v, key)).collect()),
            Json::Object(entries) => {
                Json::Object(entries.iter().map(|(k, v)| (k.clone(), self.fresh(v, Some(k)))).collect())
            }
            scalar => scalar.clone(),
        }
    }
}

/// Whether two messages are the same message of the exchange (so one updates the other): the same
/// method (and kind of session update), or for responses the same id.
pub fn same_message(expected: &Value, actual: &Value) -> bool {
    // A line still to be written (`{}`) takes whatever comes.
    if expected.as_object().is_none_or(|o| o.is_empty()) {
        return true;
    }
    let kind = |m: &Value| (m.get("method").cloned(), m["params"]["update"]["sessionUpdate"].clone());
    if kind(expected) != kind(actual) {
        return false;
    }
    if expected.get("method").is_some() {
        return true;
    }
    match expected.get("id") {
        Some(Value::String(s)) if s == ANY || var_name(s).is_some() => true,
        id => id == actual.get("id"),
    }
}

/// `2026-01-31T12:00:00…`
fn looks_like_a_time(s: &str) -> bool {
    let b = s.as_bytes();
    let digits = |r: std::ops::Range<usize>| b.get(r).is_some_and(|d| d.iter().all(u8::is_ascii_digit));
    digits(0..4)
        && b.get(4) == Some(&b'-')
        && digits(5..7)
        && b.get(7) == Some(&b'-')
        && digits(8..10)
        && b.get(10) == Some(&b'T')
        && digits(11..13)
        && b.get(13) == Some(&b':')
}

/// Holds a run of at least 32 hexadecimal digits (a UUID without its dashes).
fn looks_generated(s: &str) -> bool {
    s.split(|c: char| !c.is_ascii_hexdigit()).any(|run| run.len() >= 32)
}
