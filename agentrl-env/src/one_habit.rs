//! [`OneHabitDemonstrator`]: the imperfect demonstrator of an env whose sloppy agent makes one
//! kind of mistake, built from the env's scripted player and its one knob.

use agentrl_core::{Error, Message, Result, SeededRng, Task};

use crate::demonstrator::{
    DemonstratorKnobs, KnobDoc, PerTaskChoice, probability_knob, reject_unknown_knobs,
};
use crate::factory::Solver;

/// A demonstrator with one habit, for envs whose sloppy agent makes one kind of mistake: on a
/// task's first turn it takes the habit with probability `prob` and keeps it for the task
/// ([`PerTaskChoice`]); every move is `play(task, history, habit)`, the env's scripted player
/// (with `habit` false, its reference solver).
#[derive(Debug, Clone)]
pub struct OneHabitDemonstrator {
    /// Probability of taking the habit on a task.
    pub prob: f64,
    /// Source of its random choices.
    rng: SeededRng,
    /// For the task in progress (by id): whether it follows the habit.
    plan: PerTaskChoice<bool>,
    /// The env's scripted player: the next message on `task` after `history`, with or
    /// without the habit.
    play: fn(&Task, &[Message], bool) -> Message,
}

impl OneHabitDemonstrator {
    /// The demonstrator of `env` whose one knob, `knob_docs[0]`, `knobs` may set (missing: 0,
    /// no habit), seeded by `seed`; an unknown knob or a value outside `[0, 1]` is an
    /// [`Error::Config`] naming the env and the knob.
    pub fn from_knobs(
        env: &str,
        knob_docs: &[KnobDoc],
        knobs: &DemonstratorKnobs,
        seed: u64,
        play: fn(&Task, &[Message], bool) -> Message,
    ) -> Result<Self> {
        reject_unknown_knobs(env, knobs, knob_docs)?;
        let prob = match knob_docs {
            [(name, _)] => probability_knob(env, knobs, name, 0.0)?,
            _ => {
                return Err(Error::Config(format!(
                    "env `{env}` declares {} demonstrator knobs where a one-habit demonstrator \
                     takes one",
                    knob_docs.len()
                )));
            }
        };
        Ok(OneHabitDemonstrator {
            prob,
            rng: SeededRng::new(seed),
            plan: PerTaskChoice::default(),
            play,
        })
    }
}

impl Solver for OneHabitDemonstrator {
    fn act(&mut self, task: &Task, history: &[Message]) -> Message {
        let (rng, prob) = (&mut self.rng, self.prob);
        let habit = self.plan.decide(task, history, || rng.chance(prob));
        (self.play)(task, history, habit)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn knobs(value: serde_json::Value) -> DemonstratorKnobs {
        value.as_object().cloned().unwrap_or_default()
    }

    /// The player of a one-habit demonstrator in these tests: says whether it follows the habit.
    fn say_habit(_task: &Task, _history: &[Message], habit: bool) -> Message {
        Message::assistant(if habit { "habit" } else { "reference" })
    }

    #[test]
    fn a_one_habit_demonstrator_keeps_its_habit_for_a_task_at_the_knobs_rate() {
        let docs = [("p", "a probability")];
        let task = |i: u64| Task {
            env_id: "e".into(),
            id: format!("t{i}"),
            split: agentrl_core::Split::Train,
            data: serde_json::Value::Null,
        };
        let start = [Message::user("go")];
        let mut never =
            OneHabitDemonstrator::from_knobs("e", &docs, &knobs(json!({})), 0, say_habit).unwrap();
        assert!((0..50).all(|i| never.act(&task(i), &start).text() == "reference"));
        let mut some =
            OneHabitDemonstrator::from_knobs("e", &docs, &knobs(json!({"p": 0.5})), 3, say_habit)
                .unwrap();
        let mut habits = 0;
        for i in 0..400 {
            let first = some.act(&task(i), &start).text().to_string();
            let later = [Message::user("go"), Message::assistant(first.clone())];
            for _ in 0..3 {
                assert_eq!(some.act(&task(i), &later).text(), first, "kept on task {i}");
            }
            habits += usize::from(first == "habit");
        }
        assert!((140..260).contains(&habits), "{habits} of 400");
        let err =
            OneHabitDemonstrator::from_knobs("e", &docs, &knobs(json!({"p": 2})), 0, say_habit)
                .unwrap_err();
        assert!(err.to_string().contains("`p`"), "{err}");
        let two = [("p", "a probability"), ("q", "another")];
        let err = OneHabitDemonstrator::from_knobs("e", &two, &knobs(json!({})), 0, say_habit)
            .unwrap_err();
        assert!(
            err.to_string().contains("declares 2 demonstrator knobs"),
            "{err}"
        );
    }
}
