//! The environment contract: Gymnasium's `reset`/`step` with chat messages as observations.

use std::collections::BTreeMap;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::{Message, Result, ToolSpec};

/// Which part of a task set a task comes from; train and test never share a task.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Split {
    /// Tasks used for training.
    Train,
    /// Held-out tasks used for evaluation only.
    Test,
}

impl std::fmt::Display for Split {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Split::Train => "train",
            Split::Test => "test",
        })
    }
}

/// One task: an id unique within its env, and the env-specific data that defines it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Task {
    /// Env id this task belongs to.
    pub env_id: String,
    /// Unique id of the task within the env (stable across runs).
    pub id: String,
    /// Train or test.
    pub split: Split,
    /// Env-specific definition (e.g. the expression and its answer).
    pub data: serde_json::Value,
}

/// What the agent sees at the start of an episode: the conversation so far and the tools it may call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Observation {
    /// Initial messages (system prompt, task statement).
    pub messages: Vec<Message>,
    /// Tools available in this episode.
    pub tools: Vec<ToolSpec>,
}

/// Facts about one step that the trainer and metrics need.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StepInfo {
    /// Set when the action could not be carried out (malformed call, unknown tool, ...): the reason.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub invalid_action: Option<String>,
    /// Number of tool calls executed in this step.
    #[serde(default)]
    pub tool_calls: u32,
    /// Number of tool calls that returned an error.
    #[serde(default)]
    pub tool_errors: u32,
    /// On the final step: whether the task was solved.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub success: Option<bool>,
    /// On the final step: a graded score in `[0, 1]`, when the env has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub score: Option<f64>,
    /// Free-form env-specific values.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub extra: BTreeMap<String, serde_json::Value>,
}

/// The result of one `step`: new messages for the agent, a reward and whether the episode ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Step {
    /// Messages the env adds to the conversation (tool results, feedback); empty at the end.
    pub messages: Vec<Message>,
    /// Reward for this step.
    pub reward: f64,
    /// The episode reached a terminal state (solved, failed, answered).
    pub terminated: bool,
    /// The episode was cut short (turn limit) without a terminal state.
    pub truncated: bool,
    /// Step facts.
    pub info: StepInfo,
}

impl Step {
    /// Whether the episode is over.
    pub fn done(&self) -> bool {
        self.terminated || self.truncated
    }
}

/// An environment session. One value runs one episode at a time.
///
/// A malformed action is never an `Err`: the env answers it with an error observation and sets
/// [`StepInfo::invalid_action`]. `Err` is for the env itself failing.
#[async_trait]
pub trait Env: Send {
    /// Registry id of the env (e.g. `arith-calc`).
    fn id(&self) -> &str;

    /// Starts an episode on `task`.
    async fn reset(&mut self, task: &Task) -> Result<Observation>;

    /// Applies the assistant's message and returns what happened.
    async fn step(&mut self, action: &Message) -> Result<Step>;
}

#[async_trait]
impl<E: Env + ?Sized> Env for Box<E> {
    fn id(&self) -> &str {
        (**self).id()
    }
    async fn reset(&mut self, task: &Task) -> Result<Observation> {
        (**self).reset(task).await
    }
    async fn step(&mut self, action: &Message) -> Result<Step> {
        (**self).step(action).await
    }
}
