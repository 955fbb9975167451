//! The imperfect `web-shop` demonstrator: the reference solver, or, as a habit decided once
//! per task, a shopper who settles for the first product it opens.

use agentrl_core::Result;

use super::{WEB_SHOP_ID, next_action};
use crate::demonstrator::{DemonstratorKnobs, KnobDoc};
use crate::one_habit::OneHabitDemonstrator;

/// Knob: probability of buying the first product opened on a task.
const SETTLE_PROB: &str = "settle_prob";

/// The knobs of [`shop_demonstrator`] (name, doc).
pub const SHOP_DEMONSTRATOR_KNOBS: &[KnobDoc] = &[(
    SETTLE_PROB,
    "probability, on a task, of buying the first result it opens (the first whose title and \
     price fit) even when its page does not offer the wanted size or colour, taking the first \
     offered one instead, rather than going back to the results (default 0)",
)];

/// The imperfect demonstrator that `knobs` describe (see [`SHOP_DEMONSTRATOR_KNOBS`]), seeded
/// by `seed`: its mistake is a habit, so that a cloned policy keeps it under greedy decoding
/// and RL has something to unlearn. A missing knob turns the habit off; an unknown knob or a
/// value outside `[0, 1]` is an [`Error::Config`](agentrl_core::Error::Config) naming the knob.
///
/// Once per task (on its first turn) it decides, with probability `settle_prob`, to settle:
/// it searches and opens the first result whose title and price fit like the reference
/// solver, but then buys that product whatever its page offers, in the wanted size and colour
/// where they are offered and otherwise in the first size or colour listed. That purchase
/// misses the instruction whenever the first such result is a look-alike without the wanted
/// options. Otherwise it plays like [`super::ShopExpert`].
pub fn shop_demonstrator(seed: u64, knobs: &DemonstratorKnobs) -> Result<OneHabitDemonstrator> {
    OneHabitDemonstrator::from_knobs(
        WEB_SHOP_ID,
        SHOP_DEMONSTRATOR_KNOBS,
        knobs,
        seed,
        next_action,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::demonstrator::test_support::{
        assert_half_habit_between, assert_knob_error,
        assert_reference_without_knobs_and_repeatable_by, play, success_rates, without_ports,
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
        assert_half_habit_between(
            &factory,
            json!({ SETTLE_PROB: 0.5 }),
            TASKS,
            affected,
            all,
            1.0,
        )
        .await;
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
            assert_knob_error(shop_demonstrator(0, &knobs), "web-shop", knob);
        }
    }
}
