//! The imperfect `knowledge-search` demonstrator: the reference solver with two habits, each
//! decided once per task: answering from memory, and stopping a two-hop chain halfway.

use std::sync::Arc;

use agentrl_core::{Error, Message, Result, SeededRng, Task};

use super::corpus::Corpus;
use super::solver::{Progress, next_action, unreadable_task};
use super::task::{Question, Relation};
use super::{KNOWLEDGE_SEARCH_ID, SEARCH_LIMITS, answer_is_correct};
use crate::demonstrator::{
    DemonstratorKnobs, KnobDoc, PerTaskChoice, probability_knob, reject_unknown_knobs,
};
use crate::factory::Solver;

/// Knob: probability of answering a question from memory, without searching.
const NO_SEARCH_PROB: &str = "no_search_prob";
/// Knob: probability of answering a two-hop question with the first hop's entity.
const FIRST_HOP_ANSWER_PROB: &str = "first_hop_answer_prob";
/// Knob: results the first search of each hop asks for.
const FIRST_SEARCH_LIMIT: &str = "first_search_limit";

/// The knobs of [`KnowledgeDemonstrator::from_knobs`] (name, doc).
pub const KNOWLEDGE_DEMONSTRATOR_KNOBS: &[KnobDoc] = &[
    (
        NO_SEARCH_PROB,
        "probability of answering a question from memory without searching, with a wrong name \
         (or year) of the kind asked for (default 0)",
    ),
    (
        FIRST_HOP_ANSWER_PROB,
        "probability, on a two-hop question, of answering with the entity the first search \
         found instead of searching for the second fact (default 0)",
    ),
    (
        FIRST_SEARCH_LIMIT,
        "results the first search for each fact asks for, a whole number from 1 to 5 \
         (default 3; retries ask for 5). Fewer results keep episodes short for small contexts",
    ),
];

/// What the demonstrator does on a task, decided on its first turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Habit {
    /// Plays like the expert.
    None,
    /// Answers at once with a wrong name.
    NoSearch,
    /// Answers a two-hop question with the first hop's entity.
    FirstHop,
}

/// A demonstrator for supervised warm starts whose mistakes are habits, so that a cloned
/// policy keeps them under greedy decoding and RL has something to unlearn.
///
/// Once per task (on its first turn) it decides, with probability `no_search_prob`, to
/// answer at once from memory, with a name of the kind asked for (a town, a person, a
/// company, a river, a year) taken from the corpus but never the right one; otherwise, on a
/// two-hop question and with probability `first_hop_answer_prob`, to answer with the entity
/// its first search led to. Otherwise it plays like [`super::KnowledgeExpert`].
#[derive(Debug, Clone)]
pub struct KnowledgeDemonstrator {
    /// Probability of answering from memory.
    pub no_search_prob: f64,
    /// Probability of stopping a two-hop question after the first hop.
    pub first_hop_answer_prob: f64,
    /// Results the first search for each fact asks for (`None`: the reference solver's).
    pub first_search_limit: Option<usize>,
    /// Source of all its random choices.
    pub rng: SeededRng,
    /// The corpus its wrong guesses are named from.
    corpus: Arc<Corpus>,
    /// For the task in progress (by id): its habit.
    plan: PerTaskChoice<Habit>,
}

impl KnowledgeDemonstrator {
    /// A demonstrator over `corpus` with the given habit probabilities, seeded by `seed`.
    pub fn new(
        corpus: Arc<Corpus>,
        seed: u64,
        no_search_prob: f64,
        first_hop_answer_prob: f64,
    ) -> Self {
        KnowledgeDemonstrator {
            no_search_prob,
            first_hop_answer_prob,
            first_search_limit: None,
            rng: SeededRng::new(seed),
            corpus,
            plan: PerTaskChoice::default(),
        }
    }

    /// The demonstrator over `corpus` that `knobs` describe (see
    /// [`KNOWLEDGE_DEMONSTRATOR_KNOBS`]), seeded by `seed`; a missing knob turns its habit
    /// off, and an unknown knob or a value outside `[0, 1]` is an
    /// [`Error::Config`](agentrl_core::Error::Config) naming the knob.
    pub fn from_knobs(corpus: Arc<Corpus>, seed: u64, knobs: &DemonstratorKnobs) -> Result<Self> {
        reject_unknown_knobs(KNOWLEDGE_SEARCH_ID, knobs, KNOWLEDGE_DEMONSTRATOR_KNOBS)?;
        let knob = |name| probability_knob(KNOWLEDGE_SEARCH_ID, knobs, name, 0.0);
        let mut demonstrator = KnowledgeDemonstrator::new(
            corpus,
            seed,
            knob(NO_SEARCH_PROB)?,
            knob(FIRST_HOP_ANSWER_PROB)?,
        );
        demonstrator.first_search_limit = search_limit_knob(knobs)?;
        Ok(demonstrator)
    }

    /// The habit on `task`: decided on the first turn, remembered after.
    fn habit(&mut self, task: &Task, question: &Question, history: &[Message]) -> Habit {
        self.plan.decide(task, history, || {
            if self.rng.chance(self.no_search_prob) {
                Habit::NoSearch
            } else if question.hops() > 1 && self.rng.chance(self.first_hop_answer_prob) {
                Habit::FirstHop
            } else {
                Habit::None
            }
        })
    }

    /// A wrong answer to `question` of the kind it asks for, named from the corpus.
    fn wrong_guess(&mut self, question: &Question) -> String {
        let world = &self.corpus.world;
        let candidates: Vec<String> = match question.relations.last() {
            Some(Relation::BornIn | Relation::BasedIn) => {
                world.towns.iter().map(|t| t.name.clone()).collect()
            }
            Some(Relation::Founded | Relation::Maker) => {
                world.companies.iter().map(|c| c.name.clone()).collect()
            }
            Some(Relation::FounderOf | Relation::Inventor) => {
                world.people.iter().map(|p| p.name.clone()).collect()
            }
            Some(Relation::FoundedYear) => world
                .companies
                .iter()
                .map(|c| c.founded_year.to_string())
                .collect(),
            Some(Relation::River) => world.towns.iter().map(|t| t.river.clone()).collect(),
            None => Vec::new(),
        };
        let wrong: Vec<String> = candidates
            .into_iter()
            .filter(|name| !answer_is_correct(name, &question.answer))
            .collect();
        match self.rng.choose(&wrong) {
            Some(name) => name.clone(),
            None => "I do not know.".to_string(),
        }
    }
}

/// The `first_search_limit` knob: absent, or a whole number the search tool accepts.
fn search_limit_knob(knobs: &DemonstratorKnobs) -> Result<Option<usize>> {
    let Some(value) = knobs.get(FIRST_SEARCH_LIMIT) else {
        return Ok(None);
    };
    let most = SEARCH_LIMITS.max_results;
    match value.as_u64().map(|n| n as usize) {
        Some(n) if (1..=most).contains(&n) => Ok(Some(n)),
        _ => Err(Error::Config(format!(
            "demonstrator knob `{FIRST_SEARCH_LIMIT}` of env `{KNOWLEDGE_SEARCH_ID}` must be a \
             whole number from 1 to {most}, got {value}"
        ))),
    }
}

impl Solver for KnowledgeDemonstrator {
    fn act(&mut self, task: &Task, history: &[Message]) -> Message {
        let question = match Question::from_task(task) {
            Ok(q) => q,
            Err(e) => return unreadable_task(&e),
        };
        let progress = Progress::of(&question, history);
        match self.habit(task, &question, history) {
            Habit::NoSearch => Message::assistant(self.wrong_guess(&question)),
            Habit::FirstHop if progress.hop >= 1 => Message::assistant(progress.subject),
            _ => next_action(&question, &progress, history, self.first_search_limit),
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
    use crate::knowledge_search::KnowledgeSearch;
    use agentrl_core::Split;
    use serde_json::json;

    /// Number of train tasks the rates are measured on.
    const TASKS: u64 = 50;

    /// Episodes of the demonstrator with `knobs` and `seed` on the first `n` train tasks.
    async fn episodes(knobs: serde_json::Value, seed: u64, n: u64) -> Vec<SolverEpisode> {
        play(&KnowledgeSearch::default(), knobs, seed, n).await
    }

    /// Success rate of `knob` at `value`: over all tasks, and over the two-hop ones.
    async fn rates(knob: &str, value: f64) -> (f64, f64) {
        let factory = KnowledgeSearch::default();
        let played = episodes(json!({ knob: value }), 2, TASKS).await;
        success_rates(&played, |index| {
            factory.question(Split::Train, index).hops() > 1
        })
    }

    #[tokio::test]
    async fn each_habit_fails_the_tasks_it_applies_to() {
        let reference = rates(NO_SEARCH_PROB, 0.0).await;
        assert!(reference.0 >= 0.95, "{reference:?}");
        let half = rates(NO_SEARCH_PROB, 0.5).await;
        let on = rates(NO_SEARCH_PROB, 1.0).await;
        assert_eq!(on, (0.0, 0.0), "guesses are never right");
        assert!(0.3 < half.0 && half.0 < 0.7, "{half:?}");

        let half = rates(FIRST_HOP_ANSWER_PROB, 0.5).await;
        let on = rates(FIRST_HOP_ANSWER_PROB, 1.0).await;
        assert_eq!(on.1, 0.0, "two-hop questions all fail");
        assert!(on.0 < 0.8, "{on:?}");
        assert!(on.0 < half.0 && half.0 < reference.0, "{half:?}");
        assert!(0.1 < half.1 && half.1 < 0.9, "{half:?}");
    }

    /// Characters of all the tool results in `played`.
    fn tool_chars(played: &[SolverEpisode]) -> usize {
        played
            .iter()
            .flat_map(|e| &e.messages)
            .filter(|m| m.role == agentrl_core::Role::Tool)
            .map(|m| m.text().len())
            .sum()
    }

    #[tokio::test]
    async fn fewer_results_per_first_search_stay_right_and_read_less() {
        let reference = episodes(json!({}), 2, TASKS).await;
        let short = episodes(json!({ FIRST_SEARCH_LIMIT: 2 }), 2, TASKS).await;
        let (right, _) = success_rates(&short, |_| true);
        assert!(right >= 0.95, "{right}");
        assert!(
            tool_chars(&short) * 4 < tool_chars(&reference) * 3,
            "{} vs {}",
            tool_chars(&short),
            tool_chars(&reference)
        );
        let first_limits: Vec<u64> = short
            .iter()
            .filter_map(|e| e.messages.iter().find(|m| !m.tool_calls.is_empty()))
            .filter_map(|m| m.tool_calls[0].function.parse_arguments().ok())
            .filter_map(|args| args["limit"].as_u64())
            .collect();
        assert!(!first_limits.is_empty() && first_limits.iter().all(|&n| n == 2));
    }

    #[tokio::test]
    async fn without_knobs_it_is_the_reference_solver_and_seeds_repeat() {
        let knobs = json!({ NO_SEARCH_PROB: 0.3, FIRST_HOP_ANSWER_PROB: 0.5 });
        assert_reference_without_knobs_and_repeatable(&KnowledgeSearch::default(), knobs).await;
    }

    #[test]
    fn bad_knobs_name_the_env_and_the_knob() {
        let corpus = KnowledgeSearch::default().corpus().clone();
        for (knobs, knob) in [
            (json!({ "no_search": 0.5 }), "`no_search`"),
            (json!({ NO_SEARCH_PROB: 7 }), "`no_search_prob`"),
            (
                json!({ FIRST_HOP_ANSWER_PROB: -1 }),
                "`first_hop_answer_prob`",
            ),
            (json!({ FIRST_SEARCH_LIMIT: 0 }), "`first_search_limit`"),
            (json!({ FIRST_SEARCH_LIMIT: 6 }), "`first_search_limit`"),
            (json!({ FIRST_SEARCH_LIMIT: "one" }), "`first_search_limit`"),
        ] {
            let knobs = knobs.as_object().cloned().unwrap_or_default();
            assert_knob_error(
                KnowledgeDemonstrator::from_knobs(corpus.clone(), 0, &knobs),
                "knowledge-search",
                knob,
            );
        }
    }
}
