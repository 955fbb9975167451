//! `maze`: walk a small text grid world from `A` to `G` with a `move` tool.

mod demonstrator;
mod env;
mod grid;
mod task;

use agentrl_core::{Env, Message, Result, Role, Split, Task, ToolCall};
use serde_json::json;

pub use demonstrator::{MAZE_DEMONSTRATOR_KNOBS, MazeDemonstrator};
pub use env::{MazeEnv, MoveTool};
pub use grid::{Direction, Grid, MAX_PATH, Pos};
pub use task::{generate, grid_of, split_of};

use crate::demonstrator::{DemonstratorKnobs, KnobDoc};
use crate::factory::{EnvFactory, Solver};
use crate::wrappers::TurnLimit;

/// Registry id of the env.
pub const MAZE_ID: &str = "maze";

/// Steps allowed per episode (generated mazes need at most [`MAX_PATH`] moves).
pub const MAZE_MAX_TURNS: usize = 30;

/// The `maze` factory; `seed` selects the task set (default `0`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Maze {
    /// Seed of the task generator.
    pub seed: u64,
}

impl Maze {
    /// The factory for the task set of `seed`.
    pub fn new(seed: u64) -> Self {
        Maze { seed }
    }
}

impl EnvFactory for Maze {
    fn id(&self) -> &str {
        MAZE_ID
    }

    fn description(&self) -> &str {
        "walk a 5x5..7x7 text grid from A to G with a move tool"
    }

    fn task(&self, split: Split, index: u64) -> Task {
        to_task_of(self.seed, split, index)
    }

    fn make(&self) -> Box<dyn Env> {
        Box::new(TurnLimit::new(MazeEnv::new(), MAZE_MAX_TURNS))
    }

    fn max_turns(&self) -> usize {
        MAZE_MAX_TURNS
    }

    /// The expert is deterministic, so `seed` is not used.
    fn solver(&self, _seed: u64) -> Box<dyn Solver> {
        Box::new(MazeExpert)
    }

    fn demonstrator_knobs(&self) -> &[KnobDoc] {
        MAZE_DEMONSTRATOR_KNOBS
    }

    /// A [`MazeDemonstrator`] (see [`MazeDemonstrator::from_knobs`]).
    fn demonstrator(&self, knobs: &DemonstratorKnobs, seed: u64) -> Result<Box<dyn Solver>> {
        Ok(Box::new(MazeDemonstrator::from_knobs(seed, knobs)?))
    }
}

/// Task `index` of `split` for generator `seed`.
fn to_task_of(seed: u64, split: Split, index: u64) -> Task {
    task::to_task(&generate(seed, split, index), split, index)
}

/// The reference solver: replays its earlier moves to find where it stands, then takes the
/// first move of a shortest path (breadth-first search) to the goal.
#[derive(Debug, Clone, Copy, Default)]
pub struct MazeExpert;

impl Solver for MazeExpert {
    fn act(&mut self, task: &Task, history: &[Message]) -> Message {
        let grid = match grid_of(task) {
            Ok(g) => g,
            Err(e) => return unreadable_task(&e),
        };
        let pos = position_after(&grid, history);
        match grid.shortest_path(pos).and_then(|p| p.first().copied()) {
            Some(direction) => call_move(direction, history),
            None => Message::assistant("I am at the goal."),
        }
    }
}

/// The reply of a solver that cannot read its task.
fn unreadable_task(error: &agentrl_core::Error) -> Message {
    Message::assistant(format!("I cannot read this task: {error}"))
}

/// Where the agent stands after replaying its `move` calls in `history` from the start.
fn position_after(grid: &Grid, history: &[Message]) -> Pos {
    let moves = history
        .iter()
        .filter(|m| m.role == Role::Assistant)
        .flat_map(|m| &m.tool_calls)
        .filter(|c| c.function.name == "move")
        .filter_map(|c| c.function.parse_arguments().ok())
        .filter_map(|a| {
            a.get("direction")
                .and_then(|d| d.as_str())
                .and_then(Direction::parse)
        });
    let mut pos = grid.start;
    for direction in moves {
        pos = grid.step(pos, direction).unwrap_or(pos);
    }
    pos
}

/// The assistant message calling `move` in `direction`, with an id unique in `history`.
fn call_move(direction: Direction, history: &[Message]) -> Message {
    let id = format!("call_{}", history.len());
    let call = ToolCall::new(id, "move", &json!({ "direction": direction.name() }));
    Message::assistant_tool_calls(None, vec![call])
}
