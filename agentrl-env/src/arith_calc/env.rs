//! The `arith-calc` session: one episode of "compute this expression", with a calculator tool.

use agentrl_core::{
    Env, Error, Message, Observation, Result, Role, Step, StepInfo, Task, ToolContext,
};
use agentrl_tools::{Calculator, ToolBox, ToolLimits};
use async_trait::async_trait;

use super::ARITH_CALC_ID;
use super::problem::ArithProblem;
use crate::answer;

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
    tools: std::result::Result<ToolBox, String>,
    ctx: ToolContext,
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
        let tools = ToolBox::new(ToolLimits::default())
            .with(Calculator)
            .map_err(|e| format!("cannot set up the calculator tool: {e}"));
        ArithCalcEnv {
            tools,
            ctx: ToolContext::default(),
            state: State::Idle,
        }
    }

    /// The tool box, or the env error explaining why there is none.
    fn toolbox(&self) -> Result<&ToolBox> {
        self.tools
            .as_ref()
            .map_err(|why| Error::env(ARITH_CALC_ID, why.clone()))
    }

    /// Runs every tool call of `action` and reports the tool messages.
    async fn run_tools(&self, action: &Message) -> Result<Step> {
        let toolbox = self.toolbox()?;
        let mut info = StepInfo::default();
        let mut messages = Vec::with_capacity(action.tool_calls.len());
        let mut invalid = Vec::new();
        for call in &action.tool_calls {
            let outcome = toolbox.dispatch(call, &self.ctx).await;
            info.tool_calls += 1;
            if let Some(error) = &outcome.error {
                info.tool_errors += 1;
                if outcome.is_invalid_action() {
                    invalid.push(error.to_string());
                }
            }
            messages.push(outcome.message);
        }
        if !invalid.is_empty() {
            info.invalid_action = Some(invalid.join("; "));
        }
        Ok(Step {
            messages,
            reward: 0.0,
            terminated: false,
            truncated: false,
            info,
        })
    }
}

/// A step that answers an unusable action with an error message and lets the episode go on.
fn invalid_action(reason: &str) -> Step {
    Step {
        messages: vec![Message::user(format!(
            "error: {reason}; call a tool or give the answer"
        ))],
        reward: 0.0,
        terminated: false,
        truncated: false,
        info: StepInfo {
            invalid_action: Some(reason.to_string()),
            ..StepInfo::default()
        },
    }
}

/// The lowercase name of a role, as in the chat JSON.
fn role_name(role: Role) -> &'static str {
    match role {
        Role::System => "system",
        Role::User => "user",
        Role::Assistant => "assistant",
        Role::Tool => "tool",
    }
}

#[async_trait]
impl Env for ArithCalcEnv {
    fn id(&self) -> &str {
        ARITH_CALC_ID
    }

    async fn reset(&mut self, task: &Task) -> Result<Observation> {
        self.state = State::Idle;
        let tools = self.toolbox()?.specs();
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
        if action.role != Role::Assistant {
            let reason = format!(
                "message role is {}, expected assistant",
                role_name(action.role)
            );
            return Ok(invalid_action(&reason));
        }
        if !action.tool_calls.is_empty() {
            return self.run_tools(action).await;
        }
        let text = action.text();
        if text.trim().is_empty() {
            return Ok(invalid_action("empty message"));
        }
        let success = answer::answer_matches(text, expected);
        self.state = State::Finished;
        Ok(Step {
            messages: Vec::new(),
            reward: if success { 1.0 } else { 0.0 },
            terminated: true,
            truncated: false,
            info: StepInfo {
                success: Some(success),
                ..StepInfo::default()
            },
        })
    }
}
