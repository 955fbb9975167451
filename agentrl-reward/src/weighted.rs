//! A weighted sum of reward functions.

use std::collections::btree_map::Entry;

use agentrl_core::{Error, Result, RewardBreakdown, RewardFn, Trajectory};
use async_trait::async_trait;

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
}

impl std::fmt::Debug for WeightedSum {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.terms.iter().map(|(w, r)| (w, r.name())))
            .finish()
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
}
