//! `strategy-game`: Connect Four (7x6) against a scripted opponent of selectable strength
//! (random, greedy win/block, depth-limited minimax) with a `drop` tool; reward 1 for a win,
//! 0.5 for a draw, 0 for a loss.

mod board;
mod demonstrator;
mod env;
mod search;
mod task;

use agentrl_core::{Env, Message, Result, Split, Task, ToolCall};
use serde_json::json;

pub use board::{Board, COLUMNS, Piece, ROWS};
pub use demonstrator::{STRATEGY_DEMONSTRATOR_KNOBS, StrategyDemonstrator};
pub use env::{DropTool, Outcome, StrategyGameEnv};
pub use search::{Opponent, best_column, scored_moves, winning_column};
pub use task::{Game, game_of, generate, to_task};

use crate::demonstrator::{DemonstratorKnobs, KnobDoc};
use crate::factory::{EnvFactory, Solver};
use crate::wrappers::TurnLimit;

/// Registry id of the env.
pub const STRATEGY_GAME_ID: &str = "strategy-game";

/// Steps allowed per episode (a game needs at most 21 drops of the agent).
pub const STRATEGY_GAME_MAX_TURNS: usize = 30;

/// Search depth of the reference solver.
pub const EXPERT_DEPTH: u8 = 5;

/// The `strategy-game` factory: `seed` selects the task set (default `0`), `opponent` the
/// scripted opponent the tasks name (default [`Opponent::Greedy`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StrategyGame {
    /// Seed of the task generator.
    pub seed: u64,
    /// The opponent of every game.
    pub opponent: Opponent,
}

impl Default for StrategyGame {
    fn default() -> Self {
        StrategyGame::new(0, Opponent::Greedy)
    }
}

impl StrategyGame {
    /// The factory for the task set of `seed` against `opponent`.
    pub fn new(seed: u64, opponent: Opponent) -> Self {
        StrategyGame { seed, opponent }
    }
}

impl EnvFactory for StrategyGame {
    fn id(&self) -> &str {
        STRATEGY_GAME_ID
    }

    fn description(&self) -> &str {
        "win Connect Four against a scripted opponent with a drop tool"
    }

    fn task(&self, split: Split, index: u64) -> Task {
        to_task(
            &generate(self.seed, self.opponent, split, index),
            split,
            index,
        )
    }

    fn make(&self) -> Box<dyn Env> {
        Box::new(TurnLimit::new(
            StrategyGameEnv::new(),
            STRATEGY_GAME_MAX_TURNS,
        ))
    }

    fn max_turns(&self) -> usize {
        STRATEGY_GAME_MAX_TURNS
    }

    /// The expert is deterministic, so `seed` is not used.
    fn solver(&self, _seed: u64) -> Box<dyn Solver> {
        Box::new(StrategyExpert::default())
    }

    fn demonstrator_knobs(&self) -> &[KnobDoc] {
        STRATEGY_DEMONSTRATOR_KNOBS
    }

    /// A [`StrategyDemonstrator`] (see [`StrategyDemonstrator::from_knobs`]).
    fn demonstrator(&self, knobs: &DemonstratorKnobs, seed: u64) -> Result<Box<dyn Solver>> {
        Ok(Box::new(StrategyDemonstrator::from_knobs(seed, knobs)?))
    }
}

/// The reference solver: reads the latest board in the conversation and plays the best
/// column of a negamax search with alpha-beta pruning to `depth` plies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StrategyExpert {
    /// Search depth in plies.
    pub depth: u8,
}

impl Default for StrategyExpert {
    fn default() -> Self {
        StrategyExpert {
            depth: EXPERT_DEPTH,
        }
    }
}

impl Solver for StrategyExpert {
    fn act(&mut self, task: &Task, history: &[Message]) -> Message {
        next_move(task, history, |board, agent| {
            best_column(board, agent, self.depth)
        })
    }
}

/// The move of a scripted player on `task` after `history`: a `drop` call for the column
/// (0-based) that `choose` picks for the agent on the latest board.
fn next_move(
    task: &Task,
    history: &[Message],
    choose: impl FnOnce(&Board, Piece) -> Option<usize>,
) -> Message {
    let game = match game_of(task) {
        Ok(g) => g,
        Err(e) => return Message::assistant(format!("I cannot read this task: {e}")),
    };
    let board = history
        .iter()
        .rev()
        .find_map(|m| Board::parse_last(m.text()))
        .unwrap_or_else(|| game.board());
    match choose(&board, game.agent()) {
        Some(column) => {
            let id = format!("call_{}", history.len());
            let call = ToolCall::new(id, "drop", &json!({ "column": column + 1 }));
            Message::assistant_tool_calls(None, vec![call])
        }
        None => Message::assistant("The board is full."),
    }
}
