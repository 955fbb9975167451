//! The `knowledge-search` session: a question, a `search` tool over the shared corpus index,
//! and a final answer checked against the expected name or year.

use std::sync::Arc;

use agentrl_core::{Env, Message, Observation, Result, Step, StepInfo, Task};
use agentrl_tools::{Search, SearchLimits, ToolBox, ToolLimits};
use async_trait::async_trait;

use super::corpus::Corpus;
use super::task::Question;
use super::{KNOWLEDGE_SEARCH_ID, answer_is_correct};
use crate::session::final_step;
use crate::tool_env::{AnswerEpisode, Reply, SessionTools, tools_or_answer};

/// What the agent is told after an unusable action.
const HINT: &str = "call the search tool or reply with the answer alone";

/// Limits of the session's search tool: whole short articles fit in a snippet.
pub const SEARCH_LIMITS: SearchLimits = SearchLimits {
    default_results: 3,
    max_results: 5,
    snippet_chars: 300,
    max_output_chars: 1500,
};

/// One `knowledge-search` session, without turn limit (the factory adds it).
///
/// The agent sees the question and may call `search`; a message without tool calls is its
/// final answer, compared with [`answer_is_correct`].
pub struct KnowledgeSearchEnv {
    tools: SessionTools,
    /// The expected answer of the episode's question.
    state: AnswerEpisode<String>,
}

impl KnowledgeSearchEnv {
    /// A session searching `corpus`, whose index is built on first use and shared; should it
    /// fail, the reason is reported by `reset`.
    pub fn new(corpus: &Arc<Corpus>) -> Self {
        let built = corpus.index().and_then(|index| {
            ToolBox::new(ToolLimits::default())
                .with(Search::new(index, SEARCH_LIMITS))
                .map_err(|e| format!("cannot set up the search tool: {e}"))
        });
        let tools = SessionTools::new(KNOWLEDGE_SEARCH_ID, built);
        KnowledgeSearchEnv {
            tools,
            state: AnswerEpisode::Idle,
        }
    }
}

/// The first message of an episode.
pub fn prompt(question: &str) -> String {
    format!(
        "Answer the question using the search tool over a collection of articles. When you \
         know the answer, reply with it alone (a name or a year), without a tool call.\n\
         Question: {question}"
    )
}

#[async_trait]
impl Env for KnowledgeSearchEnv {
    fn id(&self) -> &str {
        KNOWLEDGE_SEARCH_ID
    }

    async fn reset(&mut self, task: &Task) -> Result<Observation> {
        self.state = AnswerEpisode::Idle;
        let tools = self.tools.get()?.specs();
        let question = Question::from_task(task)?;
        self.state = AnswerEpisode::Running(question.answer);
        Ok(Observation {
            messages: vec![Message::user(prompt(&question.question))],
            tools,
        })
    }

    async fn step(&mut self, action: &Message) -> Result<Step> {
        let expected = self.state.expected(KNOWLEDGE_SEARCH_ID)?.clone();
        match tools_or_answer(&self.tools, action, HINT).await? {
            Reply::Step(step) => Ok(step),
            Reply::Answer(text) => {
                let success = answer_is_correct(text, &expected);
                self.state = AnswerEpisode::Finished;
                Ok(final_step(Vec::new(), success, StepInfo::default()))
            }
        }
    }
}
