//! Helpers for [`RewardFn::state`] and [`RewardFn::restore_state`] of the composers.
//!
//! A stateful reward's state is a JSON object tagged with the reward's name under `type`
//! (`{"type": "running_norm", "count": 3, ...}`); a composer's state holds each child's state
//! (`null` for a stateless child) under the child's field, and is `None` when no child has
//! state, so a stateless tree has no state at all. Restoring checks the tag, the keys and
//! every child, naming where a state does not fit the tree.

use agentrl_core::{Error, Result, RewardFn};
use serde_json::{Map, Value};

/// The `type` key of every state object.
const TYPE: &str = "type";

/// A state object tagged `name` with `fields`.
pub(crate) fn tagged(name: &str, fields: Vec<(&str, Value)>) -> Value {
    let mut object = Map::new();
    object.insert(TYPE.to_string(), Value::String(name.to_string()));
    for (key, value) in fields {
        object.insert(key.to_string(), value);
    }
    Value::Object(object)
}

/// The state of a composer named `name` whose children (by field) have `children` as states:
/// `None` when none of them has state.
pub(crate) fn composite(name: &str, children: Vec<(&str, Option<Value>)>) -> Option<Value> {
    if children.iter().all(|(_, state)| state.is_none()) {
        return None;
    }
    Some(tagged(
        name,
        children
            .into_iter()
            .map(|(key, state)| (key, state.unwrap_or(Value::Null)))
            .collect(),
    ))
}

/// A reward error of `name` with `message`.
pub(crate) fn error(name: &str, message: String) -> Error {
    Error::Reward {
        name: name.to_string(),
        message,
    }
}

/// `state` as the object of a state tagged `name` with exactly the keys `keys` (besides
/// `type`), of which those missing read as `null`.
pub(crate) fn expect_object<'a>(
    name: &str,
    state: &'a Value,
    keys: &[&str],
) -> Result<&'a Map<String, Value>> {
    let expected = || {
        let mut all = vec![TYPE];
        all.extend_from_slice(keys);
        all.join(", ")
    };
    let Value::Object(object) = state else {
        return Err(error(
            name,
            format!(
                "expected an object with {}, got {}",
                expected(),
                json_kind(state)
            ),
        ));
    };
    match object.get(TYPE) {
        Some(Value::String(tag)) if tag == name => {}
        Some(Value::String(tag)) => {
            return Err(error(
                name,
                format!("expected the state of a `{name}`, got that of a `{tag}`"),
            ));
        }
        _ => {
            return Err(error(
                name,
                format!("expected an object with {TYPE} = \"{name}\""),
            ));
        }
    }
    if let Some(unknown) = object
        .keys()
        .find(|key| *key != TYPE && !keys.contains(&key.as_str()))
    {
        return Err(error(
            name,
            format!("unknown key `{unknown}` (expected {})", expected()),
        ));
    }
    Ok(object)
}

/// Restores `child`, found at `at` (e.g. `term 1`) inside the composer `owner`, from `state`
/// (`None` or `null`: the child must be stateless); errors are the composer's, naming where.
pub(crate) fn restore_child(
    owner: &str,
    at: &str,
    child: &dyn RewardFn,
    state: Option<&Value>,
) -> Result<()> {
    let here = || format!("{at} ({})", child.name());
    match state {
        None | Some(Value::Null) => {
            if child.state().is_some() {
                return Err(error(
                    owner,
                    format!("{}: the state holds nothing for this stateful part", here()),
                ));
            }
            Ok(())
        }
        Some(state) => child.restore_state(state).map_err(|e| {
            let message = match e {
                Error::Reward { message, .. } => message,
                other => other.to_string(),
            };
            error(owner, format!("{}: {message}", here()))
        }),
    }
}

/// Restores the one inner reward of a wrapping composer `owner` (`{"type": owner, "reward":
/// ...}`, or `null` when the inner reward is stateless).
pub(crate) fn restore_wrapped(owner: &str, inner: &dyn RewardFn, state: &Value) -> Result<()> {
    let object = if state.is_null() {
        None
    } else {
        Some(expect_object(owner, state, &["reward"])?)
    };
    restore_child(owner, "reward", inner, object.and_then(|o| o.get("reward")))
}

/// Runs `restore` on `reward` all or nothing: when it fails, the state `reward` had before is
/// put back, so a state that fits only part of a tree changes none of it.
pub(crate) fn all_or_nothing(
    reward: &dyn RewardFn,
    restore: impl Fn(&Value) -> Result<()>,
    state: &Value,
) -> Result<()> {
    let before = reward.state();
    let result = restore(state);
    if result.is_err()
        && let Some(before) = before
    {
        // The state just taken fits by construction.
        let _ = restore(&before);
    }
    result
}

/// What kind of JSON value `value` is, with an article, for error messages.
pub(crate) fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}
