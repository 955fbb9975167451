//! The imperfect `api-booking` demonstrator: the reference solver with two habits, each decided
//! once per task: booking the first fitting free room instead of the cheapest, and reporting
//! the booking confirmed without confirming it.

use agentrl_core::{Message, Result, SeededRng, Task};

use super::{API_BOOKING_ID, Habits, next_action};
use crate::demonstrator::{
    DemonstratorKnobs, KnobDoc, PerTaskChoice, probability_knob, reject_unknown_knobs,
};
use crate::factory::Solver;

/// Knob: probability of booking the first fitting free room of the listing on a task.
const FIRST_FIT_PROB: &str = "first_fit_prob";
/// Knob: probability of replying that the booking is confirmed without confirming it.
const SKIP_CONFIRM_PROB: &str = "skip_confirm_prob";

/// The knobs of [`BookingDemonstrator::from_knobs`] (name, doc).
pub const API_BOOKING_DEMONSTRATOR_KNOBS: &[KnobDoc] = &[
    (
        FIRST_FIT_PROB,
        "probability, on a task, of booking the first room of the `/rooms` listing that fits \
         and is free instead of the cheapest such room (default 0)",
    ),
    (
        SKIP_CONFIRM_PROB,
        "probability, on a task, of replying `Booking ID is confirmed.` right after the booking \
         is made, without the confirm call, so the booking stays held (default 0)",
    ),
];

/// A demonstrator for supervised warm starts whose mistakes are habits, so that a cloned
/// policy keeps them under greedy decoding and RL has something to unlearn.
///
/// Once per task (on its first turn) it decides whether to follow each habit. With
/// `first_fit_prob` it books the first room of the listing that seats everyone, has the
/// feature and is free, which fails whenever a cheaper one also does. With
/// `skip_confirm_prob` it replies that the booking is confirmed as soon as it holds it, never
/// calling `/confirm`, which always fails. Otherwise it plays like [`super::BookingExpert`].
#[derive(Debug, Clone)]
pub struct BookingDemonstrator {
    /// Probability of booking the first fitting free room on a task.
    pub first_fit_prob: f64,
    /// Probability of skipping the confirm call on a task.
    pub skip_confirm_prob: f64,
    /// Source of all its random choices.
    pub rng: SeededRng,
    /// For the task in progress (by id): the habits it follows.
    plan: PerTaskChoice<Habits>,
}

impl BookingDemonstrator {
    /// A demonstrator with the given habit probabilities, seeded by `seed`.
    pub fn new(seed: u64, first_fit_prob: f64, skip_confirm_prob: f64) -> Self {
        BookingDemonstrator {
            first_fit_prob,
            skip_confirm_prob,
            rng: SeededRng::new(seed),
            plan: PerTaskChoice::default(),
        }
    }

    /// The demonstrator that `knobs` describe (see [`API_BOOKING_DEMONSTRATOR_KNOBS`]),
    /// seeded by `seed`; a missing knob turns its habit off, and an unknown knob or a value
    /// outside `[0, 1]` is an [`Error::Config`](agentrl_core::Error::Config) naming the knob.
    pub fn from_knobs(seed: u64, knobs: &DemonstratorKnobs) -> Result<Self> {
        reject_unknown_knobs(API_BOOKING_ID, knobs, API_BOOKING_DEMONSTRATOR_KNOBS)?;
        let knob = |name| probability_knob(API_BOOKING_ID, knobs, name, 0.0);
        Ok(BookingDemonstrator::new(
            seed,
            knob(FIRST_FIT_PROB)?,
            knob(SKIP_CONFIRM_PROB)?,
        ))
    }

    /// The habits to follow on `task`: decided on the first turn, remembered after.
    fn habits(&mut self, task: &Task, history: &[Message]) -> Habits {
        self.plan.decide(task, history, || {
            let first_fit = self.rng.chance(self.first_fit_prob);
            let skip_confirm = self.rng.chance(self.skip_confirm_prob);
            Habits {
                first_fit,
                skip_confirm,
            }
        })
    }
}

impl Solver for BookingDemonstrator {
    fn act(&mut self, task: &Task, history: &[Message]) -> Message {
        let habits = self.habits(task, history);
        next_action(task, history, habits)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api_booking::{ApiBooking, World, generate};
    use crate::demonstrator::test_support::{
        assert_half_habit_between, assert_knob_error,
        assert_reference_without_knobs_and_repeatable_by, play, success_rates, without_ports,
    };
    use crate::factory::SolverEpisode;
    use crate::transcript::exchanges;
    use agentrl_core::Split;
    use serde_json::{Value, json};

    /// Number of train tasks the rates are measured on.
    const TASKS: u64 = 60;

    /// The world of train task `index` of the default factory.
    fn world(index: u64) -> World {
        generate(ApiBooking::default().seed, Split::Train, index)
    }

    /// Whether the first fitting free room of the listing is not the cheapest one.
    fn first_fit_is_wrong(world: &World) -> bool {
        let r = &world.request;
        let first = world.rooms.iter().find(|room| {
            room.capacity >= r.people
                && room.features.contains(&r.feature)
                && !world.is_taken(&room.id, &r.day, r.hour)
        });
        first.map(|room| &room.id) != world.answer().map(|room| &room.id)
    }

    /// The `http` calls of `episode` as (method, url, body).
    fn calls(episode: &SolverEpisode) -> Vec<(String, String, Value)> {
        exchanges(&episode.messages, "http")
            .into_iter()
            .map(|x| {
                let text = |key: &str| x.args.get(key).and_then(Value::as_str).unwrap_or("");
                let body = x.args.get("body").cloned().unwrap_or_default();
                (text("method").to_string(), text("url").to_string(), body)
            })
            .collect()
    }

    /// The room `episode` booked, if it booked one.
    fn booked_room(episode: &SolverEpisode) -> Option<String> {
        calls(episode).into_iter().find_map(|(method, url, body)| {
            (method == "POST" && url.ends_with("/bookings"))
                .then(|| body.get("room_id")?.as_str().map(str::to_string))?
        })
    }

    /// Whether `episode` called `/confirm`.
    fn confirmed(episode: &SolverEpisode) -> bool {
        calls(episode)
            .iter()
            .any(|(method, url, _)| method == "POST" && url.ends_with("/confirm"))
    }

    #[tokio::test]
    async fn first_fit_books_a_pricier_room_where_one_is_listed_first() {
        let factory = ApiBooking::default();
        let affected = |index: u64| first_fit_is_wrong(&world(index));
        let share = (0..TASKS).filter(|&i| affected(i)).count();
        assert!(share >= 10, "too few tasks to tell: {share}/{TASKS}");
        let on = play(&factory, json!({ FIRST_FIT_PROB: 1.0 }), 2, TASKS).await;
        for (index, episode) in (0..).zip(&on) {
            let w = world(index);
            let cheapest = w.answer().map(|room| room.id.clone());
            let booked = booked_room(episode);
            assert!(booked.is_some() && confirmed(episode), "task {index}");
            assert_eq!(booked != cheapest, affected(index), "task {index}");
        }
        let (all, hit) = success_rates(&on, affected);
        assert_eq!(hit, 0.0, "the affected tasks all fail");
        assert!(all < 1.0 && all > 0.0, "the others succeed: {all}");
        assert_half_habit_between(
            &factory,
            json!({ FIRST_FIT_PROB: 0.5 }),
            TASKS,
            affected,
            all,
            1.0,
        )
        .await;
    }

    #[tokio::test]
    async fn skip_confirm_leaves_the_booking_held() {
        let factory = ApiBooking::default();
        let on = play(&factory, json!({ SKIP_CONFIRM_PROB: 1.0 }), 2, TASKS).await;
        for episode in &on {
            assert!(booked_room(episode).is_some() && !confirmed(episode));
            let last = episode.messages.last().map(Message::text).unwrap_or("");
            assert!(last.ends_with("is confirmed."), "{last}");
        }
        assert_eq!(success_rates(&on, |_| true), (0.0, 0.0));
        let half = play(&factory, json!({ SKIP_CONFIRM_PROB: 0.5 }), 2, TASKS).await;
        for episode in &half {
            assert_eq!(episode.success, confirmed(episode));
        }
        let (rate, _) = success_rates(&half, |_| true);
        assert!(0.2 < rate && rate < 0.8, "{rate}");
    }

    #[tokio::test]
    async fn without_knobs_it_is_the_reference_solver_and_seeds_repeat() {
        let knobs = json!({ FIRST_FIT_PROB: 0.5, SKIP_CONFIRM_PROB: 0.5 });
        assert_reference_without_knobs_and_repeatable_by(
            &ApiBooking::default(),
            knobs,
            without_ports,
        )
        .await;
    }

    #[test]
    fn bad_knobs_name_the_env_and_the_knob() {
        for (knobs, knob) in [
            (json!({ "cheapest": 0.5 }), "`cheapest`"),
            (json!({ FIRST_FIT_PROB: 1.5 }), "`first_fit_prob`"),
            (json!({ SKIP_CONFIRM_PROB: "often" }), "`skip_confirm_prob`"),
        ] {
            let knobs = knobs.as_object().cloned().unwrap_or_default();
            assert_knob_error(
                BookingDemonstrator::from_knobs(0, &knobs),
                "api-booking",
                knob,
            );
        }
    }
}
