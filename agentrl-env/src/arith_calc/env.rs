//! The `arith-calc` session: one episode of "compute this expression", with a calculator tool.

use agentrl_core::{Env, Error, Message, Observation, Result, Step, StepInfo, Task};
use agentrl_tools::Calculator;
use async_trait::async_trait;

use super::ARITH_CALC_ID;
use super::problem::ArithProblem;
use crate::answer;
use crate::session::{continue_step, final_step, invalid_step, wrong_role};
use crate::tool_env::SessionTools;

/// Where the session stands.
#[derive(Debug)]
enum State {
    /// No episode started yet.
    Idle,
    /// An episode is in progress; its expected answer.
    Running { answer: i64 },
    /// The agent gave its final answer.
    Finished,
}

/// One `arith-calc` session, without turn limit ([`crate::EnvFactory::make`] of
/// [`super::ArithCalc`] adds it).
///
/// The agent sees `Compute {expression}` and may call the `calculator` tool; a message without
/// tool calls is its final answer, whose last number must equal the expression's value.
pub struct ArithCalcEnv {
    tools: SessionTools,
    state: State,
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
            state: State::Idle,
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
        self.state = State::Idle;
        let tools = self.tools.get()?.specs();
        let problem = ArithProblem::from_task(task)?;
        self.state = State::Running {
            answer: problem.answer,
        };
        Ok(Observation {
            messages: vec![Message::user(format!("Compute {}", problem.expression))],
            tools,
        })
    }

    async fn step(&mut self, action: &Message) -> Result<Step> {
        let expected = match self.state {
            State::Running { answer } => answer,
            State::Idle => return Err(Error::env(ARITH_CALC_ID, "step called before reset")),
            State::Finished => {
                return Err(Error::env(
                    ARITH_CALC_ID,
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
        let success = answer::answer_matches(text, expected);
        self.state = State::Finished;
        Ok(final_step(Vec::new(), success, StepInfo::default()))
    }
}
