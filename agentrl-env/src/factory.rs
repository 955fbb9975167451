//! The traits every env implements ([`EnvFactory`], [`Solver`]) and [`run_solver_episode`],
//! which plays a solver through one episode. This module knows no env; the lookup table by id
//! is [`crate::registry`].

use agentrl_core::{Env, Error, Message, Result, Split, Task, ToolSpec};
use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::demonstrator::{DemonstratorKnobs, KnobDoc, reject_unknown_knobs};

/// A scripted agent (reference solver or demonstrator): given the conversation so far, it
/// writes the next assistant message.
pub trait Solver: Send {
    /// The next assistant message for `task` after `history` (initial observation messages,
    /// earlier actions and env replies, in order).
    fn act(&mut self, task: &Task, history: &[Message]) -> Message;
}

/// Everything needed to use one env: its tasks, fresh sessions, its reference solver and its
/// imperfect demonstrator.
#[async_trait]
pub trait EnvFactory: Send + Sync {
    /// The env id (e.g. `arith-calc`).
    fn id(&self) -> &str;

    /// One line saying what the env asks of the agent.
    /// Envs should override it; the default is empty.
    fn description(&self) -> &str {
        ""
    }

    /// Task `index` of `split`; deterministic: the same `(split, index)` gives the same task.
    fn task(&self, split: Split, index: u64) -> Task;

    /// A fresh session, already wrapped in its turn limit.
    fn make(&self) -> Box<dyn Env>;

    /// The most steps an episode may take.
    fn max_turns(&self) -> usize;

    /// Checks, before a run plays any episode, that what this env's sessions need from the
    /// machine is there (e.g. a sandbox that starts); an [`Error::Env`] saying what is missing
    /// and how to get it. Nothing by default.
    ///
    /// A run that skipped it would fail every episode (as env errors) instead of stopping once.
    async fn preflight(&self) -> Result<()> {
        Ok(())
    }

    /// Whether [`EnvFactory::solver`] is a real reference solver (false for envs known only
    /// through a remote server, which can be trained on but not demonstrated).
    fn has_solver(&self) -> bool {
        true
    }

    /// The correct reference solver; `seed` drives any randomness it has.
    fn solver(&self, seed: u64) -> Box<dyn Solver>;

    /// The knobs [`EnvFactory::demonstrator`] accepts (name, one-line doc); none by default.
    fn demonstrator_knobs(&self) -> &[KnobDoc] {
        &[]
    }

    /// An imperfect demonstrator for supervised warm starts, tuned by `knobs` (see
    /// [`EnvFactory::demonstrator_knobs`]); `seed` drives its randomness.
    ///
    /// The default has no knobs and is the reference solver ([`EnvFactory::solver`]); a knob
    /// the env does not have is an [`Error::Config`] naming the env and the knob.
    fn demonstrator(&self, knobs: &DemonstratorKnobs, seed: u64) -> Result<Box<dyn Solver>> {
        reject_unknown_knobs(self.id(), knobs, self.demonstrator_knobs())?;
        Ok(self.solver(seed))
    }
}

/// The record of one episode played by a [`Solver`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SolverEpisode {
    /// The full conversation: initial observation messages, then every action and env reply.
    pub messages: Vec<Message>,
    /// The tools offered in the episode.
    pub tools: Vec<ToolSpec>,
    /// Whether the final step reported success.
    pub success: bool,
    /// Number of steps taken.
    pub steps: usize,
    /// Whether the episode was cut short by the turn limit.
    pub truncated: bool,
}

/// Plays one episode of `task` with `solver` on a fresh session from `factory`, until the
/// episode ends.
///
/// Fails when the env fails, or when it does not end within `factory.max_turns()` steps.
pub async fn run_solver_episode(
    factory: &dyn EnvFactory,
    solver: &mut dyn Solver,
    task: &Task,
) -> Result<SolverEpisode> {
    let mut env = factory.make();
    let observation = env.reset(task).await?;
    let mut messages = observation.messages;
    let mut steps = 0;
    loop {
        let action = solver.act(task, &messages);
        messages.push(action.clone());
        let step = env.step(&action).await?;
        steps += 1;
        messages.extend(step.messages.iter().cloned());
        if step.done() {
            return Ok(SolverEpisode {
                messages,
                tools: observation.tools,
                success: step.info.success.unwrap_or(false),
                steps,
                truncated: step.truncated,
            });
        }
        if steps >= factory.max_turns() {
            return Err(Error::env(
                factory.id(),
                format!(
                    "episode of task `{}` did not end within its turn limit of {} steps",
                    task.id,
                    factory.max_turns()
                ),
            ));
        }
    }
}
