//! The `strategy-game` session and its `drop` tool, which share the game behind a mutex: each
//! drop is answered by the scripted opponent's move; a full column is an invalid action.

use std::sync::{Arc, Mutex};

use agentrl_core::{
    Env, Error, Message, Observation, Result, SeededRng, Step, Task, Tool, ToolContext, ToolError,
    ToolSpec,
};
use async_trait::async_trait;
use serde_json::json;

use super::STRATEGY_GAME_ID;
use super::board::{Board, Piece};
use super::search::Opponent;
use super::task::game_of;
use crate::locking::lock;
use crate::session::{continue_step, require_tool_calls};
use crate::tool_env::{SessionTools, single_arg_spec};

/// What to do instead of a malformed action.
const HINT: &str = "call the drop tool with a column from 1 to 7";

/// How a game ended, for the agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The agent made four in a row.
    Win,
    /// The board filled up.
    Draw,
    /// The opponent made four in a row.
    Loss,
}

impl Outcome {
    /// Reward: 1 win, 0.5 draw, 0 loss.
    pub fn reward(self) -> f64 {
        match self {
            Outcome::Win => 1.0,
            Outcome::Draw => 0.5,
            Outcome::Loss => 0.0,
        }
    }

    /// `win`, `draw` or `loss`.
    pub fn name(self) -> &'static str {
        match self {
            Outcome::Win => "win",
            Outcome::Draw => "draw",
            Outcome::Loss => "loss",
        }
    }
}

/// A game in progress.
#[derive(Debug)]
struct Play {
    board: Board,
    agent: Piece,
    opponent: Opponent,
    opponent_seed: u64,
    outcome: Option<Outcome>,
}

impl Play {
    /// The agent drops into `column` (0-based), then the opponent answers; the report.
    fn agent_drop(&mut self, column: usize) -> std::result::Result<String, ToolError> {
        if self.outcome.is_some() {
            return Err(ToolError::Failed("the game is over".into()));
        }
        let Some(row) = self.board.drop_piece(column, self.agent) else {
            return Err(ToolError::InvalidArguments(format!(
                "column {} is full; free columns: {}",
                column + 1,
                columns_text(&self.board)
            )));
        };
        let mine = format!("You dropped in column {}.", column + 1);
        if self.board.wins_at(row, column) {
            return Ok(self.finish(Outcome::Win, mine));
        }
        if self.board.full() {
            return Ok(self.finish(Outcome::Draw, mine));
        }
        let mut rng = SeededRng::from_parts(&[self.opponent_seed, self.board.pieces() as u64]);
        let piece = self.agent.other();
        let reply = self.opponent.choose(&self.board, piece, &mut rng);
        let text = format!("{mine} Opponent dropped in column {}.", reply + 1);
        match self.board.drop_piece(reply, piece) {
            Some(r) if self.board.wins_at(r, reply) => Ok(self.finish(Outcome::Loss, text)),
            Some(_) if self.board.full() => Ok(self.finish(Outcome::Draw, text)),
            _ => Ok(format!("{text}\n{}", self.board.render())),
        }
    }

    /// Ends the game with `outcome` and says so after `text`.
    fn finish(&mut self, outcome: Outcome, text: String) -> String {
        self.outcome = Some(outcome);
        let verdict = match outcome {
            Outcome::Win => "You win!",
            Outcome::Draw => "The board is full: a draw.",
            Outcome::Loss => "The opponent wins.",
        };
        format!("{text} {verdict}\n{}", self.board.render())
    }
}

/// The free columns (1-based) as text.
fn columns_text(board: &Board) -> String {
    let free: Vec<String> = board
        .legal_columns()
        .iter()
        .map(|c| (c + 1).to_string())
        .collect();
    free.join(", ")
}

/// The `drop` tool: drops the agent's piece into a column, then the opponent replies.
#[derive(Debug)]
pub struct DropTool {
    play: Arc<Mutex<Option<Play>>>,
}

#[async_trait]
impl Tool for DropTool {
    fn spec(&self) -> ToolSpec {
        single_arg_spec(
            "drop",
            "Drop your piece into a column (1 = leftmost, 7 = rightmost); the opponent replies.",
            "column",
            json!({ "type": "integer", "minimum": 1, "maximum": 7 }),
        )
    }

    async fn call(
        &self,
        args: serde_json::Value,
        _ctx: &ToolContext,
    ) -> std::result::Result<String, ToolError> {
        let column = args
            .get("column")
            .and_then(|c| c.as_u64())
            .filter(|c| (1..=7).contains(c));
        let column = column.ok_or_else(|| {
            ToolError::InvalidArguments("`column` must be an integer from 1 to 7".into())
        })?;
        let mut play = lock(&self.play);
        let play = play
            .as_mut()
            .ok_or_else(|| ToolError::Failed("no game: the episode has not started".into()))?;
        play.agent_drop(column as usize - 1)
    }
}

/// One `strategy-game` session, without turn limit (the factory adds it).
pub struct StrategyGameEnv {
    play: Arc<Mutex<Option<Play>>>,
    tools: SessionTools,
}

impl Default for StrategyGameEnv {
    fn default() -> Self {
        Self::new()
    }
}

impl StrategyGameEnv {
    /// A session whose tool box holds the `drop` tool.
    pub fn new() -> Self {
        let play = Arc::new(Mutex::new(None));
        let drop_tool = DropTool {
            play: Arc::clone(&play),
        };
        let tools = SessionTools::single(STRATEGY_GAME_ID, "drop", drop_tool);
        StrategyGameEnv { play, tools }
    }
}

#[async_trait]
impl Env for StrategyGameEnv {
    fn id(&self) -> &str {
        STRATEGY_GAME_ID
    }

    async fn reset(&mut self, task: &Task) -> Result<Observation> {
        *lock(&self.play) = None;
        let tools = self.tools.get()?.specs();
        let game = game_of(task)?;
        *lock(&self.play) = Some(Play {
            board: game.board(),
            agent: game.agent(),
            opponent: game.opponent,
            opponent_seed: game.opponent_seed,
            outcome: None,
        });
        Ok(Observation {
            messages: vec![Message::user(game.prompt())],
            tools,
        })
    }

    async fn step(&mut self, action: &Message) -> Result<Step> {
        if lock(&self.play).is_none() {
            return Err(Error::env(
                STRATEGY_GAME_ID,
                "step called outside an episode",
            ));
        }
        if let Some(refused) = require_tool_calls(action, HINT) {
            return Ok(refused);
        }
        let play = Arc::clone(&self.play);
        let over = || lock(&play).as_ref().is_some_and(|p| p.outcome.is_some());
        let (messages, mut info) = self.tools.run(action, over).await?;
        let mut guard = lock(&self.play);
        let Some(outcome) = guard.as_ref().and_then(|p| p.outcome) else {
            return Ok(continue_step(messages, info));
        };
        *guard = None;
        info.success = Some(outcome == Outcome::Win);
        info.score = Some(outcome.reward());
        info.extra.insert("outcome".into(), json!(outcome.name()));
        Ok(Step {
            messages,
            reward: outcome.reward(),
            terminated: true,
            truncated: false,
            info,
        })
    }
}
