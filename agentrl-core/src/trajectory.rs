//! Token-exact records of episodes, and their JSONL form.

use std::collections::BTreeMap;
use std::io::{BufRead, Write};
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::{Error, FinishReason, Message, Result, Split, Task, TokenId};

/// How an episode ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// The env reached a terminal state.
    Completed,
    /// The turn or token limit cut the episode short.
    Truncated,
    /// The episode ended on an action the env could not accept.
    InvalidAction,
    /// The env failed.
    EnvError,
    /// The episode was cancelled.
    Cancelled,
}

/// One policy turn: the tokens injected before it, then the tokens the policy generated.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Turn {
    /// Ids added by the env and chat template since the previous turn's generation
    /// (the whole prompt for the first turn). Never trained on.
    pub injected_ids: Vec<TokenId>,
    /// Ids the policy generated in this turn, exactly as sampled.
    pub generated_ids: Vec<TokenId>,
    /// Sampling log-probability of each generated id.
    pub logprobs: Vec<f32>,
    /// Weights version that generated this turn.
    pub policy_version: u64,
    /// Which policy generated this turn, when several are mixed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy_name: Option<String>,
    /// Why generation ended.
    pub finish: FinishReason,
    /// Env reward of the step this turn caused.
    pub reward: f64,
    /// Set when the env rejected this turn's action.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub invalid_action: Option<String>,
    /// Set by the trainer when this turn is left out of the loss because the weights that made
    /// it lag more versions than `[pipeline] max_staleness` allows (the episode's other turns
    /// still train).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub stale: bool,
}

/// A whole episode, token in / token out.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Trajectory {
    /// Env id.
    pub env_id: String,
    /// Task id within the env.
    pub task_id: String,
    /// Split of the task.
    pub split: Split,
    /// Rollouts of the same task in the same batch share a group id.
    pub group_id: u64,
    /// The conversation as messages (initial observation, actions, env replies).
    pub messages: Vec<Message>,
    /// Policy turns with their exact tokens.
    pub turns: Vec<Turn>,
    /// How it ended.
    pub outcome: Outcome,
    /// Whether the env judged the task solved.
    #[serde(default)]
    pub success: bool,
    /// Graded score from the env, when it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub score: Option<f64>,
    /// Tool calls executed over the episode.
    #[serde(default)]
    pub tool_calls: u32,
    /// Tool calls that returned errors.
    #[serde(default)]
    pub tool_errors: u32,
    /// Reward used for training (set by the reward composer).
    #[serde(default)]
    pub reward: f64,
    /// Named parts of `reward`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub reward_parts: BTreeMap<String, f64>,
}

impl Trajectory {
    /// An episode of `task_id` in `env_id` with nothing recorded yet: no messages, no turns,
    /// outcome [`Outcome::Completed`], unsolved, no tool calls, reward 0. The `with_*` methods
    /// fill in the rest.
    pub fn new(
        env_id: impl Into<String>,
        task_id: impl Into<String>,
        split: Split,
        group_id: u64,
    ) -> Self {
        Trajectory {
            env_id: env_id.into(),
            task_id: task_id.into(),
            split,
            group_id,
            messages: Vec::new(),
            turns: Vec::new(),
            outcome: Outcome::Completed,
            success: false,
            score: None,
            tool_calls: 0,
            tool_errors: 0,
            reward: 0.0,
            reward_parts: BTreeMap::new(),
        }
    }

    /// [`Trajectory::new`] for `task` (its env id, id and split) in group `group_id`.
    pub fn for_task(task: &Task, group_id: u64) -> Self {
        Self::new(task.env_id.clone(), task.id.clone(), task.split, group_id)
    }

    /// Sets the conversation.
    pub fn with_messages(mut self, messages: Vec<Message>) -> Self {
        self.messages = messages;
        self
    }

    /// Sets the policy turns.
    pub fn with_turns(mut self, turns: Vec<Turn>) -> Self {
        self.turns = turns;
        self
    }

    /// Sets how the episode ended.
    pub fn with_outcome(mut self, outcome: Outcome) -> Self {
        self.outcome = outcome;
        self
    }

    /// Sets whether the env judged the task solved.
    pub fn with_success(mut self, success: bool) -> Self {
        self.success = success;
        self
    }

    /// Sets the env's graded score.
    pub fn with_score(mut self, score: Option<f64>) -> Self {
        self.score = score;
        self
    }

    /// Sets the tool calls executed and how many of them returned errors.
    pub fn with_tool_calls(mut self, calls: u32, errors: u32) -> Self {
        self.tool_calls = calls;
        self.tool_errors = errors;
        self
    }

    /// Sets the training reward (its named parts stay as they are).
    pub fn with_reward(mut self, reward: f64) -> Self {
        self.reward = reward;
        self
    }

    /// All token ids of the episode in order: injected and generated, turn by turn.
    pub fn token_ids(&self) -> Vec<TokenId> {
        let mut ids = Vec::with_capacity(self.num_tokens());
        for t in &self.turns {
            ids.extend_from_slice(&t.injected_ids);
            ids.extend_from_slice(&t.generated_ids);
        }
        ids
    }

    /// Total number of tokens.
    pub fn num_tokens(&self) -> usize {
        self.turns
            .iter()
            .map(|t| t.injected_ids.len() + t.generated_ids.len())
            .sum()
    }

    /// Number of policy-generated tokens.
    pub fn num_generated(&self) -> usize {
        self.turns.iter().map(|t| t.generated_ids.len()).sum()
    }

    /// Loss mask aligned with [`Trajectory::token_ids`]: 1 on policy tokens, 0 elsewhere
    /// (injected tokens, and the tokens of turns marked [`Turn::stale`]).
    pub fn loss_mask(&self) -> Vec<f32> {
        let mut mask = Vec::with_capacity(self.num_tokens());
        for t in &self.turns {
            let trained = if t.stale { 0.0 } else { 1.0 };
            mask.extend(std::iter::repeat_n(0.0, t.injected_ids.len()));
            mask.extend(std::iter::repeat_n(trained, t.generated_ids.len()));
        }
        mask
    }

    /// Sampling logprobs aligned with [`Trajectory::token_ids`] (0 on injected tokens).
    pub fn sampling_logprobs(&self) -> Vec<f32> {
        let mut out = Vec::with_capacity(self.num_tokens());
        for t in &self.turns {
            out.extend(std::iter::repeat_n(0.0, t.injected_ids.len()));
            out.extend_from_slice(&t.logprobs);
        }
        out
    }

    /// Oldest policy version that contributed a turn (0 for an empty trajectory).
    pub fn min_policy_version(&self) -> u64 {
        self.turns
            .iter()
            .map(|t| t.policy_version)
            .min()
            .unwrap_or(0)
    }

    /// Number of turns whose action the env rejected.
    pub fn invalid_actions(&self) -> usize {
        self.turns
            .iter()
            .filter(|t| t.invalid_action.is_some())
            .count()
    }

    /// Text of the last assistant message without tool calls (the final answer), if any.
    pub fn final_answer(&self) -> Option<&str> {
        self.messages
            .iter()
            .rev()
            .find(|m| m.role == crate::Role::Assistant)
            .filter(|m| m.tool_calls.is_empty())
            .and_then(|m| m.content.as_deref())
    }
}

/// A line of a JSONL file that could not be read.
#[derive(Debug, Clone, PartialEq)]
pub struct BadLine {
    /// 1-based line number.
    pub line: usize,
    /// What was wrong with it.
    pub message: String,
}

/// Writes trajectories as JSON lines (appends when `append` is true).
pub fn write_jsonl(path: &Path, trajectories: &[Trajectory], append: bool) -> Result<()> {
    let file = std::fs::OpenOptions::new()
        .create(true)
        .write(true)
        .append(append)
        .truncate(!append)
        .open(path)
        .map_err(|e| Error::io("opening", path, e))?;
    let mut out = std::io::BufWriter::new(file);
    for t in trajectories {
        serde_json::to_writer(&mut out, t)
            .map_err(|e| Error::json(format!("trajectory for {}", path.display()), e))?;
        out.write_all(b"\n")
            .map_err(|e| Error::io("writing", path, e))?;
    }
    out.flush().map_err(|e| Error::io("writing", path, e))
}

/// Reads trajectories from a JSONL file; broken lines are reported with their number and skipped.
pub fn read_jsonl(path: &Path) -> Result<(Vec<Trajectory>, Vec<BadLine>)> {
    let file = std::fs::File::open(path).map_err(|e| Error::io("opening", path, e))?;
    read_jsonl_from(std::io::BufReader::new(file), path)
}

/// [`read_jsonl`] over any reader; `path` only names the source in messages.
pub fn read_jsonl_from(
    reader: impl BufRead,
    path: &Path,
) -> Result<(Vec<Trajectory>, Vec<BadLine>)> {
    let mut good = Vec::new();
    let mut bad = Vec::new();
    for (i, line) in reader.lines().enumerate() {
        let line = line.map_err(|e| Error::io("reading", path, e))?;
        if line.trim().is_empty() {
            continue;
        }
        match serde_json::from_str::<Trajectory>(&line) {
            Ok(t) => good.push(t),
            Err(e) => bad.push(BadLine {
                line: i + 1,
                message: format!("{}:{}: {e}", path.display(), i + 1),
            }),
        }
    }
    Ok((good, bad))
}
