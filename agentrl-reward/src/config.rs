//! Reward functions described in configuration files (TOML, JSON, ...), and their validation.

use std::collections::BTreeSet;

use agentrl_core::{Error, Result, RewardFn};
use serde::{Deserialize, Serialize};

use crate::{FormatReward, IncompletePunishment, LengthPenalty, OutcomeReward, WeightedSum};

/// A reward function as written in a config file, tagged by `type`:
///
/// ```toml
/// [reward]
/// type = "weighted_sum"
/// [[reward.terms]]
/// weight = 1.0
/// reward = { type = "outcome" }
/// [[reward.terms]]
/// weight = 0.1
/// reward = { type = "format" }
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum RewardConfig {
    /// [`OutcomeReward`]; `success` defaults to 1.0 and `failure` to 0.0.
    Outcome {
        /// Reward of a solved task.
        #[serde(default = "default_success")]
        success: f64,
        /// Reward of an unsolved task.
        #[serde(default = "default_failure")]
        failure: f64,
    },
    /// [`FormatReward`].
    Format {},
    /// [`IncompletePunishment`]; `penalty` defaults to -0.2 and must be <= 0.
    IncompletePunishment {
        /// Value added to an incomplete episode's reward.
        #[serde(default = "default_penalty")]
        penalty: f64,
    },
    /// [`LengthPenalty`]; `per_token` must be >= 0.
    LengthPenalty {
        /// Generated tokens allowed without penalty.
        max_generated_tokens: usize,
        /// Penalty per token beyond the budget.
        per_token: f64,
    },
    /// [`WeightedSum`] of at least one term; terms must produce distinct parts.
    WeightedSum {
        /// The weighted terms.
        terms: Vec<WeightedTermConfig>,
    },
}

/// One term of a `weighted_sum`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WeightedTermConfig {
    /// Factor applied to the term's total (finite).
    pub weight: f64,
    /// The term.
    pub reward: RewardConfig,
}

fn default_success() -> f64 {
    OutcomeReward::default().success
}

fn default_failure() -> f64 {
    OutcomeReward::default().failure
}

fn default_penalty() -> f64 {
    IncompletePunishment::default().penalty
}

impl RewardConfig {
    /// Checks the values and builds the reward function; errors are [`Error::Config`] naming
    /// the offending field (e.g. `reward.terms[1].weight`).
    pub fn build(&self) -> Result<Box<dyn RewardFn>> {
        self.build_at("reward")
    }

    /// The keys of the parts this reward's breakdown will contain.
    pub fn part_names(&self) -> Vec<&'static str> {
        match self {
            RewardConfig::Outcome { .. } => vec![OutcomeReward::NAME],
            RewardConfig::Format {} => vec![FormatReward::NAME],
            RewardConfig::IncompletePunishment { .. } => vec![IncompletePunishment::NAME],
            RewardConfig::LengthPenalty { .. } => vec![LengthPenalty::NAME],
            RewardConfig::WeightedSum { terms } => {
                terms.iter().flat_map(|t| t.reward.part_names()).collect()
            }
        }
    }

    fn build_at(&self, path: &str) -> Result<Box<dyn RewardFn>> {
        Ok(match *self {
            RewardConfig::Outcome { success, failure } => {
                finite(path, "success", success)?;
                finite(path, "failure", failure)?;
                Box::new(OutcomeReward { success, failure })
            }
            RewardConfig::Format {} => Box::new(FormatReward),
            RewardConfig::IncompletePunishment { penalty } => {
                finite(path, "penalty", penalty)?;
                if penalty > 0.0 {
                    return Err(config(format!(
                        "{path}.penalty must be <= 0 (it is added to the reward), got {penalty}"
                    )));
                }
                Box::new(IncompletePunishment { penalty })
            }
            RewardConfig::LengthPenalty {
                max_generated_tokens,
                per_token,
            } => {
                finite(path, "per_token", per_token)?;
                if per_token < 0.0 {
                    return Err(config(format!(
                        "{path}.per_token must be >= 0, got {per_token}"
                    )));
                }
                Box::new(LengthPenalty {
                    max_generated_tokens,
                    per_token,
                })
            }
            RewardConfig::WeightedSum { ref terms } => build_sum(path, terms)?,
        })
    }
}

/// Builds a weighted sum, checking weights and that no two terms produce the same part.
fn build_sum(path: &str, terms: &[WeightedTermConfig]) -> Result<Box<dyn RewardFn>> {
    if terms.is_empty() {
        return Err(config(format!(
            "{path}.terms must contain at least one term"
        )));
    }
    let mut seen = BTreeSet::new();
    let mut built = Vec::with_capacity(terms.len());
    for (i, term) in terms.iter().enumerate() {
        let at = format!("{path}.terms[{i}]");
        finite(&at, "weight", term.weight)?;
        for part in term.reward.part_names() {
            if !seen.insert(part) {
                return Err(config(format!(
                    "{at}.reward produces the part `{part}` which an earlier term already \
                     produces; each reward may appear once per weighted_sum"
                )));
            }
        }
        built.push((term.weight, term.reward.build_at(&format!("{at}.reward"))?));
    }
    Ok(Box::new(WeightedSum::new(built)))
}

/// Fails unless `value` is finite.
fn finite(path: &str, field: &str, value: f64) -> Result<()> {
    if value.is_finite() {
        Ok(())
    } else {
        Err(config(format!(
            "{path}.{field} must be a finite number, got {value}"
        )))
    }
}

fn config(message: String) -> Error {
    Error::Config(message)
}
