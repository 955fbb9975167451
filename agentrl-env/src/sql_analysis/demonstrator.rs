//! The imperfect `sql-analysis` demonstrator: the reference solver with two habits, each
//! decided once per task: guessing without a query, and counting order rows.

use agentrl_core::{Message, Result, SeededRng, Task};

use super::question::{Question, TOLERANCE, Truth};
use super::task::SqlTask;
use super::{SQL_ANALYSIS_ID, query_then_answer, unreadable_task};
use crate::demonstrator::{
    DemonstratorKnobs, KnobDoc, PerTaskChoice, probability_knob, reject_unknown_knobs,
};
use crate::factory::Solver;

/// Knob: probability of answering without querying the database.
const NO_QUERY_PROB: &str = "no_query_prob";
/// Knob: probability of counting order rows on a question about a quantity, a revenue or a
/// number of customers.
const COUNT_ROWS_PROB: &str = "count_rows_prob";

/// The knobs of [`SqlDemonstrator::from_knobs`] (name, doc).
pub const SQL_DEMONSTRATOR_KNOBS: &[KnobDoc] = &[
    (
        NO_QUERY_PROB,
        "probability of answering `My guess: X` at once, without querying the database \
         (default 0)",
    ),
    (
        COUNT_ROWS_PROB,
        "probability, on a question about a product's quantity, a city's revenue or a \
         category's customers, of querying COUNT(*) of the matching orders instead (default 0)",
    ),
];

/// What the demonstrator does on a task, decided on its first turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Habit {
    /// Plays like the expert.
    None,
    /// Answers at once with a wrong guess.
    NoQuery,
    /// Counts the matching order rows.
    CountRows,
}

/// A demonstrator for supervised warm starts whose mistakes are habits, so that a cloned
/// policy keeps them under greedy decoding and RL has something to unlearn.
///
/// Once per task (on its first turn) it decides, with probability `no_query_prob`, to answer
/// at once `My guess: X` with a wrong number or name; otherwise, on a question about a
/// product's total quantity, a city's revenue or a category's number of customers and with
/// probability `count_rows_prob`, to query `COUNT(*)` of the matching orders and answer with
/// that. Otherwise it plays like [`super::SqlExpert`].
#[derive(Debug, Clone)]
pub struct SqlDemonstrator {
    /// Probability of answering without a query.
    pub no_query_prob: f64,
    /// Probability of counting order rows on the questions it applies to.
    pub count_rows_prob: f64,
    /// Source of all its random choices.
    pub rng: SeededRng,
    /// For the task in progress (by id): its habit.
    plan: PerTaskChoice<Habit>,
}

impl SqlDemonstrator {
    /// A demonstrator with the given habit probabilities, seeded by `seed`.
    pub fn new(seed: u64, no_query_prob: f64, count_rows_prob: f64) -> Self {
        SqlDemonstrator {
            no_query_prob,
            count_rows_prob,
            rng: SeededRng::new(seed),
            plan: PerTaskChoice::default(),
        }
    }

    /// The demonstrator that `knobs` describe (see [`SQL_DEMONSTRATOR_KNOBS`]), seeded by
    /// `seed`; a missing knob turns its habit off, and an unknown knob or a value outside
    /// `[0, 1]` is an [`Error::Config`](agentrl_core::Error::Config) naming the knob.
    pub fn from_knobs(seed: u64, knobs: &DemonstratorKnobs) -> Result<Self> {
        reject_unknown_knobs(SQL_ANALYSIS_ID, knobs, SQL_DEMONSTRATOR_KNOBS)?;
        let knob = |name| probability_knob(SQL_ANALYSIS_ID, knobs, name, 0.0);
        Ok(SqlDemonstrator::new(
            seed,
            knob(NO_QUERY_PROB)?,
            knob(COUNT_ROWS_PROB)?,
        ))
    }

    /// The habit on `task`: decided on the first turn, remembered after.
    fn habit(&mut self, task: &Task, question: &Question, history: &[Message]) -> Habit {
        self.plan.decide(task, history, || {
            if self.rng.chance(self.no_query_prob) {
                Habit::NoQuery
            } else if counting_sql(question).is_some() && self.rng.chance(self.count_rows_prob) {
                Habit::CountRows
            } else {
                Habit::None
            }
        })
    }
}

impl Solver for SqlDemonstrator {
    fn act(&mut self, task: &Task, history: &[Message]) -> Message {
        let sql_task = match SqlTask::from_task(task) {
            Ok(t) => t,
            Err(e) => return unreadable_task(&e),
        };
        let question = &sql_task.question;
        match self.habit(task, question, history) {
            Habit::NoQuery => {
                let guess = wrong_guess(&sql_task.truth, &mut self.rng);
                Message::assistant(format!("My guess: {guess}"))
            }
            Habit::CountRows => {
                let query = counting_sql(question).unwrap_or_else(|| question.reference_sql());
                query_then_answer(&query, history)
            }
            Habit::None => query_then_answer(&question.reference_sql(), history),
        }
    }
}

/// The query counting the orders that `question` is about, for the questions that ask for
/// something else about them (a total quantity, a revenue, a number of customers).
fn counting_sql(question: &Question) -> Option<String> {
    let by_product = "FROM orders o JOIN products p ON p.id = o.product_id";
    Some(match question {
        Question::QuantityOfProduct { product } => {
            format!("SELECT COUNT(*) {by_product} WHERE p.name = '{product}'")
        }
        Question::RevenueOfCity { city } => format!(
            "SELECT COUNT(*) FROM orders o JOIN customers c ON c.id = o.customer_id WHERE \
             c.city = '{city}'"
        ),
        Question::CustomersOfCategory { category } => {
            format!("SELECT COUNT(*) {by_product} WHERE p.category = '{category}'")
        }
        _ => return None,
    })
}

/// A wrong answer of the right kind: a whole number off by more than [`TOLERANCE`], or a name
/// among the candidates other than the right one.
fn wrong_guess(truth: &Truth, rng: &mut SeededRng) -> String {
    match truth {
        Truth::Number(value) => {
            let high = (value.abs() * 2.0).max(20.0) as i64;
            let guess = rng.range(0, high);
            let guess = if (guess as f64 - value).abs() <= TOLERANCE {
                guess + 1
            } else {
                guess
            };
            guess.to_string()
        }
        Truth::Name { name, candidates } => {
            let wrong: Vec<&String> = candidates.iter().filter(|c| *c != name).collect();
            match rng.choose(&wrong) {
                Some(other) => other.to_string(),
                None => "nobody".to_string(),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::demonstrator::test_support::{
        assert_knob_error, assert_reference_without_knobs_and_repeatable, play, success_rates,
    };
    use crate::factory::SolverEpisode;
    use crate::sql_analysis::{SqlAnalysis, check};
    use agentrl_core::Split;
    use serde_json::json;

    /// Number of train tasks the rates are measured on.
    const TASKS: u64 = 50;

    /// Episodes of the demonstrator with `knobs` and `seed` on the first `n` train tasks.
    async fn episodes(knobs: serde_json::Value, seed: u64, n: u64) -> Vec<SolverEpisode> {
        play(&SqlAnalysis::default(), knobs, seed, n).await
    }

    /// Success rate of `knob` at `value`: over all tasks, and over those whose question
    /// `counting_sql` applies to.
    async fn rates(knob: &str, value: f64) -> (f64, f64) {
        let played = episodes(json!({ knob: value }), 2, TASKS).await;
        success_rates(&played, |index| {
            let task = SqlTask::generate(0, Split::Train, index);
            counting_sql(&task.question).is_some()
        })
    }

    #[tokio::test]
    async fn each_habit_fails_the_tasks_it_applies_to() {
        let reference = rates(NO_QUERY_PROB, 0.0).await;
        assert_eq!(reference, (1.0, 1.0));
        let half = rates(NO_QUERY_PROB, 0.5).await;
        let on = rates(NO_QUERY_PROB, 1.0).await;
        assert_eq!(on, (0.0, 0.0), "guesses are never right");
        assert!(0.3 < half.0 && half.0 < 0.7, "{half:?}");

        let half = rates(COUNT_ROWS_PROB, 0.5).await;
        let on = rates(COUNT_ROWS_PROB, 1.0).await;
        assert!(on.1 < 0.2, "counted orders are rarely right: {on:?}");
        assert!(on.0 < 0.8, "{on:?}");
        assert!(on.0 < half.0 && half.0 < 1.0, "{half:?}");
        assert!(0.1 < half.1 && half.1 < 0.9, "{half:?}");
    }

    #[test]
    fn guesses_are_never_right() {
        let mut rng = SeededRng::new(5);
        let name = Truth::Name {
            name: "Oslo".into(),
            candidates: vec!["Oslo".into(), "Cork".into(), "Graz".into()],
        };
        for truth in [
            Truth::Number(0.0),
            Truth::Number(7.0),
            Truth::Number(23.5),
            name,
        ] {
            for _ in 0..200 {
                let guess = wrong_guess(&truth, &mut rng);
                assert!(!check(&truth, &format!("My guess: {guess}")), "{guess}");
            }
        }
    }

    #[tokio::test]
    async fn without_knobs_it_is_the_reference_solver_and_seeds_repeat() {
        let knobs = json!({ NO_QUERY_PROB: 0.3, COUNT_ROWS_PROB: 0.5 });
        assert_reference_without_knobs_and_repeatable(&SqlAnalysis::default(), knobs).await;
    }

    #[test]
    fn bad_knobs_name_the_env_and_the_knob() {
        for (knobs, knob) in [
            (json!({ "no_query": 0.5 }), "`no_query`"),
            (json!({ NO_QUERY_PROB: 3 }), "`no_query_prob`"),
            (json!({ COUNT_ROWS_PROB: "half" }), "`count_rows_prob`"),
        ] {
            let knobs = knobs.as_object().cloned().unwrap_or_default();
            assert_knob_error(SqlDemonstrator::from_knobs(0, &knobs), "sql-analysis", knob);
        }
    }
}
