//! Compiling a tool's parameter schema once and describing validation failures.

use jsonschema::Validator;
use serde_json::Value;

use super::text::excerpt;

/// At most this many schema errors are listed in one message.
const MAX_LISTED_ERRORS: usize = 5;
/// Each schema error message is cut to this many characters (it may quote the instance).
const MAX_ERROR_CHARS: usize = 200;

/// Compiles `parameters` (a `null` schema, meaning "no parameters", accepts any object).
pub(crate) fn compile(parameters: &Value) -> Result<Validator, String> {
    let any_object = serde_json::json!({"type": "object"});
    let schema = if parameters.is_null() {
        &any_object
    } else {
        parameters
    };
    jsonschema::validator_for(schema).map_err(|e| format!("invalid parameters schema: {e}"))
}

/// `None` when `args` is valid, else a description of every violation (`/path: message; ...`).
pub(crate) fn check(validator: &Validator, args: &Value) -> Option<String> {
    if validator.is_valid(args) {
        return None;
    }
    let mut listed = Vec::new();
    let mut total = 0usize;
    for error in validator.iter_errors(args) {
        total += 1;
        if listed.len() < MAX_LISTED_ERRORS {
            let path = error.instance_path().as_str();
            let path = if path.is_empty() { "(root)" } else { path };
            listed.push(format!(
                "{path}: {}",
                excerpt(&error.to_string(), MAX_ERROR_CHARS)
            ));
        }
    }
    if listed.is_empty() {
        return Some("arguments do not match the schema".to_string());
    }
    let mut message = listed.join("; ");
    if total > listed.len() {
        message.push_str(&format!("; and {} more", total - listed.len()));
    }
    Some(message)
}
