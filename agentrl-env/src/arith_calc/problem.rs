//! Arithmetic problems: random expressions, their exact values, split assignment and the
//! round trip to and from a [`Task`].

use std::fmt;

use agentrl_core::{Error, Result, SeededRng, Split, Task};
use serde_json::json;

use super::ARITH_CALC_ID;
use crate::session::draw_in_split;

/// Smallest operand a generated expression uses.
const MIN_OPERAND: i64 = 10;
/// Largest operand a generated expression uses.
const MAX_OPERAND: i64 = 99;

/// A binary operator of an expression.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// Addition, `+`.
    Add,
    /// Subtraction, `-`.
    Sub,
    /// Multiplication, `*` (binds tighter than `+` and `-`).
    Mul,
}

impl Op {
    /// All operators, in the order the generator indexes them.
    pub const ALL: [Op; 3] = [Op::Add, Op::Sub, Op::Mul];

    /// The operator's symbol.
    pub fn symbol(self) -> char {
        match self {
            Op::Add => '+',
            Op::Sub => '-',
            Op::Mul => '*',
        }
    }

    /// The operator written as `symbol`, if any.
    pub fn from_symbol(symbol: char) -> Option<Op> {
        Op::ALL.into_iter().find(|op| op.symbol() == symbol)
    }
}

/// A flat expression `n (op n)*` of non-negative integers, evaluated with the usual precedence.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Expression {
    first: i64,
    rest: Vec<(Op, i64)>,
}

impl Expression {
    /// A random expression: 2 or 3 operands (equally likely) in `10..=99`, uniform operators.
    pub fn random(rng: &mut SeededRng) -> Self {
        let operands = rng.range(2, 3);
        let first = rng.range(MIN_OPERAND, MAX_OPERAND);
        let rest = (1..operands)
            .map(|_| {
                let op = Op::ALL[rng.range(0, Op::ALL.len() as i64 - 1) as usize];
                (op, rng.range(MIN_OPERAND, MAX_OPERAND))
            })
            .collect();
        Expression { first, rest }
    }

    /// Parses text such as `347*29+118` (whitespace is ignored); `None` when it is not of
    /// that form or an operand does not fit in an `i64`.
    pub fn parse(text: &str) -> Option<Self> {
        let compact: String = text.chars().filter(|c| !c.is_whitespace()).collect();
        let mut first = None;
        let mut rest = Vec::new();
        let mut pending_op = None;
        let mut chars = compact.char_indices().peekable();
        while let Some((start, c)) = chars.next() {
            if c.is_ascii_digit() {
                let mut end = start + 1;
                while let Some(&(i, d)) = chars.peek() {
                    if !d.is_ascii_digit() {
                        break;
                    }
                    end = i + 1;
                    chars.next();
                }
                let value: i64 = compact[start..end].parse().ok()?;
                match (first, pending_op.take()) {
                    (None, None) => first = Some(value),
                    (Some(_), Some(op)) => rest.push((op, value)),
                    _ => return None,
                }
            } else {
                let op = Op::from_symbol(c)?;
                if first.is_none() || pending_op.replace(op).is_some() {
                    return None;
                }
            }
        }
        if pending_op.is_some() {
            return None;
        }
        Some(Expression {
            first: first?,
            rest,
        })
    }

    /// Number of operands.
    pub fn operand_count(&self) -> usize {
        1 + self.rest.len()
    }

    /// The exact value (`*` before `+`/`-`, left to right); `None` on `i64` overflow.
    pub fn value(&self) -> Option<i64> {
        let mut sum: i64 = 0;
        let mut term = self.first;
        for &(op, n) in &self.rest {
            match op {
                Op::Mul => term = term.checked_mul(n)?,
                Op::Add => {
                    sum = sum.checked_add(term)?;
                    term = n;
                }
                Op::Sub => {
                    sum = sum.checked_add(term)?;
                    term = n.checked_neg()?;
                }
            }
        }
        sum.checked_add(term)
    }
}

impl fmt::Display for Expression {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.first)?;
        for (op, n) in &self.rest {
            write!(f, "{}{n}", op.symbol())?;
        }
        Ok(())
    }
}

/// The split an expression text belongs to: test iff its stable hash is divisible by 5.
pub fn split_of(expression: &str) -> Split {
    crate::session::split_of_text(expression)
}

/// One `arith-calc` problem: the expression shown to the agent and its exact answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArithProblem {
    /// The expression text, without spaces (e.g. `347*29+118`).
    pub expression: String,
    /// Its exact value.
    pub answer: i64,
    /// Number of operands (2 or 3 for generated problems).
    pub operands: usize,
}

impl ArithProblem {
    /// Problem `index` of `split` for generator `seed`: candidates drawn from
    /// `SeededRng::from_parts(&[seed, split, index, attempt])` for `attempt = 0, 1, ...` until
    /// one falls in `split` (so train and test never share an expression).
    pub fn generate(seed: u64, split: Split, index: u64) -> Self {
        draw_in_split(seed, split, index, |rng| {
            let candidate = Expression::random(rng);
            let expression = candidate.to_string();
            if split_of(&expression) != split {
                return None;
            }
            Some(ArithProblem {
                expression,
                answer: candidate.value()?,
                operands: candidate.operand_count(),
            })
        })
    }

    /// Reads the problem back from a task made by [`ArithProblem::to_task`], checking that
    /// the stored answer is the expression's value.
    pub fn from_task(task: &Task) -> Result<Self> {
        let bad = |why: String| Error::env(ARITH_CALC_ID, format!("task `{}`: {why}", task.id));
        if task.env_id != ARITH_CALC_ID {
            return Err(bad(format!("belongs to env `{}`", task.env_id)));
        }
        let expression = task
            .data
            .get("expression")
            .and_then(|v| v.as_str())
            .ok_or_else(|| bad("data has no string field `expression`".into()))?;
        let parsed = Expression::parse(expression)
            .ok_or_else(|| bad(format!("`{expression}` is not an arithmetic expression")))?;
        let answer = parsed
            .value()
            .ok_or_else(|| bad(format!("`{expression}` overflows 64-bit integers")))?;
        let stored = match task.data.get("answer") {
            Some(serde_json::Value::String(s)) => s.trim().parse::<i64>().ok(),
            Some(v) => v.as_i64(),
            None => None,
        };
        if stored != Some(answer) {
            return Err(bad(format!(
                "data field `answer` must be the expression's value {answer}"
            )));
        }
        Ok(ArithProblem {
            expression: expression.to_string(),
            answer,
            operands: parsed.operand_count(),
        })
    }

    /// The task for this problem, with id `{split}-{index}`.
    pub fn to_task(&self, split: Split, index: u64) -> Task {
        Task {
            env_id: ARITH_CALC_ID.to_string(),
            id: format!("{split}-{index}"),
            split,
            data: json!({
                "expression": self.expression,
                "answer": self.answer.to_string(),
                "operands": self.operands,
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn precedence_and_round_trip() {
        let e = Expression::parse("347*29+118").unwrap();
        assert_eq!(e.value(), Some(10181));
        assert_eq!(e.to_string(), "347*29+118");
        assert_eq!(Expression::parse("10-20*3").unwrap().value(), Some(-50));
        assert_eq!(Expression::parse("100-20-30").unwrap().value(), Some(50));
        assert_eq!(Expression::parse(" 12 + 5 ").unwrap().value(), Some(17));
    }

    #[test]
    fn rejects_malformed_expressions() {
        for bad in ["", "+1", "1+", "1++2", "1/2", "a", "99999999999999999999"] {
            assert!(Expression::parse(bad).is_none(), "{bad}");
        }
    }

    #[test]
    fn generated_problems_are_well_formed() {
        for index in 0..300 {
            for split in [Split::Train, Split::Test] {
                let p = ArithProblem::generate(3, split, index);
                assert!(p.operands == 2 || p.operands == 3);
                assert_eq!(split_of(&p.expression), split);
                let e = Expression::parse(&p.expression).unwrap();
                assert_eq!(e.value(), Some(p.answer));
                assert!(!p.expression.contains(' '));
                let task = p.to_task(split, index);
                assert_eq!(ArithProblem::from_task(&task).unwrap(), p);
            }
        }
    }

    #[test]
    fn from_task_rejects_inconsistent_data() {
        let mut task = ArithProblem::generate(0, Split::Train, 0).to_task(Split::Train, 0);
        task.data["answer"] = json!("1");
        assert!(ArithProblem::from_task(&task).is_err());
        task.data = json!({});
        assert!(ArithProblem::from_task(&task).is_err());
    }
}
