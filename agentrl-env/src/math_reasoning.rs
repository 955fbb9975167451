//! `math-reasoning`: short multi-step word problems with integer answers, no tools; the last
//! number of the agent's message is its answer. With a `path` option it plays a user's task
//! file instead (see [`MATH_REASONING_USER_DATA`]).

mod env;
mod problem;

use std::sync::Arc;

use agentrl_core::{Env, Message, Result, Split, Task};
use serde_json::{Value, json};

pub use env::MathReasoningEnv;
pub use problem::{MathProblem, TEMPLATE_COUNT, split_of};

use crate::dataset::{EnvOptions, UserDataEnv};
use crate::factory::{EnvFactory, Solver};
use crate::wrappers::TurnLimit;

/// Registry id of the env.
pub const MATH_REASONING_ID: &str = "math-reasoning";

/// Steps allowed per episode (one answer, plus room for malformed attempts).
pub const MATH_REASONING_MAX_TURNS: usize = 3;

/// The `math-reasoning` factory; `seed` selects the task set (default `0`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MathReasoning {
    /// Seed of the task generator.
    pub seed: u64,
}

/// How `math-reasoning` plays a user's task file: the dataset options, with the `numeric`
/// checker, no tools and this env's turn limit unless set.
pub const MATH_REASONING_USER_DATA: UserDataEnv = UserDataEnv {
    id: MATH_REASONING_ID,
    required: &[],
    defaults: math_defaults,
};

/// Dataset option defaults of `math-reasoning`.
fn math_defaults() -> Vec<(&'static str, Value)> {
    vec![
        ("checker", json!("numeric")),
        ("max_turns", json!(MATH_REASONING_MAX_TURNS)),
    ]
}

impl MathReasoning {
    /// The factory for the task set of `seed`.
    pub fn new(seed: u64) -> Self {
        MathReasoning { seed }
    }

    /// The factory `options` ask for: a user's task file with `path`, else the generated
    /// tasks of `seed` (see [`MATH_REASONING_USER_DATA`]).
    pub fn from_options(options: &EnvOptions) -> Result<Arc<dyn EnvFactory>> {
        MATH_REASONING_USER_DATA.factory(options, |seed| Arc::new(MathReasoning::new(seed)))
    }
}

impl EnvFactory for MathReasoning {
    fn id(&self) -> &str {
        MATH_REASONING_ID
    }

    fn description(&self) -> &str {
        "multi-step word problems with integer answers, no tools"
    }

    fn task(&self, split: Split, index: u64) -> Task {
        MathProblem::generate(self.seed, split, index).to_task(split, index)
    }

    fn make(&self) -> Box<dyn Env> {
        Box::new(TurnLimit::new(
            MathReasoningEnv::new(),
            MATH_REASONING_MAX_TURNS,
        ))
    }

    fn max_turns(&self) -> usize {
        MATH_REASONING_MAX_TURNS
    }

    /// The expert is deterministic, so `seed` is not used.
    fn solver(&self, _seed: u64) -> Box<dyn Solver> {
        Box::new(MathExpert)
    }
}

/// The reference solver: answers with the worked computation, e.g. `12+3*5-7=20`.
#[derive(Debug, Clone, Copy, Default)]
pub struct MathExpert;

impl Solver for MathExpert {
    fn act(&mut self, task: &Task, _history: &[Message]) -> Message {
        match MathProblem::from_task(task) {
            Ok(p) => Message::assistant(p.work()),
            Err(e) => Message::assistant(format!("I cannot read this task: {e}")),
        }
    }
}
