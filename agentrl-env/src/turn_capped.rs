//! [`TurnCapped`]: any env factory with a lower turn limit, e.g. a multi-turn env made
//! single-turn for a run (`[env] max_turns = 1`).

use std::sync::Arc;

use agentrl_core::{Env, Error, Result, Split, Task};
use async_trait::async_trait;

use crate::demonstrator::{DemonstratorKnobs, KnobDoc};
use crate::factory::{EnvFactory, Solver};
use crate::wrappers::TurnLimit;

/// An env factory whose sessions end after at most `max_turns` steps, on top of the inner
/// factory's own limit (which it cannot raise).
pub struct TurnCapped {
    inner: Arc<dyn EnvFactory>,
    max_turns: usize,
}

impl TurnCapped {
    /// Caps `inner` at `max_turns` steps per episode. An error when `max_turns` is 0 or above
    /// the env's own limit (the env's sessions would still end at theirs).
    pub fn new(inner: Arc<dyn EnvFactory>, max_turns: usize) -> Result<Self> {
        if max_turns == 0 {
            return Err(Error::Config(format!(
                "env `{}`: max_turns must be at least 1",
                inner.id()
            )));
        }
        if max_turns > inner.max_turns() {
            return Err(Error::Config(format!(
                "env `{}` allows at most {} turns; max_turns = {max_turns} cannot raise it",
                inner.id(),
                inner.max_turns()
            )));
        }
        Ok(TurnCapped { inner, max_turns })
    }
}

#[async_trait]
impl EnvFactory for TurnCapped {
    fn id(&self) -> &str {
        self.inner.id()
    }

    fn description(&self) -> &str {
        self.inner.description()
    }

    fn task(&self, split: Split, index: u64) -> Task {
        self.inner.task(split, index)
    }

    fn make(&self) -> Box<dyn Env> {
        Box::new(TurnLimit::new(self.inner.make(), self.max_turns))
    }

    fn max_turns(&self) -> usize {
        self.max_turns
    }

    async fn preflight(&self) -> Result<()> {
        self.inner.preflight().await
    }

    fn has_solver(&self) -> bool {
        self.inner.has_solver()
    }

    fn solver(&self, seed: u64) -> Box<dyn Solver> {
        self.inner.solver(seed)
    }

    fn demonstrator_knobs(&self) -> &[KnobDoc] {
        self.inner.demonstrator_knobs()
    }

    fn demonstrator(&self, knobs: &DemonstratorKnobs, seed: u64) -> Result<Box<dyn Solver>> {
        self.inner.demonstrator(knobs, seed)
    }
}
