//! The `knowledge-search` session: a question, a `search` tool over the shared corpus index,
//! and a final answer checked against the expected name or year.

use std::sync::Arc;

use agentrl_core::{Env, Error, Message, Observation, Result, Step, StepInfo, Task};
use agentrl_tools::{Search, SearchLimits, ToolBox, ToolLimits};
use async_trait::async_trait;

use super::corpus::Corpus;
use super::task::Question;
use super::{KNOWLEDGE_SEARCH_ID, answer_is_correct};
use crate::session::{continue_step, final_step, invalid_step, wrong_role};
use crate::tool_env::SessionTools;

/// What the agent is told after an unusable action.
const HINT: &str = "call the search tool or reply with the answer alone";

/// Limits of the session's search tool: whole short articles fit in a snippet.
pub const SEARCH_LIMITS: SearchLimits = SearchLimits {
    default_results: 3,
    max_results: 5,
    snippet_chars: 300,
    max_output_chars: 1500,
};

/// Where the session stands.
#[derive(Debug)]
enum State {
    /// No episode started yet.
    Idle,
    /// An episode is in progress; its expected answer.
    Running { answer: String },
    /// The agent gave its final answer.
    Finished,
}

/// One `knowledge-search` session, without turn limit (the factory adds it).
///
/// The agent sees the question and may call `search`; a message without tool calls is its
/// final answer, compared with [`answer_is_correct`].
pub struct KnowledgeSearchEnv {
    tools: SessionTools,
    state: State,
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
            state: State::Idle,
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
        self.state = State::Idle;
        let tools = self.tools.get()?.specs();
        let question = Question::from_task(task)?;
        self.state = State::Running {
            answer: question.answer,
        };
        Ok(Observation {
            messages: vec![Message::user(prompt(&question.question))],
            tools,
        })
    }

    async fn step(&mut self, action: &Message) -> Result<Step> {
        let expected = match &self.state {
            State::Running { answer } => answer.clone(),
            State::Idle => {
                return Err(Error::env(KNOWLEDGE_SEARCH_ID, "step called before reset"));
            }
            State::Finished => {
                return Err(Error::env(
                    KNOWLEDGE_SEARCH_ID,
                    "step called after the final answer; call reset first",
                ));
            }
        };
        if let Some(reason) = wrong_role(action) {
            return Ok(invalid_step(&reason, HINT));
        }
        if !action.tool_calls.is_empty() {
            let (messages, info) = self.tools.run(action, || false).await?;
            return Ok(continue_step(messages, info));
        }
        let text = action.text();
        if text.trim().is_empty() {
            return Ok(invalid_step("empty message", HINT));
        }
        let success = answer_is_correct(text, &expected);
        self.state = State::Finished;
        Ok(final_step(Vec::new(), success, StepInfo::default()))
    }
}
