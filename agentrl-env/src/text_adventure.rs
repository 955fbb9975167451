//! `text-adventure`: generated rooms, a key, items and a chest, with goals such as "put the
//! gem in the chest"; commands go through an `act` tool or as plain text.

mod command;
mod demonstrator;
mod env;
mod plan;
mod task;
mod world;

use agentrl_core::{Env, Message, Result, Role, Split, Task, ToolCall};
use serde_json::json;

pub use command::{Command, USAGE};
pub use demonstrator::{ADVENTURE_DEMONSTRATOR_KNOBS, AdventureDemonstrator};
pub use env::{ActTool, TextAdventureEnv};
pub use plan::{MAX_PLAN, plan, random_world};
pub use task::{generate, split_of, world_of};
pub use world::{Goal, Place, Room, State, World};

use crate::demonstrator::{DemonstratorKnobs, KnobDoc};
use crate::factory::{EnvFactory, Solver};
use crate::wrappers::TurnLimit;

/// Registry id of the env.
pub const TEXT_ADVENTURE_ID: &str = "text-adventure";

/// Steps allowed per episode (generated worlds need at most [`MAX_PLAN`] commands).
pub const TEXT_ADVENTURE_MAX_TURNS: usize = 30;

/// The `text-adventure` factory; `seed` selects the task set (default `0`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TextAdventure {
    /// Seed of the task generator.
    pub seed: u64,
}

impl TextAdventure {
    /// The factory for the task set of `seed`.
    pub fn new(seed: u64) -> Self {
        TextAdventure { seed }
    }
}

impl EnvFactory for TextAdventure {
    fn id(&self) -> &str {
        TEXT_ADVENTURE_ID
    }

    fn description(&self) -> &str {
        "rooms, a key, items and a chest; reach a goal with text commands"
    }

    fn task(&self, split: Split, index: u64) -> Task {
        task::to_task(&generate(self.seed, split, index), split, index)
    }

    fn make(&self) -> Box<dyn Env> {
        Box::new(TurnLimit::new(
            TextAdventureEnv::new(),
            TEXT_ADVENTURE_MAX_TURNS,
        ))
    }

    fn max_turns(&self) -> usize {
        TEXT_ADVENTURE_MAX_TURNS
    }

    /// The expert is deterministic, so `seed` is not used.
    fn solver(&self, _seed: u64) -> Box<dyn Solver> {
        Box::new(AdventureExpert)
    }

    fn demonstrator_knobs(&self) -> &[KnobDoc] {
        ADVENTURE_DEMONSTRATOR_KNOBS
    }

    /// An [`AdventureDemonstrator`] (see [`AdventureDemonstrator::from_knobs`]).
    fn demonstrator(&self, knobs: &DemonstratorKnobs, seed: u64) -> Result<Box<dyn Solver>> {
        Ok(Box::new(AdventureDemonstrator::from_knobs(seed, knobs)?))
    }
}

/// The commands the agent sent in `history`, from `act` calls and plain text messages.
fn sent_commands(history: &[Message]) -> Vec<Command> {
    let mut out = Vec::new();
    for m in history.iter().filter(|m| m.role == Role::Assistant) {
        if m.tool_calls.is_empty() {
            out.extend(Command::parse(m.text()).ok());
        }
        for call in m.tool_calls.iter().filter(|c| c.function.name == "act") {
            let args = call.function.parse_arguments().ok();
            let text = args.as_ref().and_then(|a| a.get("command")?.as_str());
            out.extend(text.and_then(|t| Command::parse(t).ok()));
        }
    }
    out
}

/// The reference solver: replays its earlier commands on the world to find the current
/// state, plans a shortest command list to the goal by breadth-first search and sends the
/// first command through the `act` tool.
#[derive(Debug, Clone, Copy, Default)]
pub struct AdventureExpert;

impl Solver for AdventureExpert {
    fn act(&mut self, task: &Task, history: &[Message]) -> Message {
        let world = match world_of(task) {
            Ok(w) => w,
            Err(e) => return unreadable_task(&e),
        };
        let state = state_after(&world, history);
        match plan(&world, &state).and_then(|p| p.into_iter().next()) {
            Some(command) => call_act(&command, history),
            None => Message::assistant("look"),
        }
    }
}

/// The reply of a solver that cannot read its task.
fn unreadable_task(error: &agentrl_core::Error) -> Message {
    Message::assistant(format!("I cannot read this task: {error}"))
}

/// The state of `world` after replaying the commands sent in `history` from the start.
fn state_after(world: &World, history: &[Message]) -> State {
    let mut state = world.initial();
    for command in sent_commands(history) {
        // Refused commands leave the state unchanged, exactly as in the env.
        let _ = world.apply(&mut state, &command);
    }
    state
}

/// The assistant message sending `command` through the `act` tool, with an id unique in
/// `history`.
fn call_act(command: &Command, history: &[Message]) -> Message {
    let id = format!("call_{}", history.len());
    let call = ToolCall::new(id, "act", &json!({ "command": command.text() }));
    Message::assistant_tool_calls(None, vec![call])
}
