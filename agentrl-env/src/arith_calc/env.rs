//! The `arith-calc` session: one episode of "compute this expression", with a calculator tool.

use agentrl_core::{Env, Message, Observation, Result, Step, StepInfo, Task};
use agentrl_tools::Calculator;
use async_trait::async_trait;

use super::ARITH_CALC_ID;
use super::problem::ArithProblem;
use crate::answer;
use crate::session::final_step;
use crate::tool_env::{AnswerEpisode, Reply, SessionTools, tools_or_answer};

/// One `arith-calc` session, without turn limit ([`crate::EnvFactory::make`] of
/// [`super::ArithCalc`] adds it).
///
/// The agent sees `Compute {expression}` and may call the `calculator` tool; a message without
/// tool calls is its final answer, whose last number must equal the expression's value.
pub struct ArithCalcEnv {
    tools: SessionTools,
    /// The expected value of the episode's expression.
    state: AnswerEpisode<i64>,
}

impl Default for ArithCalcEnv {
    fn default() -> Self {
        Self::new()
    }
}

impl ArithCalcEnv {
    /// A session whose tool box holds the calculator with default limits.
    ///
    /// Should the tool box refuse the calculator, the reason is reported by `reset`.
    pub fn new() -> Self {
        let tools = SessionTools::single(ARITH_CALC_ID, "calculator", Calculator);
        ArithCalcEnv {
            tools,
            state: AnswerEpisode::Idle,
        }
    }
}

/// What the agent is told after an unusable action.
const HINT: &str = "call a tool or give the answer";

#[async_trait]
impl Env for ArithCalcEnv {
    fn id(&self) -> &str {
        ARITH_CALC_ID
    }

    async fn reset(&mut self, task: &Task) -> Result<Observation> {
        self.state = AnswerEpisode::Idle;
        let tools = self.tools.get()?.specs();
        let problem = ArithProblem::from_task(task)?;
        self.state = AnswerEpisode::Running(problem.answer);
        Ok(Observation {
            messages: vec![Message::user(format!("Compute {}", problem.expression))],
            tools,
        })
    }

    async fn step(&mut self, action: &Message) -> Result<Step> {
        let expected = *self.state.expected(ARITH_CALC_ID)?;
        match tools_or_answer(&self.tools, action, HINT).await? {
            Reply::Step(step) => Ok(step),
            Reply::Answer(text) => {
                let success = answer::answer_matches(text, expected);
                self.state = AnswerEpisode::Finished;
                Ok(final_step(Vec::new(), success, StepInfo::default()))
            }
        }
    }
}
