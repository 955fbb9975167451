//! The `math-reasoning` session: one word problem, answered in one message without tools.

use agentrl_core::{Env, Error, Message, Observation, Result, Step, StepInfo, Task};
use async_trait::async_trait;

use super::MATH_REASONING_ID;
use super::problem::MathProblem;
use crate::answer;
use crate::session::{final_step, invalid_step, wrong_role};

/// What to do instead of a malformed action.
const HINT: &str = "answer with a number";

/// One `math-reasoning` session, without turn limit (the factory adds it).
///
/// The agent sees the question and answers in text; the last number of its message is the
/// final answer. Tool calls, empty messages and non-assistant messages are invalid actions.
/// The final step's `info.extra["feedback"]` says how a wrong answer was wrong.
#[derive(Debug, Default)]
pub struct MathReasoningEnv {
    /// The expected answer while an episode runs.
    expected: Option<i64>,
}

impl MathReasoningEnv {
    /// A fresh session.
    pub fn new() -> Self {
        Self::default()
    }
}

/// The checker's feedback on a wrong final `text`.
fn feedback(text: &str, expected: i64) -> String {
    match answer::last_number(text) {
        None => "no number found in the answer".to_string(),
        Some(n) => match n.parse::<f64>() {
            Ok(v) if v > expected as f64 => format!("{n} is too high"),
            Ok(_) => format!("{n} is too low"),
            Err(_) => format!("{n} is not a plain number"),
        },
    }
}

#[async_trait]
impl Env for MathReasoningEnv {
    fn id(&self) -> &str {
        MATH_REASONING_ID
    }

    async fn reset(&mut self, task: &Task) -> Result<Observation> {
        self.expected = None;
        let problem = MathProblem::from_task(task)?;
        self.expected = Some(problem.answer);
        Ok(Observation {
            messages: vec![Message::user(problem.question)],
            tools: Vec::new(),
        })
    }

    async fn step(&mut self, action: &Message) -> Result<Step> {
        let Some(expected) = self.expected else {
            return Err(Error::env(
                MATH_REASONING_ID,
                "step called outside an episode",
            ));
        };
        if let Some(reason) = wrong_role(action) {
            return Ok(invalid_step(&reason, HINT));
        }
        if !action.tool_calls.is_empty() {
            return Ok(invalid_step("this task has no tools", HINT));
        }
        let text = action.text();
        if text.trim().is_empty() {
            return Ok(invalid_step("empty message", HINT));
        }
        self.expected = None;
        let success = answer::answer_matches(text, expected);
        let mut info = StepInfo::default();
        if !success {
            info.extra
                .insert("feedback".into(), feedback(text, expected).into());
        }
        Ok(final_step(Vec::new(), success, info))
    }
}
