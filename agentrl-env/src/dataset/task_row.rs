//! One task of a dataset as it travels in [`Task::data`]: the prompt messages, the reference
//! answer and how it is checked.

use agentrl_core::{Error, Message, Result, Split, Task};
use serde::{Deserialize, Serialize};

use super::checker::CheckerKind;

/// A dataset row made into a task.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskRow {
    /// Stable id: the id column's value, else `line-N` / `row-N`.
    pub id: String,
    /// The prompt as chat messages (a text prompt is one user message).
    pub prompt: Vec<Message>,
    /// The reference answer (after `answer_pattern`).
    pub reference: String,
    /// Which checker decides it.
    pub checker: CheckerKind,
    /// The script of a `python` or `shell` checker.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub script: Option<String>,
}

impl TaskRow {
    /// The task of env `env_id` in `split` holding this row.
    pub fn to_task(&self, env_id: &str, split: Split) -> Task {
        Task {
            env_id: env_id.to_string(),
            id: self.id.clone(),
            split,
            data: serde_json::to_value(self).unwrap_or_default(),
        }
    }

    /// The row inside `task`; an [`Error::Env`] naming `env_id` when it does not hold one.
    pub fn from_task(env_id: &str, task: &Task) -> Result<Self> {
        serde_json::from_value(task.data.clone()).map_err(|e| {
            Error::env(
                env_id,
                format!("task `{}` is not a dataset row: {e}", task.id),
            )
        })
    }

    /// The prompt's text, one message a line (the split hash's key when there is no id).
    pub fn prompt_text(&self) -> String {
        let texts: Vec<&str> = self.prompt.iter().map(Message::text).collect();
        texts.join("\n")
    }
}
