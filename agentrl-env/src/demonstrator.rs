//! Knobs of imperfect demonstrators ([`crate::EnvFactory::demonstrator`]): the type, and
//! checks an env uses to read its own knobs with errors that name the env and the knob.

use agentrl_core::{Error, Message, Result, Role, Task};

/// Settings of an env's imperfect demonstrator, by knob name (e.g. a config's
/// `[sft.demonstrator]` table). Which knobs exist is up to each env.
pub type DemonstratorKnobs = serde_json::Map<String, serde_json::Value>;

/// A knob an env's demonstrator accepts: its name and a one-line doc.
pub type KnobDoc = (&'static str, &'static str);

/// Fails with an [`Error::Config`] naming `env` and the knob when `knobs` has a knob that is
/// not in `known`.
pub fn reject_unknown_knobs(env: &str, knobs: &DemonstratorKnobs, known: &[KnobDoc]) -> Result<()> {
    let Some(unknown) = knobs
        .keys()
        .find(|name| !known.iter().any(|(k, _)| k == name))
    else {
        return Ok(());
    };
    let accepted = if known.is_empty() {
        "it has no demonstrator knobs".to_string()
    } else {
        let names: Vec<&str> = known.iter().map(|(name, _)| *name).collect();
        format!("its knobs are: {}", names.join(", "))
    };
    Err(Error::Config(format!(
        "env `{env}` has no demonstrator knob `{unknown}` ({accepted})"
    )))
}

/// Knob `name` of `knobs` as a probability in `[0, 1]`, or `default` when it is absent; any
/// other value is an [`Error::Config`] naming `env` and the knob.
pub fn probability_knob(
    env: &str,
    knobs: &DemonstratorKnobs,
    name: &str,
    default: f64,
) -> Result<f64> {
    let Some(value) = knobs.get(name) else {
        return Ok(default);
    };
    match value.as_f64() {
        Some(p) if (0.0..=1.0).contains(&p) => Ok(p),
        _ => Err(Error::Config(format!(
            "demonstrator knob `{name}` of env `{env}` must be a probability in [0, 1], got {value}"
        ))),
    }
}

/// A choice a demonstrator makes once per task, on the task's first turn, and keeps for the
/// rest of it: how its mistakes become habits that a cloned greedy policy reproduces (a mistake
/// drawn afresh at every step would vanish under greedy decoding).
#[derive(Debug, Clone)]
pub struct PerTaskChoice<T> {
    /// The task in progress (by id) and the choice made for it.
    current: Option<(String, T)>,
}

impl<T> Default for PerTaskChoice<T> {
    fn default() -> Self {
        PerTaskChoice { current: None }
    }
}

impl<T: Copy> PerTaskChoice<T> {
    /// The choice for `task`: `decide()` on its first turn (no assistant message in
    /// `history` yet) or when the task changed, the remembered one after.
    pub fn decide(&mut self, task: &Task, history: &[Message], decide: impl FnOnce() -> T) -> T {
        let first_turn = !history.iter().any(|m| m.role == Role::Assistant);
        match &self.current {
            Some((id, choice)) if !first_turn && *id == task.id => *choice,
            _ => {
                let choice = decide();
                self.current = Some((task.id.clone(), choice));
                choice
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn knobs(value: serde_json::Value) -> DemonstratorKnobs {
        value.as_object().unwrap().clone()
    }

    #[test]
    fn unknown_knobs_name_the_env_and_the_knob() {
        let known = [("p", "a probability")];
        assert!(reject_unknown_knobs("e", &knobs(json!({"p": 0.5})), &known).is_ok());
        let err = reject_unknown_knobs("e", &knobs(json!({"q": 1})), &known).unwrap_err();
        assert!(matches!(err, Error::Config(_)));
        let text = err.to_string();
        assert!(
            text.contains("`e`") && text.contains("`q`") && text.contains("p"),
            "{text}"
        );
        let err = reject_unknown_knobs("e", &knobs(json!({"q": 1})), &[]).unwrap_err();
        assert!(err.to_string().contains("no demonstrator knobs"), "{err}");
    }

    #[test]
    fn a_choice_is_made_on_the_first_turn_and_kept() {
        let task = |id: &str| Task {
            env_id: "e".into(),
            id: id.into(),
            split: agentrl_core::Split::Train,
            data: serde_json::Value::Null,
        };
        let start = [Message::user("go")];
        let later = [Message::user("go"), Message::assistant("step")];
        let mut choice = PerTaskChoice::default();
        assert_eq!(choice.decide(&task("a"), &start, || 1), 1);
        assert_eq!(
            choice.decide(&task("a"), &later, || 2),
            1,
            "kept within the task"
        );
        assert_eq!(
            choice.decide(&task("b"), &later, || 3),
            3,
            "a new task decides again"
        );
        assert_eq!(
            choice.decide(&task("b"), &start, || 4),
            4,
            "so does a new episode"
        );
    }

    #[test]
    fn probabilities_are_checked() {
        let k = knobs(json!({"a": 0.25, "b": 1, "c": 1.5, "d": "x", "e": -0.1}));
        assert_eq!(probability_knob("env", &k, "a", 0.0).unwrap(), 0.25);
        assert_eq!(probability_knob("env", &k, "b", 0.0).unwrap(), 1.0);
        assert_eq!(probability_knob("env", &k, "missing", 0.75).unwrap(), 0.75);
        for bad in ["c", "d", "e"] {
            let err = probability_knob("env", &k, bad, 0.0).unwrap_err();
            assert!(matches!(err, Error::Config(_)));
            let text = err.to_string();
            assert!(
                text.contains("`env`") && text.contains(&format!("`{bad}`")),
                "{text}"
            );
        }
    }
}
