//! Building reward functions from their config: the [`BuildReward`] trait every reward's
//! config implements, the [`RewardContext`] it may draw backends from, and the value checks
//! that name the offending field by its path (`reward.terms[1].reward.min`).

use std::sync::Arc;

use agentrl_core::{Error, Result, RewardFn};

use crate::judge_backend::JudgeBackend;

/// A reward as written in a config file: checks its values and builds the reward function.
///
/// Every `type` of [`RewardConfig`](crate::RewardConfig) holds one of these; composers hold
/// their inner rewards as any `R: BuildReward` (normally `RewardConfig`).
pub trait BuildReward {
    /// Checks the values and builds the reward; `path` names this reward in errors (e.g.
    /// `reward.terms[1].reward`), which are [`Error::Config`].
    fn build_at(&self, path: &str, context: &RewardContext) -> Result<Box<dyn RewardFn>>;

    /// The keys of the parts the built reward's breakdown will contain.
    fn part_names(&self) -> Vec<&'static str>;

    /// Whether building needs the judge backend of the [`RewardContext`] (an `llm_judge`
    /// anywhere inside).
    fn needs_judge(&self) -> bool {
        false
    }
}

/// What building a reward may need besides the config: the backends of model-based rewards.
#[derive(Clone, Default)]
pub struct RewardContext {
    /// The model behind every `llm_judge` in the tree; `None` makes an `llm_judge` an error.
    pub judge: Option<Arc<dyn JudgeBackend>>,
}

impl RewardContext {
    /// A context whose `llm_judge` rewards ask `backend`.
    pub fn with_judge(backend: Arc<dyn JudgeBackend>) -> Self {
        RewardContext {
            judge: Some(backend),
        }
    }
}

impl std::fmt::Debug for RewardContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RewardContext")
            .field("judge", &self.judge.as_ref().map(|_| "JudgeBackend"))
            .finish()
    }
}

/// A configuration error with `message`.
pub(crate) fn invalid(message: String) -> Error {
    Error::Config(message)
}

/// Fails unless `value` is finite.
pub(crate) fn finite(path: &str, field: &str, value: f64) -> Result<()> {
    if value.is_finite() {
        Ok(())
    } else {
        Err(invalid(format!(
            "{path}.{field} must be a finite number, got {value}"
        )))
    }
}

/// Fails unless `value` is finite and not negative.
pub(crate) fn non_negative(path: &str, field: &str, value: f64) -> Result<()> {
    finite(path, field, value)?;
    if value < 0.0 {
        return Err(invalid(format!("{path}.{field} must be >= 0, got {value}")));
    }
    Ok(())
}

/// Fails when a duration in milliseconds is zero.
pub(crate) fn positive_ms(path: &str, field: &str, value: u64) -> Result<()> {
    if value == 0 {
        return Err(invalid(format!(
            "{path}.{field} must be at least 1 (milliseconds)"
        )));
    }
    Ok(())
}
