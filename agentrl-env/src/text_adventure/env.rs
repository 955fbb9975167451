//! The `text-adventure` session and its `act` tool, which share the world state behind a
//! mutex. Commands may also be sent as plain text messages.

use std::sync::{Arc, Mutex};

use agentrl_core::{
    Env, Error, Message, Observation, Result, Step, Task, Tool, ToolContext, ToolError, ToolSpec,
};
use async_trait::async_trait;
use serde_json::json;

use super::TEXT_ADVENTURE_ID;
use super::command::Command;
use super::task::world_of;
use super::world::{State, World};
use crate::locking::lock;
use crate::session::{continue_step, final_step, invalid_step, wrong_role};
use crate::tool_env::{SessionTools, single_arg_spec};

/// What to do instead of a malformed action.
const HINT: &str = "send a command such as `go north` or `take key`";

/// The episode the env and its tool share.
#[derive(Debug, Default)]
struct Game {
    /// The world and its state, while an episode runs.
    play: Option<(World, State)>,
}

impl Game {
    /// Whether the goal is met.
    fn solved(&self) -> bool {
        self.play.as_ref().is_some_and(|(w, s)| w.solved(s))
    }

    /// Runs `text` as a command: `Ok` with the reply (including in-world refusals, prefixed
    /// `cannot:`), `Err` when it is not a command or no episode runs.
    fn run(&mut self, text: &str) -> std::result::Result<String, String> {
        let command = Command::parse(text)?;
        let (world, state) = self.play.as_mut().ok_or("no episode is running")?;
        let reply = match world.apply(state, &command) {
            Ok(reply) => reply,
            Err(why) => format!("cannot: {why}"),
        };
        Ok(if world.solved(state) {
            format!("{reply}. Goal done!")
        } else {
            reply
        })
    }
}

/// The `act` tool: runs one adventure command.
#[derive(Debug)]
pub struct ActTool {
    game: Arc<Mutex<Game>>,
}

#[async_trait]
impl Tool for ActTool {
    fn spec(&self) -> ToolSpec {
        single_arg_spec(
            "act",
            "Run a command: go DIR, take X, drop X, open X, put X in Y, look, inventory.",
            "command",
            json!({ "type": "string" }),
        )
    }

    async fn call(
        &self,
        args: serde_json::Value,
        _ctx: &ToolContext,
    ) -> std::result::Result<String, ToolError> {
        let text = args.get("command").and_then(|c| c.as_str()).unwrap_or("");
        lock(&self.game)
            .run(text)
            .map_err(ToolError::InvalidArguments)
    }
}

/// One `text-adventure` session, without turn limit (the factory adds it).
///
/// The agent sends commands through the `act` tool or as plain text messages; the episode
/// ends with success once the goal is met. Unparseable commands are invalid actions; commands
/// the world refuses (a locked chest, a missing exit) are ordinary moves with a `cannot:` reply.
pub struct TextAdventureEnv {
    game: Arc<Mutex<Game>>,
    tools: SessionTools,
}

impl Default for TextAdventureEnv {
    fn default() -> Self {
        Self::new()
    }
}

impl TextAdventureEnv {
    /// A session whose tool box holds the `act` tool; a refused tool is reported by `reset`.
    pub fn new() -> Self {
        let game = Arc::new(Mutex::new(Game::default()));
        let act_tool = ActTool {
            game: Arc::clone(&game),
        };
        let tools = SessionTools::single(TEXT_ADVENTURE_ID, "act", act_tool);
        TextAdventureEnv { game, tools }
    }

    /// The step after `messages`: final on success, otherwise the episode goes on.
    fn after(&self, messages: Vec<Message>, info: agentrl_core::StepInfo) -> Step {
        let mut game = lock(&self.game);
        if game.solved() {
            game.play = None;
            final_step(messages, true, info)
        } else {
            continue_step(messages, info)
        }
    }
}

#[async_trait]
impl Env for TextAdventureEnv {
    fn id(&self) -> &str {
        TEXT_ADVENTURE_ID
    }

    async fn reset(&mut self, task: &Task) -> Result<Observation> {
        lock(&self.game).play = None;
        let tools = self.tools.get()?.specs();
        let world = world_of(task)?;
        let state = world.initial();
        let text = format!("Goal: {}.\n{}", world.goal_text(), world.look(&state));
        lock(&self.game).play = Some((world, state));
        Ok(Observation {
            messages: vec![Message::user(text)],
            tools,
        })
    }

    async fn step(&mut self, action: &Message) -> Result<Step> {
        if lock(&self.game).play.is_none() {
            return Err(Error::env(
                TEXT_ADVENTURE_ID,
                "step called outside an episode",
            ));
        }
        if let Some(reason) = wrong_role(action) {
            return Ok(invalid_step(&reason, HINT));
        }
        if action.tool_calls.is_empty() {
            let text = action.text();
            if text.trim().is_empty() {
                return Ok(invalid_step("empty message", HINT));
            }
            let reply = lock(&self.game).run(text);
            return Ok(match reply {
                Ok(reply) => self.after(vec![Message::user(reply)], Default::default()),
                Err(why) => invalid_step(&why, HINT),
            });
        }
        let game = Arc::clone(&self.game);
        let (messages, info) = self.tools.run(action, || lock(&game).solved()).await?;
        Ok(self.after(messages, info))
    }
}
