//! Scripted `arith-calc` agents: the correct expert and a deliberately imperfect demonstrator.

use agentrl_core::{Message, Result, Role, SeededRng, Task, ToolCall};
use serde_json::json;

use super::ARITH_CALC_ID;
use super::problem::ArithProblem;
use crate::answer;
use crate::demonstrator::{
    DemonstratorKnobs, KnobDoc, PerTaskChoice, probability_knob, reject_unknown_knobs,
};
use crate::factory::Solver;

/// Id of the one calculator call the scripted agents make.
const CALL_ID: &str = "call_0";

/// The assistant message calling the calculator on `expression`.
fn call_calculator(expression: &str) -> Message {
    let call = ToolCall::new(CALL_ID, "calculator", &json!({ "expression": expression }));
    Message::assistant_tool_calls(None, vec![call])
}

/// Whether the agent has already made a tool call in `history`.
fn has_called_tool(history: &[Message]) -> bool {
    history
        .iter()
        .any(|m| m.role == Role::Assistant && !m.tool_calls.is_empty())
}

/// The calculator's result in `history`: the text of the last tool message, when it is a
/// plain number (an error message is not a result).
fn tool_result(history: &[Message]) -> Option<&str> {
    history
        .iter()
        .rev()
        .find(|m| m.role == Role::Tool)
        .map(|m| m.text().trim())
        .filter(|text| answer::is_plain_number(text))
}

/// The reply of a solver that cannot read its task.
fn unreadable_task(error: &agentrl_core::Error) -> Message {
    Message::assistant(format!("I cannot read this task: {error}"))
}

/// The correct reference solver: calls the calculator once, then answers with its result.
///
/// Should the tool answer with an error, it computes the expression itself.
#[derive(Debug, Clone, Copy, Default)]
pub struct ArithExpert;

impl Solver for ArithExpert {
    fn act(&mut self, task: &Task, history: &[Message]) -> Message {
        let problem = match ArithProblem::from_task(task) {
            Ok(p) => p,
            Err(e) => return unreadable_task(&e),
        };
        if let Some(result) = tool_result(history) {
            return Message::assistant(result);
        }
        if has_called_tool(history) {
            // `from_task` evaluated the expression itself, so its answer is our own computation.
            return Message::assistant(problem.answer.to_string());
        }
        call_calculator(&problem.expression)
    }
}

/// Knob: probability of using the calculator on a two-operand task.
const TOOL_PROB_TWO_OPERANDS: &str = "tool_prob_two_operands";
/// Knob: probability of using the calculator on a three-operand task.
const TOOL_PROB_THREE_OPERANDS: &str = "tool_prob_three_operands";
/// Knob: probability of miscopying one digit of the calculator's result.
const COPY_ERROR_PROB: &str = "copy_error_prob";

/// The knobs of [`ArithDemonstrator::from_knobs`] (name, doc).
pub const ARITH_DEMONSTRATOR_KNOBS: &[KnobDoc] = &[
    (
        TOOL_PROB_TWO_OPERANDS,
        "probability of using the calculator on a two-operand task (default 1)",
    ),
    (
        TOOL_PROB_THREE_OPERANDS,
        "probability of using the calculator on a three-operand task (default 1)",
    ),
    (
        COPY_ERROR_PROB,
        "probability of miscopying one digit of the calculator's result (default 0)",
    ),
];

/// A noisy demonstrator for supervised warm starts.
///
/// An SFT warm start on perfect demonstrations would leave RL little to learn; this one is
/// right only as often as its probabilities allow, so the fine-tuned model starts with room to
/// improve. Once per task (on its first turn) it decides whether to use the calculator, with a
/// probability that depends on the number of operands. Without the tool it answers from memory,
/// `My guess: N`, with a wrong `N` (the true answer with one digit changed, never accidentally
/// right) — a habit that starts with its own words, so a cloned policy keeps it even under
/// greedy decoding; with the tool it calls
/// the calculator like [`ArithExpert`] and copies the result, changing one digit with
/// probability `copy_error_prob`. Probabilities outside `[0, 1]` act as the nearest bound.
#[derive(Debug, Clone)]
pub struct ArithDemonstrator {
    /// Probability of using the tool on a two-operand task.
    pub tool_prob_two_operands: f64,
    /// Probability of using the tool on a three-operand task.
    pub tool_prob_three_operands: f64,
    /// Probability of miscopying one digit of the tool's result.
    pub copy_error_prob: f64,
    /// Source of all its random choices.
    pub rng: SeededRng,
    /// For the task in progress (by id): whether it chose to use the tool.
    plan: PerTaskChoice<bool>,
}

impl ArithDemonstrator {
    /// A demonstrator with the given tool-use and miscopy probabilities, seeded by `seed`.
    pub fn new(
        seed: u64,
        tool_prob_two_operands: f64,
        tool_prob_three_operands: f64,
        copy_error_prob: f64,
    ) -> Self {
        ArithDemonstrator {
            tool_prob_two_operands,
            tool_prob_three_operands,
            copy_error_prob,
            rng: SeededRng::new(seed),
            plan: PerTaskChoice::default(),
        }
    }

    /// The demonstrator that `knobs` describe (see [`ARITH_DEMONSTRATOR_KNOBS`]), seeded by
    /// `seed`. A missing knob turns its imperfection off (tool probabilities `1`, miscopy
    /// probability `0`); an unknown knob or a value outside `[0, 1]` is an
    /// [`Error::Config`](agentrl_core::Error::Config) naming the knob.
    pub fn from_knobs(seed: u64, knobs: &DemonstratorKnobs) -> Result<Self> {
        reject_unknown_knobs(ARITH_CALC_ID, knobs, ARITH_DEMONSTRATOR_KNOBS)?;
        let knob = |name, default| probability_knob(ARITH_CALC_ID, knobs, name, default);
        Ok(ArithDemonstrator::new(
            seed,
            knob(TOOL_PROB_TWO_OPERANDS, 1.0)?,
            knob(TOOL_PROB_THREE_OPERANDS, 1.0)?,
            knob(COPY_ERROR_PROB, 0.0)?,
        ))
    }

    /// Whether to use the tool on `problem`: decided on the first turn, remembered after.
    fn uses_tool(&mut self, task: &Task, problem: &ArithProblem, history: &[Message]) -> bool {
        self.plan.decide(task, history, || {
            let p = if problem.operands <= 2 {
                self.tool_prob_two_operands
            } else {
                self.tool_prob_three_operands
            };
            self.rng.chance(p)
        })
    }
}

impl Solver for ArithDemonstrator {
    fn act(&mut self, task: &Task, history: &[Message]) -> Message {
        let problem = match ArithProblem::from_task(task) {
            Ok(p) => p,
            Err(e) => return unreadable_task(&e),
        };
        let true_answer = problem.answer.to_string();
        if !self.uses_tool(task, &problem, history) {
            let guess = change_one_digit(&true_answer, &mut self.rng).unwrap_or(true_answer);
            return Message::assistant(format!("My guess: {guess}"));
        }
        if !has_called_tool(history) {
            return call_calculator(&problem.expression);
        }
        let copied = tool_result(history).map_or(true_answer, str::to_string);
        if self.rng.chance(self.copy_error_prob) {
            let miscopied = change_one_digit(&copied, &mut self.rng).unwrap_or(copied);
            return Message::assistant(miscopied);
        }
        Message::assistant(copied)
    }
}

/// `number` with one of its digits replaced by a different one; the leading digit never
/// becomes `0` (unless it is the whole number), so the digit count and the value both change
/// and the text stays canonical (no `-0`, no `012`).
/// `None` when `number` has no digit.
fn change_one_digit(number: &str, rng: &mut SeededRng) -> Option<String> {
    let bytes = number.as_bytes();
    let positions: Vec<usize> = (0..bytes.len())
        .filter(|&i| bytes[i].is_ascii_digit())
        .collect();
    let &first = positions.first()?;
    let pos = positions[rng.range(0, positions.len() as i64 - 1) as usize];
    let old = bytes[pos];
    let leading = pos == first
        && (bytes.get(pos + 1).is_some_and(u8::is_ascii_digit)
            || (pos > 0 && bytes[pos - 1] == b'-'));
    let lowest = if leading { b'1' } else { b'0' };
    let choices: Vec<u8> = (lowest..=b'9').filter(|&d| d != old).collect();
    let new = choices[rng.range(0, choices.len() as i64 - 1) as usize];
    let mut out = String::with_capacity(number.len());
    out.push_str(&number[..pos]);
    out.push(char::from(new));
    out.push_str(&number[pos + 1..]);
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changed_digit_keeps_length_and_changes_value() {
        let mut rng = SeededRng::new(1);
        for n in [0i64, 7, 10, 99, 10181, -5, -100, 999_999_999] {
            let text = n.to_string();
            for _ in 0..50 {
                let changed = change_one_digit(&text, &mut rng).unwrap();
                assert_eq!(changed.len(), text.len());
                let value: i64 = changed.parse().unwrap();
                assert_ne!(value, n);
                assert_eq!(value.to_string(), changed, "no new leading zero");
                let differing = text.bytes().zip(changed.bytes()).filter(|(a, b)| a != b);
                assert_eq!(differing.count(), 1);
            }
        }
        assert_eq!(change_one_digit("abc", &mut rng), None);
    }
}
