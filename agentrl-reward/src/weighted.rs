//! A weighted sum of reward functions.

use std::collections::BTreeSet;
use std::collections::btree_map::Entry;

use agentrl_core::{Error, Result, RewardBreakdown, RewardFn, Trajectory};
use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::build::{BuildReward, RewardContext, finite, invalid};
use crate::state::{self, error, json_kind};

/// `total = Σ weight · term.total`; `parts` holds every term's (unweighted) parts under their
/// own keys, and scoring fails when two terms produce the same key.
pub struct WeightedSum {
    /// `(weight, reward function)` pairs, scored in order.
    pub terms: Vec<(f64, Box<dyn RewardFn>)>,
}

impl WeightedSum {
    /// Name of the composer (used in errors).
    pub const NAME: &'static str = "weighted_sum";

    /// A sum of `terms`.
    pub fn new(terms: Vec<(f64, Box<dyn RewardFn>)>) -> Self {
        WeightedSum { terms }
    }

    /// Builder: adds `reward` with `weight`.
    pub fn term(mut self, weight: f64, reward: impl RewardFn + 'static) -> Self {
        self.terms.push((weight, Box::new(reward)));
        self
    }

    /// Restores every term from `state` (see [`RewardFn::restore_state`]), not all or nothing.
    fn restore_terms(&self, state: &Value) -> Result<()> {
        let term = |i: usize| format!("term {i}");
        if state.is_null() {
            for (i, (_, reward)) in self.terms.iter().enumerate() {
                state::restore_child(Self::NAME, &term(i), reward.as_ref(), None)?;
            }
            return Ok(());
        }
        let object = state::expect_object(Self::NAME, state, &["terms"])?;
        let states = match object.get("terms") {
            Some(Value::Array(states)) if states.len() == self.terms.len() => states,
            other => {
                let got = match other {
                    Some(Value::Array(states)) => format!("{} states", states.len()),
                    Some(value) => json_kind(value).to_string(),
                    None => "nothing".to_string(),
                };
                return Err(error(
                    Self::NAME,
                    format!(
                        "terms must be an array of {} states, one per term, got {got}",
                        self.terms.len()
                    ),
                ));
            }
        };
        for (i, ((_, reward), state)) in self.terms.iter().zip(states).enumerate() {
            state::restore_child(Self::NAME, &term(i), reward.as_ref(), Some(state))?;
        }
        Ok(())
    }
}

impl std::fmt::Debug for WeightedSum {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.terms.iter().map(|(w, r)| (w, r.name())))
            .finish()
    }
}

/// A `weighted_sum` as written in a config: at least one term, whose rewards (any
/// `R: BuildReward`, normally [`RewardConfig`](crate::RewardConfig)) produce distinct parts.
///
/// ```toml
/// [reward]
/// type = "weighted_sum"
/// [[reward.terms]]
/// weight = 1.0
/// reward = { type = "outcome" }
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WeightedSumConfig<R> {
    /// The weighted terms.
    pub terms: Vec<WeightedTermConfig<R>>,
}

/// One term of a `weighted_sum`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WeightedTermConfig<R> {
    /// Factor applied to the term's total (finite).
    pub weight: f64,
    /// The term.
    pub reward: R,
}

impl<R: BuildReward> BuildReward for WeightedSumConfig<R> {
    /// Checks the weights and that no two terms produce the same part, then builds the terms.
    fn build_at(&self, path: &str, context: &RewardContext) -> Result<Box<dyn RewardFn>> {
        if self.terms.is_empty() {
            return Err(invalid(format!(
                "{path}.terms must contain at least one term"
            )));
        }
        let mut seen = BTreeSet::new();
        let mut built = Vec::with_capacity(self.terms.len());
        for (i, term) in self.terms.iter().enumerate() {
            let at = format!("{path}.terms[{i}]");
            finite(&at, "weight", term.weight)?;
            for part in term.reward.part_names() {
                if !seen.insert(part) {
                    return Err(invalid(format!(
                        "{at}.reward produces the part `{part}` which an earlier term already \
                         produces; each reward may appear once per weighted_sum"
                    )));
                }
            }
            built.push((
                term.weight,
                term.reward.build_at(&format!("{at}.reward"), context)?,
            ));
        }
        Ok(Box::new(WeightedSum::new(built)))
    }

    fn part_names(&self) -> Vec<&'static str> {
        self.terms
            .iter()
            .flat_map(|t| t.reward.part_names())
            .collect()
    }

    fn needs_judge(&self) -> bool {
        self.terms.iter().any(|t| t.reward.needs_judge())
    }
}

#[async_trait]
impl RewardFn for WeightedSum {
    fn name(&self) -> &str {
        Self::NAME
    }

    async fn score(&self, trajectory: &Trajectory) -> Result<RewardBreakdown> {
        let mut out = RewardBreakdown::default();
        for (weight, term) in &self.terms {
            let scored = term.score(trajectory).await?;
            out.total += weight * scored.total;
            for (key, value) in scored.parts {
                match out.parts.entry(key) {
                    Entry::Vacant(slot) => {
                        slot.insert(value);
                    }
                    Entry::Occupied(slot) => {
                        return Err(Error::Reward {
                            name: Self::NAME.to_string(),
                            message: format!(
                                "part `{}` is produced by more than one term (second: `{}`)",
                                slot.key(),
                                term.name()
                            ),
                        });
                    }
                }
            }
        }
        Ok(out)
    }

    /// `{"type": "weighted_sum", "terms": [...]}` with each term's state (`null` for a
    /// stateless one); `None` when no term has state.
    fn state(&self) -> Option<Value> {
        let terms: Vec<Option<Value>> = self.terms.iter().map(|(_, r)| r.state()).collect();
        if terms.iter().all(Option::is_none) {
            return None;
        }
        let terms = terms
            .into_iter()
            .map(|s| s.unwrap_or(Value::Null))
            .collect();
        Some(state::tagged(
            Self::NAME,
            vec![("terms", Value::Array(terms))],
        ))
    }

    /// Restores each term from its entry of `terms`, all or nothing.
    fn restore_state(&self, state: &Value) -> Result<()> {
        state::all_or_nothing(self, |s| self.restore_terms(s), state)
    }
}
