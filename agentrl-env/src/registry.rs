//! The env registry: factories by id, reference solvers, and running a solver through an episode.

use std::sync::Arc;

use agentrl_core::{Env, Error, Message, Result, Split, Task, ToolSpec};
use serde::{Deserialize, Serialize};

use crate::api_booking::{API_BOOKING_ID, ApiBooking};
use crate::arith_calc::{ARITH_CALC_ID, ArithCalc};
use crate::code_fix::{CODE_FIX_ID, CodeFix};
use crate::knowledge_search::{KNOWLEDGE_SEARCH_ID, KnowledgeSearch};
use crate::math_reasoning::{MATH_REASONING_ID, MathReasoning};
use crate::maze::{MAZE_ID, Maze};
use crate::negotiation::{NEGOTIATION_ID, Negotiation};
use crate::os_shell::{OS_SHELL_ID, OsShell};
use crate::spreadsheet_ops::{SPREADSHEET_OPS_ID, SpreadsheetOps};
use crate::sql_analysis::{SQL_ANALYSIS_ID, SqlAnalysis};
use crate::strategy_game::{STRATEGY_GAME_ID, StrategyGame};
use crate::text_adventure::{TEXT_ADVENTURE_ID, TextAdventure};
use crate::web_shop::{WEB_SHOP_ID, WebShop};

/// A scripted agent (reference solver or demonstrator): given the conversation so far, it
/// writes the next assistant message.
pub trait Solver: Send {
    /// The next assistant message for `task` after `history` (initial observation messages,
    /// earlier actions and env replies, in order).
    fn act(&mut self, task: &Task, history: &[Message]) -> Message;
}

/// Everything needed to use one env: its tasks, fresh sessions and its reference solver.
pub trait EnvFactory: Send + Sync {
    /// The env id (e.g. `arith-calc`).
    fn id(&self) -> &str;

    /// One line saying what the env asks of the agent.
    fn description(&self) -> &str {
        match self.id() {
            ARITH_CALC_ID => "compute a short integer expression with a calculator tool",
            _ => "",
        }
    }

    /// Task `index` of `split`; deterministic: the same `(split, index)` gives the same task.
    fn task(&self, split: Split, index: u64) -> Task;

    /// A fresh session, already wrapped in its turn limit.
    fn make(&self) -> Box<dyn Env>;

    /// The most steps an episode may take.
    fn max_turns(&self) -> usize;

    /// Whether [`EnvFactory::solver`] is a real reference solver (false for envs known only
    /// through a remote server, which can be trained on but not demonstrated).
    fn has_solver(&self) -> bool {
        true
    }

    /// The correct reference solver; `seed` drives any randomness it has.
    fn solver(&self, seed: u64) -> Box<dyn Solver>;
}

/// Ids of all registered envs.
pub fn env_ids() -> Vec<&'static str> {
    vec![
        ARITH_CALC_ID,
        MATH_REASONING_ID,
        MAZE_ID,
        TEXT_ADVENTURE_ID,
        SQL_ANALYSIS_ID,
        SPREADSHEET_OPS_ID,
        KNOWLEDGE_SEARCH_ID,
        API_BOOKING_ID,
        WEB_SHOP_ID,
        OS_SHELL_ID,
        CODE_FIX_ID,
        STRATEGY_GAME_ID,
        NEGOTIATION_ID,
    ]
}

/// The factory registered under `id` (with its default settings); an unknown id is an
/// [`Error::Config`] that lists the known ids.
pub fn lookup(id: &str) -> Result<Arc<dyn EnvFactory>> {
    match id {
        ARITH_CALC_ID => Ok(Arc::new(ArithCalc::default())),
        MATH_REASONING_ID => Ok(Arc::new(MathReasoning::default())),
        MAZE_ID => Ok(Arc::new(Maze::default())),
        TEXT_ADVENTURE_ID => Ok(Arc::new(TextAdventure::default())),
        SQL_ANALYSIS_ID => Ok(Arc::new(SqlAnalysis::default())),
        SPREADSHEET_OPS_ID => Ok(Arc::new(SpreadsheetOps::default())),
        KNOWLEDGE_SEARCH_ID => Ok(Arc::new(KnowledgeSearch::default())),
        API_BOOKING_ID => Ok(Arc::new(ApiBooking::default())),
        WEB_SHOP_ID => Ok(Arc::new(WebShop::default())),
        OS_SHELL_ID => Ok(Arc::new(OsShell::default())),
        CODE_FIX_ID => Ok(Arc::new(CodeFix::default())),
        STRATEGY_GAME_ID => Ok(Arc::new(StrategyGame::default())),
        NEGOTIATION_ID => Ok(Arc::new(Negotiation::default())),
        other => Err(Error::Config(format!(
            "unknown env id `{other}`; known env ids: {}",
            env_ids().join(", ")
        ))),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lookup_known_and_unknown() {
        for id in env_ids() {
            assert_eq!(lookup(id).unwrap().id(), id);
        }
        let err = lookup("nope").err().unwrap();
        assert!(matches!(err, Error::Config(_)));
        assert!(err.to_string().contains(ARITH_CALC_ID), "{err}");
    }
}
