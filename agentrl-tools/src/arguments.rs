//! Typed tool arguments: each tool deserialises its JSON arguments into a struct of its own
//! with [`parse_args`], so a missing, mistyped or unknown argument is an ordinary
//! [`ToolError::InvalidArguments`] for the model, never a panic.
//!
//! ```
//! use agentrl_core::ToolError;
//! use agentrl_tools::parse_args;
//!
//! #[derive(serde::Deserialize)]
//! #[serde(deny_unknown_fields)]
//! struct Args {
//!     expression: String,
//! }
//!
//! let args: Args = parse_args(serde_json::json!({"expression": "1+1"})).unwrap();
//! assert_eq!(args.expression, "1+1");
//! let wrong = parse_args::<Args>(serde_json::json!({"expression": 2}));
//! assert!(matches!(wrong, Err(ToolError::InvalidArguments(_))));
//! ```

use agentrl_core::ToolError;
use serde::de::DeserializeOwned;
use serde_json::Value;

/// `args` as the tool's argument struct `T`, or [`ToolError::InvalidArguments`] saying what
/// does not fit (`missing field ...`, `invalid type ...`, `unknown field ...`).
pub fn parse_args<T: DeserializeOwned>(args: Value) -> Result<T, ToolError> {
    serde_json::from_value(args).map_err(|e| ToolError::InvalidArguments(e.to_string()))
}

/// For `#[serde(default, deserialize_with = "...")]` on an `Option<Value>` field that may hold
/// any JSON value: `null` given is `Some(Value::Null)` (a plain `Option` would make it `None`),
/// a field left out is `None`.
#[cfg(any(feature = "sql", feature = "web"))]
pub(crate) fn any_value<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<Value>, D::Error> {
    <Value as serde::Deserialize>::deserialize(deserializer).map(Some)
}

#[cfg(all(test, any(feature = "sql", feature = "web")))]
mod tests {
    use serde::Deserialize;
    use serde_json::{Value, json};

    use super::{any_value, parse_args};

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    struct WithBody {
        #[serde(default, deserialize_with = "any_value")]
        body: Option<Value>,
    }

    #[test]
    fn null_is_a_value_and_a_missing_field_is_none() {
        let given: WithBody = parse_args(json!({"body": null})).unwrap();
        assert_eq!(given.body, Some(Value::Null));
        let left_out: WithBody = parse_args(json!({})).unwrap();
        assert_eq!(left_out.body, None);
        assert!(parse_args::<WithBody>(json!({"other": 1})).is_err());
    }
}
