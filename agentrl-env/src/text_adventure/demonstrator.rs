//! The imperfect `text-adventure` demonstrator: the reference solver with two habits, each
//! decided once per task, that skip a step the goal needs.

use agentrl_core::{Message, Result, SeededRng, Task};

use super::command::Command;
use super::plan::plan;
use super::world::{Goal, World};
use super::{TEXT_ADVENTURE_ID, call_act, state_after, unreadable_task, world_of};
use crate::demonstrator::{
    DemonstratorKnobs, KnobDoc, PerTaskChoice, probability_knob, reject_unknown_knobs,
};
use crate::factory::Solver;

/// Knob: probability of never opening the chest on a put-in-the-chest task.
const SKIP_OPEN_PROB: &str = "skip_open_prob";
/// Knob: probability of never dropping the item on a bring-it-to-a-room task.
const KEEP_ITEM_PROB: &str = "keep_item_prob";

/// The knobs of [`AdventureDemonstrator::from_knobs`] (name, doc).
pub const ADVENTURE_DEMONSTRATOR_KNOBS: &[KnobDoc] = &[
    (
        SKIP_OPEN_PROB,
        "probability, on a task to put an item in the chest, of putting it in without opening \
         the chest (or fetching its key) first, retrying while the chest stays closed \
         (default 0)",
    ),
    (
        KEEP_ITEM_PROB,
        "probability, on a task to bring an item to a room, of carrying it there but looking \
         around instead of dropping it (default 0)",
    ),
];

/// A demonstrator for supervised warm starts whose mistakes are habits, so that a cloned
/// policy keeps them under greedy decoding and RL has something to unlearn.
///
/// Once per task (on its first turn) it decides whether to follow its habit for the task's
/// kind of goal. On a put-in-the-chest task (probability `skip_open_prob`) it plans as if the
/// chest stood open, so at the closed chest it sends `put X in chest` again and again. On a
/// bring-it-to-a-room task (probability `keep_item_prob`) it carries the item to the room
/// and then sends `look` instead of dropping it. Both go on until the turn limit ends the
/// episode. Otherwise it plays like [`super::AdventureExpert`].
#[derive(Debug, Clone)]
pub struct AdventureDemonstrator {
    /// Probability of never opening the chest on a put-in-the-chest task.
    pub skip_open_prob: f64,
    /// Probability of keeping the item on a bring-it-to-a-room task.
    pub keep_item_prob: f64,
    /// Source of all its random choices.
    pub rng: SeededRng,
    /// For the task in progress (by id): whether it follows its habit.
    plan: PerTaskChoice<bool>,
}

impl AdventureDemonstrator {
    /// A demonstrator with the given habit probabilities, seeded by `seed`.
    pub fn new(seed: u64, skip_open_prob: f64, keep_item_prob: f64) -> Self {
        AdventureDemonstrator {
            skip_open_prob,
            keep_item_prob,
            rng: SeededRng::new(seed),
            plan: PerTaskChoice::default(),
        }
    }

    /// The demonstrator that `knobs` describe (see [`ADVENTURE_DEMONSTRATOR_KNOBS`]), seeded
    /// by `seed`; a missing knob turns its habit off, and an unknown knob or a value outside
    /// `[0, 1]` is an [`Error::Config`](agentrl_core::Error::Config) naming the knob.
    pub fn from_knobs(seed: u64, knobs: &DemonstratorKnobs) -> Result<Self> {
        reject_unknown_knobs(TEXT_ADVENTURE_ID, knobs, ADVENTURE_DEMONSTRATOR_KNOBS)?;
        let knob = |name| probability_knob(TEXT_ADVENTURE_ID, knobs, name, 0.0);
        Ok(AdventureDemonstrator::new(
            seed,
            knob(SKIP_OPEN_PROB)?,
            knob(KEEP_ITEM_PROB)?,
        ))
    }

    /// Whether to follow the habit for the goal of `world` on `task`: decided on the first
    /// turn, remembered after.
    fn follows_habit(&mut self, task: &Task, world: &World, history: &[Message]) -> bool {
        self.plan.decide(task, history, || {
            let p = match world.goal {
                Goal::PutInChest { .. } => self.skip_open_prob,
                Goal::Bring { .. } => self.keep_item_prob,
            };
            self.rng.chance(p)
        })
    }
}

impl Solver for AdventureDemonstrator {
    fn act(&mut self, task: &Task, history: &[Message]) -> Message {
        let world = match world_of(task) {
            Ok(w) => w,
            Err(e) => return unreadable_task(&e),
        };
        let mut state = state_after(&world, history);
        let habit = self.follows_habit(task, &world, history);
        if habit && matches!(world.goal, Goal::PutInChest { .. }) {
            // The chest it has in mind stands open, so it never opens it nor fetches the key.
            state.chest_open = true;
        }
        let next = plan(&world, &state).and_then(|p| p.into_iter().next());
        let command = match (next, &world.goal) {
            (Some(Command::Drop(name)), Goal::Bring { item, .. })
                if habit && world.items.get(*item) == Some(&name) =>
            {
                Command::Look
            }
            (Some(command), _) => command,
            (None, _) => return Message::assistant("look"),
        };
        call_act(&command, history)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::demonstrator::test_support::{
        assert_knob_error, assert_reference_without_knobs_and_repeatable, play, success_rates,
    };
    use crate::factory::{EnvFactory, SolverEpisode};
    use crate::text_adventure::TextAdventure;
    use agentrl_core::Split;
    use serde_json::json;

    /// Number of train tasks the rates are measured on.
    const TASKS: u64 = 50;

    /// Episodes of the demonstrator with `knobs` and `seed` on the first `n` train tasks.
    async fn episodes(knobs: serde_json::Value, seed: u64, n: u64) -> Vec<SolverEpisode> {
        play(&TextAdventure::default(), knobs, seed, n).await
    }

    /// Success rate of `knob` at `value`: over all tasks, and over the tasks where `affected`
    /// holds for the world.
    async fn rates(knob: &str, value: f64, affected: fn(&World) -> bool) -> (f64, f64) {
        let factory = TextAdventure::default();
        let played = episodes(json!({ knob: value }), 2, TASKS).await;
        success_rates(&played, |index| {
            let world = world_of(&factory.task(Split::Train, index)).unwrap();
            affected(&world)
        })
    }

    /// Whether the task is to put an item in the chest.
    fn put_in_chest(world: &World) -> bool {
        matches!(world.goal, Goal::PutInChest { .. })
    }

    /// Whether the task is to bring an item to a room.
    fn bring(world: &World) -> bool {
        matches!(world.goal, Goal::Bring { .. })
    }

    #[tokio::test]
    async fn each_habit_fails_the_tasks_it_applies_to() {
        for (knob, affected) in [
            (SKIP_OPEN_PROB, put_in_chest as fn(&World) -> bool),
            (KEEP_ITEM_PROB, bring),
        ] {
            let off = rates(knob, 0.0, affected).await;
            let half = rates(knob, 0.5, affected).await;
            let on = rates(knob, 1.0, affected).await;
            assert_eq!(off, (1.0, 1.0), "{knob}");
            assert_eq!(on.1, 0.0, "{knob}: the affected tasks all fail");
            assert!(on.0 < 0.65, "{knob}: {on:?}");
            assert!(
                on.0 < half.0 && half.0 < off.0,
                "{knob}: {off:?} {half:?} {on:?}"
            );
            assert!(0.2 < half.1 && half.1 < 0.8, "{knob}: {half:?}");
        }
    }

    #[tokio::test]
    async fn without_knobs_it_is_the_reference_solver_and_seeds_repeat() {
        let knobs = json!({ SKIP_OPEN_PROB: 0.5, KEEP_ITEM_PROB: 0.5 });
        assert_reference_without_knobs_and_repeatable(&TextAdventure::default(), knobs).await;
    }

    #[test]
    fn bad_knobs_name_the_env_and_the_knob() {
        for (knobs, knob) in [
            (json!({ "skip_open": 0.5 }), "`skip_open`"),
            (json!({ SKIP_OPEN_PROB: -0.5 }), "`skip_open_prob`"),
            (json!({ KEEP_ITEM_PROB: 2 }), "`keep_item_prob`"),
        ] {
            let knobs = knobs.as_object().cloned().unwrap_or_default();
            assert_knob_error(
                AdventureDemonstrator::from_knobs(0, &knobs),
                "text-adventure",
                knob,
            );
        }
    }
}
