//! What a gateway method is: its name, params, result and params' schema tied together
//! ([`Method`], declared with `method!`), and the pieces of schema the methods share.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;

use super::Schema;

/// A gateway method: its name, params, result and params' schema.
pub trait Method {
    const NAME: &'static str;
    type Params: Serialize + DeserializeOwned + Default;
    type Result: Serialize + DeserializeOwned + Default;
    fn schema() -> Schema;
}

/// A field as the sender gave it, or its default when it is of another type.
pub fn lenient<'de, D: Deserializer<'de>, T: DeserializeOwned + Default>(d: D) -> Result<T, D::Error> {
    let value = Value::deserialize(d)?;
    Ok(serde_json::from_value(value).unwrap_or_default())
}

macro_rules! method {
    ($(#[$doc:meta])* $ty:ident = $name:literal, $params:ty => $result:ty, $schema:expr) => {
        $(#[$doc])*
        pub struct $ty;
        impl Method for $ty {
            const NAME: &'static str = $name;
            type Params = $params;
            type Result = $result;
            fn schema() -> Schema {
                $schema
            }
        }
    };
}

pub(super) fn key() -> Schema {
    Schema::NonEmptyString
}

/// Anything (methods whose params are not read).
pub(super) fn any() -> Schema {
    Schema::open_object(&[])
}

/// No params at all.
pub(super) fn none() -> Schema {
    Schema::object(&[])
}

pub(super) fn at_least(min: i64) -> Schema {
    Schema::Integer { min: Some(min), max: None }
}

/// Params not read.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NoParams {}

pub(super) use method;
