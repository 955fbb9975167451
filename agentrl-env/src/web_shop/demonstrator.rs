//! The imperfect `web-shop` demonstrator: the reference solver, or, as a habit decided once
//! per task, a shopper who settles for the first product it opens.

use agentrl_core::{Message, Result, SeededRng, Task};

use super::{WEB_SHOP_ID, next_action};
use crate::demonstrator::{
    DemonstratorKnobs, KnobDoc, PerTaskChoice, probability_knob, reject_unknown_knobs,
};
use crate::factory::Solver;

/// Knob: probability of buying the first product opened on a task.
const SETTLE_PROB: &str = "settle_prob";

/// The knobs of [`ShopDemonstrator::from_knobs`] (name, doc).
pub const SHOP_DEMONSTRATOR_KNOBS: &[KnobDoc] = &[(
    SETTLE_PROB,
    "probability, on a task, of buying the first result it opens (the first whose title and \
     price fit) even when its page does not offer the wanted size or colour, taking the first \
     offered one instead, rather than going back to the results (default 0)",
)];

/// A demonstrator for supervised warm starts whose mistake is a habit, so that a cloned
/// policy keeps it under greedy decoding and RL has something to unlearn.
///
/// Once per task (on its first turn) it decides, with probability `settle_prob`, to settle:
/// it searches and opens the first result whose title and price fit like the reference
/// solver, but then buys that product whatever its page offers, in the wanted size and colour
/// where they are offered and otherwise in the first size or colour listed. That purchase
/// misses the instruction whenever the first such result is a look-alike without the wanted
/// options. Otherwise it plays like [`super::ShopExpert`].
#[derive(Debug, Clone)]
pub struct ShopDemonstrator {
    /// Probability of settling for the first product opened on a task.
    pub settle_prob: f64,
    /// Source of all its random choices.
    pub rng: SeededRng,
    /// For the task in progress (by id): whether it settles.
    plan: PerTaskChoice<bool>,
}

impl ShopDemonstrator {
    /// A demonstrator settling with probability `settle_prob`, seeded by `seed`.
    pub fn new(seed: u64, settle_prob: f64) -> Self {
        ShopDemonstrator {
            settle_prob,
            rng: SeededRng::new(seed),
            plan: PerTaskChoice::default(),
        }
    }

    /// The demonstrator that `knobs` describe (see [`SHOP_DEMONSTRATOR_KNOBS`]), seeded by
    /// `seed`; a missing knob turns its habit off, and an unknown knob or a value outside
    /// `[0, 1]` is an [`Error::Config`](agentrl_core::Error::Config) naming the knob.
    pub fn from_knobs(seed: u64, knobs: &DemonstratorKnobs) -> Result<Self> {
        reject_unknown_knobs(WEB_SHOP_ID, knobs, SHOP_DEMONSTRATOR_KNOBS)?;
        let settle = probability_knob(WEB_SHOP_ID, knobs, SETTLE_PROB, 0.0)?;
        Ok(ShopDemonstrator::new(seed, settle))
    }

    /// Whether to settle on `task`: decided on the first turn, remembered after.
    fn settles(&mut self, task: &Task, history: &[Message]) -> bool {
        self.plan
            .decide(task, history, || self.rng.chance(self.settle_prob))
    }
}

impl Solver for ShopDemonstrator {
    fn act(&mut self, task: &Task, history: &[Message]) -> Message {
        let settle = self.settles(task, history);
        next_action(task, history, settle)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::demonstrator::test_support::{
        assert_knob_error, assert_reference_without_knobs_and_repeatable_by, play, success_rates,
        without_ports,
    };
    use crate::factory::SolverEpisode;
    use crate::transcript::exchanges;
    use crate::web_shop::WebShop;
    use serde_json::json;

    /// Number of train tasks the rates are measured on.
    const TASKS: u64 = 40;

    /// The `browser` actions of `episode` (`open`, `click`, `back`, ...).
    fn actions(episode: &SolverEpisode) -> Vec<String> {
        exchanges(&episode.messages, "browser")
            .into_iter()
            .filter_map(|x| Some(x.args.get("action")?.as_str()?.to_string()))
            .collect()
    }

    #[tokio::test]
    async fn settling_buys_the_first_product_opened() {
        let factory = WebShop::default();
        let reference = play(&factory, json!({}), 2, TASKS).await;
        assert!(reference.iter().all(|e| e.success));
        // The tasks where the reference solver has to go back from a look-alike.
        let backs: Vec<bool> = reference
            .iter()
            .map(|e| actions(e).iter().any(|a| a == "back"))
            .collect();
        let affected = |index: u64| backs[index as usize];
        let share = backs.iter().filter(|&&b| b).count();
        assert!(share >= 12, "too few tasks to tell: {share}/{TASKS}");
        let on = play(&factory, json!({ SETTLE_PROB: 1.0 }), 2, TASKS).await;
        for episode in &on {
            let acts = actions(episode);
            assert!(!acts.contains(&"back".to_string()), "{acts:?}");
            assert_eq!(acts.last().map(String::as_str), Some("submit"), "it buys");
        }
        let (all, hit) = success_rates(&on, affected);
        assert_eq!(hit, 0.0, "the affected tasks all fail");
        let unaffected = (TASKS as usize - share) as f64 / TASKS as f64;
        assert_eq!(all, unaffected, "the others succeed");
        let half = play(&factory, json!({ SETTLE_PROB: 0.5 }), 2, TASKS).await;
        let (half_all, half_hit) = success_rates(&half, affected);
        assert!(
            0.2 < half_hit && half_hit < 0.8,
            "{half_hit} of the affected tasks"
        );
        assert!(all < half_all && half_all < 1.0, "{all} {half_all}");
    }

    #[tokio::test]
    async fn without_knobs_it_is_the_reference_solver_and_seeds_repeat() {
        let knobs = json!({ SETTLE_PROB: 0.5 });
        assert_reference_without_knobs_and_repeatable_by(&WebShop::default(), knobs, without_ports)
            .await;
    }

    #[test]
    fn bad_knobs_name_the_env_and_the_knob() {
        for (knobs, knob) in [
            (json!({ "settle": 0.5 }), "`settle`"),
            (json!({ SETTLE_PROB: -0.5 }), "`settle_prob`"),
            (json!({ SETTLE_PROB: [1] }), "`settle_prob`"),
        ] {
            let knobs = knobs.as_object().cloned().unwrap_or_default();
            assert_knob_error(ShopDemonstrator::from_knobs(0, &knobs), "web-shop", knob);
        }
    }
}
