//! The imperfect `negotiation` demonstrator: the reference solver, or, as a habit decided
//! once per negotiation, a pushover who takes the partner's first offer.

use agentrl_core::Result;

use super::{NEGOTIATION_ID, next_move};
use crate::demonstrator::{DemonstratorKnobs, KnobDoc};
use crate::one_habit::OneHabitDemonstrator;

/// Knob: probability of accepting the partner's first offer on a negotiation.
const ACCEPT_FIRST_OFFER_PROB: &str = "accept_first_offer_prob";

/// The knobs of [`negotiation_demonstrator`] (name, doc).
pub const NEGOTIATION_DEMONSTRATOR_KNOBS: &[KnobDoc] = &[(
    ACCEPT_FIRST_OFFER_PROB,
    "probability, on a negotiation, of accepting the partner's first offer as soon as one \
     stands, whatever it is worth (until then it proposes like the reference solver) \
     (default 0)",
)];

/// The imperfect demonstrator that `knobs` describe (see [`NEGOTIATION_DEMONSTRATOR_KNOBS`]),
/// seeded by `seed`: its mistake is a habit, so that a cloned policy keeps it under greedy
/// decoding and RL has something to unlearn. A missing knob turns the habit off; an unknown
/// knob or a value outside `[0, 1]` is an [`Error::Config`](agentrl_core::Error::Config) naming
/// the knob.
///
/// Once per negotiation (on its first turn) it decides, with probability
/// `accept_first_offer_prob`, to be a pushover: it accepts the first offer the partner makes,
/// without weighing it against its own values. The scripted partner opens high, so that deal
/// is often worth less than half to it. Otherwise, and before any offer stands, it plays like
/// [`super::NegotiationExpert`].
pub fn negotiation_demonstrator(
    seed: u64,
    knobs: &DemonstratorKnobs,
) -> Result<OneHabitDemonstrator> {
    OneHabitDemonstrator::from_knobs(
        NEGOTIATION_ID,
        NEGOTIATION_DEMONSTRATOR_KNOBS,
        knobs,
        seed,
        next_move,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::demonstrator::test_support::{
        assert_half_habit_between, assert_knob_error,
        assert_reference_without_knobs_and_repeatable, play, success_rates,
    };
    use crate::factory::SolverEpisode;
    use crate::negotiation::Negotiation;
    use agentrl_core::Role;
    use serde_json::json;

    /// Number of train negotiations the rates are measured on.
    const TASKS: u64 = 60;

    /// The tools the agent (alice) called in `episode`, in order.
    fn agent_calls(episode: &SolverEpisode) -> Vec<String> {
        episode
            .messages
            .iter()
            .filter(|m| m.role == Role::Assistant)
            .flat_map(|m| m.tool_calls.iter().map(|c| c.function.name.clone()))
            .collect()
    }

    /// How many proposals the partner (bob) made in `episode`.
    fn partner_offers(episode: &SolverEpisode) -> usize {
        episode
            .messages
            .iter()
            .filter(|m| m.role != Role::Assistant)
            .map(|m| m.text().matches("bob proposes").count())
            .sum()
    }

    #[tokio::test]
    async fn a_pushover_takes_the_first_offer_and_loses_for_it() {
        let factory = Negotiation::default();
        let reference = play(&factory, json!({}), 2, TASKS).await;
        let on = play(&factory, json!({ ACCEPT_FIRST_OFFER_PROB: 1.0 }), 2, TASKS).await;
        for (index, episode) in on.iter().enumerate() {
            let calls = agent_calls(episode);
            if partner_offers(episode) > 0 {
                assert_eq!(partner_offers(episode), 1, "task {index}");
                assert_eq!(calls.last().map(String::as_str), Some("accept"));
            }
            let accepts = calls.iter().filter(|c| *c == "accept").count();
            assert!(accepts <= 1, "task {index}: {calls:?}");
        }
        // The negotiations the reference wins and the first offer loses.
        let lost: Vec<bool> = reference
            .iter()
            .zip(&on)
            .map(|(r, o)| r.success && !o.success)
            .collect();
        let affected = |index: u64| lost[index as usize];
        let share = lost.iter().filter(|&&l| l).count();
        assert!(share >= 10, "too few negotiations to tell: {share}/{TASKS}");
        let (expert, _) = success_rates(&reference, affected);
        let (all, _) = success_rates(&on, affected);
        assert!(all + 0.15 < expert, "{all} vs {expert}");
        assert_half_habit_between(
            &factory,
            json!({ ACCEPT_FIRST_OFFER_PROB: 0.5 }),
            TASKS,
            affected,
            all,
            expert,
        )
        .await;
    }

    #[tokio::test]
    async fn without_knobs_it_is_the_reference_solver_and_seeds_repeat() {
        let knobs = json!({ ACCEPT_FIRST_OFFER_PROB: 0.5 });
        assert_reference_without_knobs_and_repeatable(&Negotiation::default(), knobs).await;
    }

    #[test]
    fn bad_knobs_name_the_env_and_the_knob() {
        for (knobs, knob) in [
            (json!({ "accept_prob": 0.5 }), "`accept_prob`"),
            (
                json!({ ACCEPT_FIRST_OFFER_PROB: 1.1 }),
                "`accept_first_offer_prob`",
            ),
        ] {
            let knobs = knobs.as_object().cloned().unwrap_or_default();
            assert_knob_error(negotiation_demonstrator(0, &knobs), "negotiation", knob);
        }
    }
}
