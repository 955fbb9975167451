//! The imperfect `spreadsheet-ops` demonstrator: the reference solver with two habits, each
//! decided once per task: guessing answers without reading the sheet, and off-by-one rows.

use agentrl_core::{Message, Result, SeededRng, Task};

use super::SPREADSHEET_OPS_ID;
use super::solver::{next_after, unreadable_task};
use super::task::{Job, SheetTask};
use crate::demonstrator::{
    DemonstratorKnobs, KnobDoc, PerTaskChoice, probability_knob, reject_unknown_knobs,
};
use crate::factory::Solver;

/// Knob: probability of guessing the answer to a question without reading the sheet.
const GUESS_ANSWER_PROB: &str = "guess_answer_prob";
/// Knob: probability of an off-by-one row on a task that writes into item rows.
const OFF_BY_ONE_PROB: &str = "off_by_one_prob";

/// The knobs of [`SpreadsheetDemonstrator::from_knobs`] (name, doc).
pub const SPREADSHEET_DEMONSTRATOR_KNOBS: &[KnobDoc] = &[
    (
        GUESS_ANSWER_PROB,
        "probability, on a question (an item's stock or price, a category's total), of \
         answering `My guess: N` without reading the sheet (default 0)",
    ),
    (
        OFF_BY_ONE_PROB,
        "probability, on a task that updates a stock or writes the total, of taking every row one \
         too small, as if the header row did not count (default 0)",
    ),
];

/// A demonstrator for supervised warm starts whose mistakes are habits, so that a cloned
/// policy keeps them under greedy decoding and RL has something to unlearn.
///
/// Once per task (on its first turn) it decides whether to follow its habit for the task's
/// kind of job. On a question (probability `guess_answer_prob`) it replies at once
/// `My guess: N` with a wrong `N`, never calling the tool. On a stock update or a total
/// (probability `off_by_one_prob`) it works like the expert but takes each row it works out
/// one too small: it writes into the row above the item's, or sums the column without its
/// last row. Adding an item has no habit. Otherwise it plays like
/// [`super::SpreadsheetExpert`].
#[derive(Debug, Clone)]
pub struct SpreadsheetDemonstrator {
    /// Probability of guessing the answer to a question.
    pub guess_answer_prob: f64,
    /// Probability of off-by-one rows on a stock update or a total.
    pub off_by_one_prob: f64,
    /// Source of all its random choices.
    pub rng: SeededRng,
    /// For the task in progress (by id): whether it follows its habit.
    plan: PerTaskChoice<bool>,
}

impl SpreadsheetDemonstrator {
    /// A demonstrator with the given habit probabilities, seeded by `seed`.
    pub fn new(seed: u64, guess_answer_prob: f64, off_by_one_prob: f64) -> Self {
        SpreadsheetDemonstrator {
            guess_answer_prob,
            off_by_one_prob,
            rng: SeededRng::new(seed),
            plan: PerTaskChoice::default(),
        }
    }

    /// The demonstrator that `knobs` describe (see [`SPREADSHEET_DEMONSTRATOR_KNOBS`]),
    /// seeded by `seed`; a missing knob turns its habit off, and an unknown knob or a value
    /// outside `[0, 1]` is an [`Error::Config`](agentrl_core::Error::Config) naming the knob.
    pub fn from_knobs(seed: u64, knobs: &DemonstratorKnobs) -> Result<Self> {
        reject_unknown_knobs(SPREADSHEET_OPS_ID, knobs, SPREADSHEET_DEMONSTRATOR_KNOBS)?;
        let knob = |name| probability_knob(SPREADSHEET_OPS_ID, knobs, name, 0.0);
        Ok(SpreadsheetDemonstrator::new(
            seed,
            knob(GUESS_ANSWER_PROB)?,
            knob(OFF_BY_ONE_PROB)?,
        ))
    }

    /// Whether to follow the habit for `job` on `task`: decided on the first turn,
    /// remembered after.
    fn follows_habit(&mut self, task: &Task, job: &Job, history: &[Message]) -> bool {
        self.plan.decide(task, history, || {
            let p = match job {
                Job::LookUp { .. } | Job::CategoryTotal { .. } => self.guess_answer_prob,
                Job::SetStock { .. } | Job::Restock { .. } | Job::WriteTotal { .. } => {
                    self.off_by_one_prob
                }
                Job::AddItem { .. } => 0.0,
            };
            self.rng.chance(p)
        })
    }
}

impl Solver for SpreadsheetDemonstrator {
    fn act(&mut self, task: &Task, history: &[Message]) -> Message {
        let sheet_task = match SheetTask::from_task(task) {
            Ok(t) => t,
            Err(e) => return unreadable_task(&e),
        };
        let habit = self.follows_habit(task, &sheet_task.job, history);
        match sheet_task.expected_answer() {
            Some(answer) if habit => {
                let guess = wrong_guess(answer, &mut self.rng);
                Message::assistant(format!("My guess: {guess}"))
            }
            Some(_) => next_after(&sheet_task.job, history, false),
            None => next_after(&sheet_task.job, history, habit),
        }
    }
}

/// A number that looks like an answer near `answer` (between 0 and twice it, at least 100)
/// but is never `answer`.
fn wrong_guess(answer: i64, rng: &mut SeededRng) -> i64 {
    let high = answer.saturating_mul(2).max(100);
    let guess = rng.range(0, high);
    if guess == answer { guess + 1 } else { guess }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::demonstrator::test_support::{
        assert_knob_error, assert_reference_without_knobs_and_repeatable, play, success_rates,
    };
    use crate::factory::SolverEpisode;
    use crate::spreadsheet_ops::SpreadsheetOps;
    use agentrl_core::Split;
    use serde_json::json;

    /// Number of train tasks the rates are measured on.
    const TASKS: u64 = 50;

    /// Episodes of the demonstrator with `knobs` and `seed` on the first `n` train tasks.
    async fn episodes(knobs: serde_json::Value, seed: u64, n: u64) -> Vec<SolverEpisode> {
        play(&SpreadsheetOps::default(), knobs, seed, n).await
    }

    /// Success rate of `knob` at `value`: over all tasks, and over the tasks whose job
    /// `affected` holds for.
    async fn rates(knob: &str, value: f64, affected: fn(&Job) -> bool) -> (f64, f64) {
        let factory = SpreadsheetOps::default();
        let played = episodes(json!({ knob: value }), 2, TASKS).await;
        success_rates(&played, |index| {
            let task = SheetTask::generate(factory.seed, Split::Train, index);
            affected(&task.job)
        })
    }

    /// Whether the job is a question.
    fn question(job: &Job) -> bool {
        matches!(job, Job::LookUp { .. } | Job::CategoryTotal { .. })
    }

    /// Whether the job writes into a row it works out.
    fn row_write(job: &Job) -> bool {
        matches!(
            job,
            Job::SetStock { .. } | Job::Restock { .. } | Job::WriteTotal { .. }
        )
    }

    #[tokio::test]
    async fn each_habit_fails_the_tasks_it_applies_to() {
        for (knob, affected) in [
            (GUESS_ANSWER_PROB, question as fn(&Job) -> bool),
            (OFF_BY_ONE_PROB, row_write),
        ] {
            let off = rates(knob, 0.0, affected).await;
            let half = rates(knob, 0.5, affected).await;
            let on = rates(knob, 1.0, affected).await;
            assert_eq!(off, (1.0, 1.0), "{knob}");
            assert_eq!(on.1, 0.0, "{knob}: the affected tasks all fail");
            assert!(on.0 < 0.75, "{knob}: {on:?}");
            assert!(
                on.0 < half.0 && half.0 < off.0,
                "{knob}: {off:?} {half:?} {on:?}"
            );
            assert!(0.2 < half.1 && half.1 < 0.8, "{knob}: {half:?}");
        }
    }

    #[test]
    fn guesses_are_never_right() {
        let mut rng = SeededRng::new(3);
        for answer in [0, 1, 57, 100, 150, 900] {
            for _ in 0..200 {
                let guess = wrong_guess(answer, &mut rng);
                assert!(guess != answer && guess >= 0, "{answer}: {guess}");
            }
        }
    }

    #[tokio::test]
    async fn without_knobs_it_is_the_reference_solver_and_seeds_repeat() {
        let knobs = json!({ GUESS_ANSWER_PROB: 0.5, OFF_BY_ONE_PROB: 0.5 });
        assert_reference_without_knobs_and_repeatable(&SpreadsheetOps::default(), knobs).await;
    }

    #[test]
    fn bad_knobs_name_the_env_and_the_knob() {
        for (knobs, knob) in [
            (json!({ "guess": 0.5 }), "`guess`"),
            (json!({ GUESS_ANSWER_PROB: 1.01 }), "`guess_answer_prob`"),
            (json!({ OFF_BY_ONE_PROB: null }), "`off_by_one_prob`"),
        ] {
            let knobs = knobs.as_object().cloned().unwrap_or_default();
            assert_knob_error(
                SpreadsheetDemonstrator::from_knobs(0, &knobs),
                "spreadsheet-ops",
                knob,
            );
        }
    }
}
