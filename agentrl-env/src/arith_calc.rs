//! `arith-calc`: compute a short integer expression such as `347*29+118`, with a calculator
//! tool at hand. Texts are kept short so that a tiny byte-level model can learn the task.

mod env;
mod problem;
mod solvers;

use agentrl_core::{Env, Result, Split, Task};

pub use env::ArithCalcEnv;
pub use problem::{ArithProblem, Expression, Op, split_of};
pub use solvers::{ARITH_DEMONSTRATOR_KNOBS, ArithDemonstrator, ArithExpert};

use crate::demonstrator::{DemonstratorKnobs, KnobDoc};
use crate::factory::{EnvFactory, Solver};
use crate::wrappers::TurnLimit;

/// Registry id of the env.
pub const ARITH_CALC_ID: &str = "arith-calc";

/// Steps allowed per episode.
pub const ARITH_CALC_MAX_TURNS: usize = 4;

/// The `arith-calc` factory; `seed` selects the task set (default `0`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ArithCalc {
    /// Seed of the task generator.
    pub seed: u64,
}

impl ArithCalc {
    /// The factory for the task set of `seed`.
    pub fn new(seed: u64) -> Self {
        ArithCalc { seed }
    }

    /// The problem behind task `index` of `split`.
    pub fn problem(&self, split: Split, index: u64) -> ArithProblem {
        ArithProblem::generate(self.seed, split, index)
    }
}

impl EnvFactory for ArithCalc {
    fn id(&self) -> &str {
        ARITH_CALC_ID
    }

    fn description(&self) -> &str {
        "compute a short integer expression with a calculator tool"
    }

    fn task(&self, split: Split, index: u64) -> Task {
        self.problem(split, index).to_task(split, index)
    }

    fn make(&self) -> Box<dyn Env> {
        Box::new(TurnLimit::new(ArithCalcEnv::new(), ARITH_CALC_MAX_TURNS))
    }

    fn max_turns(&self) -> usize {
        ARITH_CALC_MAX_TURNS
    }

    /// The expert is deterministic, so `seed` is not used.
    fn solver(&self, _seed: u64) -> Box<dyn Solver> {
        Box::new(ArithExpert)
    }

    fn demonstrator_knobs(&self) -> &[KnobDoc] {
        ARITH_DEMONSTRATOR_KNOBS
    }

    /// An [`ArithDemonstrator`] (see [`ArithDemonstrator::from_knobs`]).
    fn demonstrator(&self, knobs: &DemonstratorKnobs, seed: u64) -> Result<Box<dyn Solver>> {
        Ok(Box::new(ArithDemonstrator::from_knobs(seed, knobs)?))
    }
}
