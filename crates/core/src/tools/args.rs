//! Tool arguments: each tool's are a `#[derive(Deserialize, JsonSchema)]` struct, the one source of
//! both the schema the model sees ([`schema_for`]) and the decoding of what it sends ([`decode`]).
//! Models are loose with types, so numbers and booleans written as strings are accepted
//! ([`Int`], [`Flag`], [`Vars`]), as before; anything else wrong is an error naming the argument.

use std::any::TypeId;
use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use schemars::{JsonSchema, Schema, SchemaGenerator, generate::SchemaSettings, json_schema};
use serde::de::{self, DeserializeOwned, Deserializer};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::sync::lock;

/// The JSON schema of `T` as the model is given it (see [`generate`]), generated once per process:
/// tools built for each turn (the subagent tools) share it.
pub fn schema_for<T: JsonSchema + 'static>() -> Arc<Value> {
    static SCHEMAS: OnceLock<Mutex<HashMap<TypeId, Arc<Value>>>> = OnceLock::new();
    let schemas = SCHEMAS.get_or_init(Mutex::default);
    if let Some(schema) = lock(schemas).get(&TypeId::of::<T>()) {
        return schema.clone();
    }
    let schema = Arc::new(generate::<T>());
    lock(schemas).entry(TypeId::of::<T>()).or_insert(schema).clone()
}

/// The JSON schema of `T`: inlined, without the meta-schema, title and integer formats, and
/// optional fields without `null` (an absent argument is how a model leaves one out).
fn generate<T: JsonSchema>() -> Value {
    let settings = SchemaSettings::draft2020_12().with(|s| {
        s.meta_schema = None;
        s.inline_subschemas = true;
    });
    let mut value = settings.into_generator().into_root_schema_for::<T>().to_value();
    if let Value::Object(root) = &mut value {
        root.remove("title");
        root.remove("description");
    }
    tidy(&mut value);
    value
}

/// Tidies one schema object, then the schemas inside it (never the names of its properties).
fn tidy(value: &mut Value) {
    let Value::Object(map) = value else { return };
    let numeric = matches!(map.get("type").and_then(Value::as_str), Some("integer" | "number"));
    if numeric && map.get("format").is_some_and(Value::is_string) {
        map.remove("format");
    }
    if let Some(Value::Array(types)) = map.get_mut("type") {
        types.retain(|t| t != "null");
        if types.len() == 1 {
            let only = types.remove(0);
            map.insert("type".into(), only);
        }
    }
    if let Some(Value::Array(options)) = map.get_mut("enum") {
        options.retain(|o| !o.is_null());
    }
    // `Option<Enum>`: `anyOf: [{enum}, {type: null}]` → the enum.
    if let Some(Value::Array(any)) = map.get("anyOf")
        && any.len() == 2
        && any[1] == serde_json::json!({"type": "null"})
        && let Some(Value::Object(inner)) = map.remove("anyOf").and_then(|a| a.as_array()?.first().cloned())
    {
        for (k, v) in inner {
            map.entry(k).or_insert(v);
        }
    }
    for key in ["properties", "$defs"] {
        if let Some(Value::Object(named)) = map.get_mut(key) {
            named.values_mut().for_each(tidy);
        }
    }
    for key in ["items", "additionalProperties"] {
        if let Some(schema) = map.get_mut(key) {
            tidy(schema);
        }
    }
    for key in ["anyOf", "oneOf", "allOf"] {
        if let Some(Value::Array(schemas)) = map.get_mut(key) {
            schemas.iter_mut().for_each(tidy);
        }
    }
}

/// Decodes a call's arguments; errors name the argument (`plan[2].status: …`).
pub fn decode<T: DeserializeOwned>(args: &Value) -> Result<T, String> {
    let args = if args.is_null() { &Value::Object(Default::default()) } else { args };
    serde_path_to_error::deserialize(args).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner().to_string();
        if path == "." { inner } else { format!("`{path}`: {inner}") }
    })
}

/// A non-negative integer; also written as a string (`"20"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct Int(pub u64);

impl<'de> Deserialize<'de> for Int {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        match Value::deserialize(d)? {
            Value::Number(n) => {
                n.as_u64().map(Int).ok_or_else(|| de::Error::custom(format!("must be a non-negative integer, got {n}")))
            }
            Value::String(s) => s
                .trim()
                .parse()
                .map(Int)
                .map_err(|_| de::Error::custom(format!("must be a non-negative integer, got {s:?}"))),
            other => Err(de::Error::custom(format!("must be a non-negative integer, got {other}"))),
        }
    }
}

impl JsonSchema for Int {
    fn inline_schema() -> bool {
        true
    }

    fn schema_name() -> Cow<'static, str> {
        "Int".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({"type": "integer"})
    }
}

/// A boolean; also written as a string (`"true"`, `"false"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(transparent)]
pub struct Flag(pub bool);

impl<'de> Deserialize<'de> for Flag {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        match Value::deserialize(d)? {
            Value::Bool(b) => Ok(Flag(b)),
            Value::String(s) if s == "true" || s == "false" => Ok(Flag(s == "true")),
            other => Err(de::Error::custom(format!("must be true or false, got {other}"))),
        }
    }
}

impl JsonSchema for Flag {
    fn inline_schema() -> bool {
        true
    }

    fn schema_name() -> Cow<'static, str> {
        "Flag".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({"type": "boolean"})
    }
}

/// An object of string values, kept in the order given (environment variables); values that are
/// not strings are taken as their JSON text.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Vars(pub Vec<(String, String)>);

impl<'de> Deserialize<'de> for Vars {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        match Value::deserialize(d)? {
            Value::Null => Ok(Vars::default()),
            Value::Object(map) => Ok(Vars(
                map.into_iter()
                    .map(|(k, v)| match v {
                        Value::String(s) => (k, s),
                        other => (k, other.to_string()),
                    })
                    .collect(),
            )),
            other => Err(de::Error::custom(format!("must be an object of strings, got {other}"))),
        }
    }
}

impl JsonSchema for Vars {
    fn inline_schema() -> bool {
        true
    }

    fn schema_name() -> Cow<'static, str> {
        "Vars".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({"type": "object", "additionalProperties": {"type": "string"}})
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[derive(Debug, Deserialize, JsonSchema)]
    #[allow(dead_code)]
    struct Named {
        /// How to render it
        format: String,
        size: u64,
    }

    #[test]
    fn a_schema_is_generated_once_and_shared() {
        assert!(std::sync::Arc::ptr_eq(&schema_for::<Named>(), &schema_for::<Named>()));
        assert_ne!(schema_for::<Named>(), schema_for::<Example>());
    }

    #[test]
    fn an_argument_may_be_called_format() {
        assert_eq!(
            *schema_for::<Named>(),
            json!({
                "type": "object",
                "properties": {
                    "format": {"type": "string", "description": "How to render it"},
                    "size": {"type": "integer", "minimum": 0}
                },
                "required": ["format", "size"]
            })
        );
    }

    #[derive(Debug, Deserialize, JsonSchema, PartialEq)]
    struct Example {
        /// A path
        path: String,
        /// How many
        #[schemars(range(min = 1))]
        limit: Option<Int>,
        flag: Option<Flag>,
    }

    #[test]
    fn schemas_are_plain_and_optional_fields_are_not_nullable() {
        assert_eq!(
            *schema_for::<Example>(),
            json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "A path"},
                    "limit": {"type": "integer", "minimum": 1, "description": "How many"},
                    "flag": {"type": "boolean"}
                },
                "required": ["path"]
            })
        );
    }

    #[test]
    fn numbers_and_booleans_may_come_as_strings_and_errors_name_the_argument() {
        assert_eq!(
            decode::<Example>(&json!({"path": "a", "limit": " 20", "flag": "true"})),
            Ok(Example { path: "a".into(), limit: Some(Int(20)), flag: Some(Flag(true)) })
        );
        assert_eq!(decode::<Example>(&json!({"path": "a"})).map(|e| e.limit), Ok(None));
        assert_eq!(decode::<Example>(&json!({})), Err("missing field `path`".to_owned()));
        assert_eq!(
            decode::<Example>(&json!({"path": 5})),
            Err("`path`: invalid type: integer `5`, expected a string".to_owned())
        );
        assert_eq!(
            decode::<Example>(&json!({"path": "a", "limit": -1})),
            Err("`limit`: must be a non-negative integer, got -1".to_owned())
        );
        assert_eq!(
            decode::<Example>(&json!({"path": "a", "flag": "yes"})),
            Err("`flag`: must be true or false, got \"yes\"".to_owned())
        );
    }
}
