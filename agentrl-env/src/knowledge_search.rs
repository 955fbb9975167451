//! `knowledge-search`: answer questions about a generated world of fictional people, towns,
//! companies and inventions by searching its articles with a BM25 `search` tool; some
//! questions need two searches (a fact that leads to another). With `path` and `corpus`
//! options it plays a user's question file over the user's document folder instead (see
//! [`KNOWLEDGE_SEARCH_USER_DATA`]).

mod corpus;
mod demonstrator;
mod env;
mod solver;
mod task;
pub mod world;

use std::sync::Arc;

use agentrl_core::{Env, Result, Split, Task};
use serde_json::{Value, json};

pub use corpus::{Corpus, articles, shared_corpus};
pub use demonstrator::{KNOWLEDGE_DEMONSTRATOR_KNOBS, KnowledgeDemonstrator};
pub use env::{KnowledgeSearchEnv, SEARCH_LIMITS, prompt};
pub use solver::{KnowledgeExpert, query_for, read_fact};
pub use task::{Question, Relation};

use crate::dataset::{EnvOptions, UserDataEnv};
use crate::demonstrator::{DemonstratorKnobs, KnobDoc};
use crate::factory::{EnvFactory, Solver};
use crate::wrappers::TurnLimit;

/// How `knowledge-search` plays a user's question file: `corpus` (a folder of `.txt`/`.md`
/// documents, indexed for the `search` tool) is required, and the `search` tool, the
/// `contains` checker, a system prompt and this env's turn limit are the defaults.
pub const KNOWLEDGE_SEARCH_USER_DATA: UserDataEnv = UserDataEnv {
    id: KNOWLEDGE_SEARCH_ID,
    required: &[("corpus", "the folder of documents to search")],
    defaults: knowledge_defaults,
};

/// Dataset option defaults of `knowledge-search`.
fn knowledge_defaults() -> Vec<(&'static str, Value)> {
    vec![
        ("tools", json!(["search"])),
        ("checker", json!("contains")),
        ("max_turns", json!(KNOWLEDGE_SEARCH_MAX_TURNS)),
        (
            "system",
            json!(
                "Answer the question by searching the documents with the search tool, then \
                 reply with the answer alone."
            ),
        ),
    ]
}

/// Registry id of the env.
pub const KNOWLEDGE_SEARCH_ID: &str = "knowledge-search";

/// Steps allowed per episode (two hops with retries, then the answer).
pub const KNOWLEDGE_SEARCH_MAX_TURNS: usize = 8;

/// The `knowledge-search` factory; its seed selects the world, the corpus and the questions
/// (default `0`). Factories of one seed share one corpus and one search index.
#[derive(Debug, Clone)]
pub struct KnowledgeSearch {
    corpus: Arc<Corpus>,
}

impl Default for KnowledgeSearch {
    fn default() -> Self {
        Self::new(0)
    }
}

impl KnowledgeSearch {
    /// The factory for the world of `seed`; builds the shared search index now (blocking,
    /// once per seed and process) so that no session has to. A failed build is reported by
    /// each session's `reset`.
    pub fn new(seed: u64) -> Self {
        let corpus = shared_corpus(seed);
        let _ = corpus.index();
        KnowledgeSearch { corpus }
    }

    /// The factory `options` ask for: a user's question file and documents with `path` and
    /// `corpus`, else the generated world of `seed` (see [`KNOWLEDGE_SEARCH_USER_DATA`]).
    pub fn from_options(options: &EnvOptions) -> Result<Arc<dyn EnvFactory>> {
        KNOWLEDGE_SEARCH_USER_DATA.factory(options, |seed| Arc::new(KnowledgeSearch::new(seed)))
    }

    /// The shared corpus (world, articles and index).
    pub fn corpus(&self) -> &Arc<Corpus> {
        &self.corpus
    }

    /// The question behind task `index` of `split`.
    pub fn question(&self, split: Split, index: u64) -> Question {
        Question::generate(&self.corpus, split, index)
    }
}

impl EnvFactory for KnowledgeSearch {
    fn id(&self) -> &str {
        KNOWLEDGE_SEARCH_ID
    }

    fn description(&self) -> &str {
        "answer one- and two-hop questions about fictional entities with a BM25 search tool"
    }

    fn task(&self, split: Split, index: u64) -> Task {
        self.question(split, index).to_task(split, index)
    }

    fn make(&self) -> Box<dyn Env> {
        Box::new(TurnLimit::new(
            KnowledgeSearchEnv::new(&self.corpus),
            KNOWLEDGE_SEARCH_MAX_TURNS,
        ))
    }

    fn max_turns(&self) -> usize {
        KNOWLEDGE_SEARCH_MAX_TURNS
    }

    /// The expert is deterministic, so `seed` is not used.
    fn solver(&self, _seed: u64) -> Box<dyn Solver> {
        Box::new(KnowledgeExpert)
    }

    fn demonstrator_knobs(&self) -> &[KnobDoc] {
        KNOWLEDGE_DEMONSTRATOR_KNOBS
    }

    /// A [`KnowledgeDemonstrator`] over the shared corpus (see
    /// [`KnowledgeDemonstrator::from_knobs`]).
    fn demonstrator(&self, knobs: &DemonstratorKnobs, seed: u64) -> Result<Box<dyn Solver>> {
        let corpus = Arc::clone(&self.corpus);
        let demonstrator = KnowledgeDemonstrator::from_knobs(corpus, seed, knobs)?;
        Ok(Box::new(demonstrator))
    }
}

/// Whether `reply` gives `expected`, ignoring case, surrounding whitespace and punctuation,
/// runs of whitespace, a leading `answer:` and a leading `the`.
pub fn answer_is_correct(reply: &str, expected: &str) -> bool {
    let wanted = normalise(expected);
    !wanted.is_empty() && normalise(reply) == wanted
}

/// Lower case, single spaces, without surrounding punctuation, `answer:` or `the`.
fn normalise(text: &str) -> String {
    let mut s = text.trim().to_lowercase();
    if let Some(rest) = s.strip_prefix("answer:") {
        s = rest.to_string();
    }
    let trimmed = s.trim_matches(|c: char| c.is_whitespace() || ".,;:!?\"'`*".contains(c));
    let words: Vec<&str> = trimmed.split_whitespace().collect();
    let words = match words.split_first() {
        Some((&"the", rest)) if !rest.is_empty() => rest,
        _ => &words[..],
    };
    words.join(" ")
}

#[cfg(test)]
mod tests {
    use super::answer_is_correct;

    #[test]
    fn answers_are_compared_leniently_but_exactly() {
        for reply in [
            "Tarnfield",
            " tarnfield.\n",
            "Answer: TARNFIELD",
            "\"Tarnfield\"",
        ] {
            assert!(answer_is_correct(reply, "Tarnfield"), "{reply}");
        }
        assert!(answer_is_correct("the  brindle\tloom", "Brindle Loom"));
        assert!(answer_is_correct("Velmora   Dask", "Velmora Dask"));
        for reply in [
            "Tarnfields",
            "Tarnfield or Ebbenholt",
            "",
            "It is Tarnfield",
        ] {
            assert!(!answer_is_correct(reply, "Tarnfield"), "{reply}");
        }
        assert!(!answer_is_correct("", ""));
    }
}
