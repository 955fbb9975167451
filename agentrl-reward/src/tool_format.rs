//! Reward for well-formed tool use read from the messages: calls parse, name known tools, and
//! the episode ends with an answer.

use std::collections::BTreeSet;

use agentrl_core::{Result, RewardBreakdown, RewardFn, Role, Trajectory};
use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::build::{BuildReward, RewardContext, invalid};

/// The mean of three checks, each in `[0, 1]`:
///
/// - the share of assistant tool calls whose arguments are a JSON object (1 with no calls);
/// - the share of tool calls naming a tool in `tools` (1 with no calls; when `tools` is empty,
///   any non-blank name counts as known);
/// - 1 when [`Trajectory::final_answer`] is non-blank, else 0.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ToolFormat {
    /// Names of the tools that exist; empty accepts any non-blank name.
    pub tools: BTreeSet<String>,
}

impl ToolFormat {
    /// Name of the reward's part in breakdowns.
    pub const NAME: &'static str = "tool_format";

    /// A check that accepts exactly the tools named in `tools`.
    pub fn new<I: IntoIterator<Item = S>, S: Into<String>>(tools: I) -> Self {
        ToolFormat {
            tools: tools.into_iter().map(Into::into).collect(),
        }
    }

    /// The format value of `trajectory` (see the type's documentation).
    pub fn value(&self, trajectory: &Trajectory) -> f64 {
        let calls: Vec<_> = trajectory
            .messages
            .iter()
            .filter(|m| m.role == Role::Assistant)
            .flat_map(|m| m.tool_calls.iter())
            .collect();
        let share = |ok: usize| {
            if calls.is_empty() {
                1.0
            } else {
                ok as f64 / calls.len() as f64
            }
        };
        let parsed = calls
            .iter()
            .filter(|c| {
                c.function
                    .parse_arguments()
                    .is_ok_and(|args| args.is_object())
            })
            .count();
        let known = calls
            .iter()
            .filter(|c| {
                let name = c.function.name.trim();
                !name.is_empty() && (self.tools.is_empty() || self.tools.contains(name))
            })
            .count();
        let answered = trajectory
            .final_answer()
            .is_some_and(|answer| !answer.trim().is_empty());
        (share(parsed) + share(known) + if answered { 1.0 } else { 0.0 }) / 3.0
    }
}

/// A `tool_format` reward as written in a config: `{ type = "tool_format", tools =
/// ["calculator"] }`. Names are trimmed and must not be blank.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolFormatConfig {
    /// Names of the tools that exist (empty: any non-blank name).
    #[serde(default)]
    pub tools: Vec<String>,
}

impl BuildReward for ToolFormatConfig {
    fn build_at(&self, path: &str, _: &RewardContext) -> Result<Box<dyn RewardFn>> {
        if let Some(i) = self.tools.iter().position(|t| t.trim().is_empty()) {
            return Err(invalid(format!("{path}.tools[{i}] is a blank tool name")));
        }
        Ok(Box::new(ToolFormat::new(
            self.tools.iter().map(|t| t.trim()),
        )))
    }

    fn part_names(&self) -> Vec<&'static str> {
        vec![ToolFormat::NAME]
    }
}

#[async_trait]
impl RewardFn for ToolFormat {
    fn name(&self) -> &str {
        Self::NAME
    }

    async fn score(&self, trajectory: &Trajectory) -> Result<RewardBreakdown> {
        Ok(RewardBreakdown::single(Self::NAME, self.value(trajectory)))
    }
}
