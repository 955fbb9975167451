//! The `maze` session and its `move` tool, which share the agent's position behind a mutex.
//!
//! The tool is a real [`Tool`] in a [`ToolBox`], so schema checks (unknown direction, wrong
//! argument type, non-JSON arguments, unknown tool) give the same error messages and
//! invalid-action flags as every other tool.

use std::sync::{Arc, Mutex};

use agentrl_core::{
    Env, Error, Message, Observation, Result, Step, Task, Tool, ToolContext, ToolError, ToolSpec,
};
use async_trait::async_trait;
use serde_json::json;

use super::MAZE_ID;
use super::grid::{Direction, Grid, Pos};
use super::task::grid_of;
use crate::locking::lock;
use crate::session::{continue_step, final_step, require_tool_calls};
use crate::tool_env::{SessionTools, single_arg_spec};

/// What to do instead of a malformed action.
const HINT: &str = "call the move tool with a direction";

/// The episode state the env and its tool share.
#[derive(Debug, Default)]
struct MazeState {
    /// The maze and the agent's position, while an episode runs.
    maze: Option<(Grid, Pos)>,
}

impl MazeState {
    /// Whether the agent stands on the goal.
    fn at_goal(&self) -> bool {
        self.maze.as_ref().is_some_and(|(g, p)| *p == g.goal)
    }
}

/// The `move` tool: moves the agent one cell, unless a wall is in the way.
#[derive(Debug)]
pub struct MoveTool {
    state: Arc<Mutex<MazeState>>,
}

#[async_trait]
impl Tool for MoveTool {
    fn spec(&self) -> ToolSpec {
        let names: Vec<&str> = Direction::ALL.iter().map(|d| d.name()).collect();
        single_arg_spec(
            "move",
            "Move one cell in a direction.",
            "direction",
            json!({ "type": "string", "enum": names }),
        )
    }

    async fn call(
        &self,
        args: serde_json::Value,
        _ctx: &ToolContext,
    ) -> std::result::Result<String, ToolError> {
        let name = args.get("direction").and_then(|d| d.as_str()).unwrap_or("");
        let direction = Direction::parse(name)
            .ok_or_else(|| ToolError::InvalidArguments(format!("unknown direction {name:?}")))?;
        let mut state = lock(&self.state);
        let Some((grid, pos)) = state.maze.as_mut() else {
            return Err(ToolError::Failed(
                "no maze: the episode has not started".into(),
            ));
        };
        if *pos == grid.goal {
            return Err(ToolError::Failed("already at the goal".into()));
        }
        match grid.step(*pos, direction) {
            Some(next) if next == grid.goal => {
                *pos = next;
                Ok("reached the goal".into())
            }
            Some(next) => {
                *pos = next;
                Ok(format!("moved {}\n{}", direction.name(), grid.render(next)))
            }
            None => Ok(format!(
                "blocked to the {}\n{}",
                direction.name(),
                grid.render(*pos)
            )),
        }
    }
}

/// One `maze` session, without turn limit (the factory adds it).
///
/// The agent sees the grid and moves with the `move` tool; the episode ends with success when
/// it reaches `G`. A message without tool calls is an invalid action.
pub struct MazeEnv {
    state: Arc<Mutex<MazeState>>,
    tools: SessionTools,
}

impl Default for MazeEnv {
    fn default() -> Self {
        Self::new()
    }
}

impl MazeEnv {
    /// A session whose tool box holds the `move` tool; a refused tool is reported by `reset`.
    pub fn new() -> Self {
        let state = Arc::new(Mutex::new(MazeState::default()));
        let move_tool = MoveTool {
            state: Arc::clone(&state),
        };
        let tools = SessionTools::single(MAZE_ID, "move", move_tool);
        MazeEnv { state, tools }
    }
}

#[async_trait]
impl Env for MazeEnv {
    fn id(&self) -> &str {
        MAZE_ID
    }

    async fn reset(&mut self, task: &Task) -> Result<Observation> {
        lock(&self.state).maze = None;
        let tools = self.tools.get()?.specs();
        let grid = grid_of(task)?;
        let text = format!(
            "Reach G with the move tool. A=you, #=wall.\n{}",
            grid.render(grid.start)
        );
        let start = grid.start;
        lock(&self.state).maze = Some((grid, start));
        Ok(Observation {
            messages: vec![Message::user(text)],
            tools,
        })
    }

    async fn step(&mut self, action: &Message) -> Result<Step> {
        if lock(&self.state).maze.is_none() {
            return Err(Error::env(MAZE_ID, "step called outside an episode"));
        }
        if let Some(refused) = require_tool_calls(action, HINT) {
            return Ok(refused);
        }
        let state = Arc::clone(&self.state);
        let (messages, info) = self.tools.run(action, || lock(&state).at_goal()).await?;
        let mut state = lock(&self.state);
        if state.at_goal() {
            state.maze = None;
            return Ok(final_step(messages, true, info));
        }
        Ok(continue_step(messages, info))
    }
}
