//! Word problems: templates, seeded generation, split assignment and the round trip to and
//! from a [`Task`].

use agentrl_core::{Error, Result, SeededRng, Split, Task};
use serde_json::json;

use super::MATH_REASONING_ID;
use crate::session::{draw_in_split, split_of_text};

/// Names of the people in the problems.
const NAMES: [&str; 8] = ["Ann", "Ben", "Dee", "Eli", "Fay", "Gus", "Ida", "Max"];
/// Things they count (plural by an added `s`).
const ITEMS: [&str; 7] = ["apple", "pear", "card", "shell", "stamp", "marble", "egg"];

/// One problem template: how to draw its numbers, state it, solve it and show the work.
struct Template {
    /// How many numbers it uses.
    arity: usize,
    /// Draws the numbers `[a, b, c, ...]`.
    draw: fn(&mut SeededRng) -> Vec<i64>,
    /// States the problem for a name, an item and the numbers.
    text: fn(&str, &str, &[i64]) -> String,
    /// The answer, `None` when the numbers do not fit the template.
    answer: fn(&[i64]) -> Option<i64>,
    /// The computation as a short chain such as `12+3*5-7=20`.
    work: fn(&[i64], i64) -> String,
}

/// Number of templates.
pub const TEMPLATE_COUNT: usize = 6;

/// The templates, indexed by [`MathProblem::template`].
const TEMPLATES: [Template; TEMPLATE_COUNT] = [
    Template {
        arity: 4,
        draw: |r| {
            let a = r.range(5, 30);
            vec![a, r.range(2, 5), r.range(2, 9), r.range(1, a)]
        },
        text: |n, i, p| {
            format!(
                "{n} has {} {i}s, buys {} bags of {}, gives away {}. How many {i}s now?",
                p[0], p[1], p[2], p[3]
            )
        },
        answer: |p| Some(p[0] + p[1] * p[2] - p[3]),
        work: |p, x| format!("{}+{}*{}-{}={x}", p[0], p[1], p[2], p[3]),
    },
    Template {
        arity: 3,
        draw: |r| {
            let a = r.range(3, 12);
            vec![a, r.range(2, 6), r.range(1, a)]
        },
        text: |n, i, p| {
            format!(
                "A box holds {} {i}s. {n} fills {} boxes, then eats {}. How many {i}s are left?",
                p[0], p[1], p[2]
            )
        },
        answer: |p| Some(p[0] * p[1] - p[2]),
        work: |p, x| format!("{}*{}-{}={x}", p[0], p[1], p[2]),
    },
    Template {
        arity: 3,
        draw: |r| {
            let (a, b) = (r.range(5, 20), r.range(2, 7));
            vec![a, b, r.range(1, a * b - 1)]
        },
        text: |n, _, p| {
            format!(
                "{n} earns {} coins a day for {} days, then spends {}. How many coins are left?",
                p[0], p[1], p[2]
            )
        },
        answer: |p| Some(p[0] * p[1] - p[2]),
        work: |p, x| format!("{}*{}-{}={x}", p[0], p[1], p[2]),
    },
    Template {
        arity: 3,
        draw: |r| {
            let (a, b) = (r.range(2, 12), r.range(2, 6));
            vec![a * b, b, r.range(1, 9)]
        },
        text: |n, i, p| {
            format!(
                "{n} splits {} {i}s into {} even groups, adds {} to each. How many {i}s per group?",
                p[0], p[1], p[2]
            )
        },
        answer: |p| (p[1] > 0 && p[0] % p[1] == 0).then(|| p[0] / p[1] + p[2]),
        work: |p, x| format!("{}/{}+{}={x}", p[0], p[1], p[2]),
    },
    Template {
        arity: 3,
        draw: |r| vec![r.range(5, 30), r.range(2, 9), r.range(1, 40)],
        text: |n, _, p| {
            format!(
                "{n} reads {} pages a day. After {} days, {} are left. How many pages in the book?",
                p[0], p[1], p[2]
            )
        },
        answer: |p| Some(p[0] * p[1] + p[2]),
        work: |p, x| format!("{}*{}+{}={x}", p[0], p[1], p[2]),
    },
    Template {
        arity: 2,
        draw: |r| {
            let a = r.range(5, 30);
            vec![a, r.range(1, a - 1)]
        },
        text: |n, i, p| {
            format!(
                "{n} had {} {i}s, lost {}, then doubled the rest. How many {i}s now?",
                p[0], p[1]
            )
        },
        answer: |p| Some(2 * (p[0] - p[1])),
        work: |p, x| format!("({}-{})*2={x}", p[0], p[1]),
    },
];

/// One word problem: its template, the name, item and numbers it uses, and its answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MathProblem {
    /// Index of the template.
    pub template: usize,
    /// Name of the person.
    pub name: String,
    /// The counted item (singular).
    pub item: String,
    /// The template's numbers.
    pub numbers: Vec<i64>,
    /// The problem as shown to the agent.
    pub question: String,
    /// The exact answer.
    pub answer: i64,
}

/// The split a question belongs to: test iff its stable hash is divisible by 5.
pub fn split_of(question: &str) -> Split {
    split_of_text(question)
}

impl MathProblem {
    /// Builds the problem of `template` with `name`, `item` and `numbers`; `None` when the
    /// template does not exist, the numbers do not fit it or the answer is negative.
    pub fn build(template: usize, name: &str, item: &str, numbers: Vec<i64>) -> Option<Self> {
        let t = TEMPLATES.get(template)?;
        if numbers.len() != t.arity || numbers.iter().any(|n| !(0..=10_000).contains(n)) {
            return None;
        }
        let answer = (t.answer)(&numbers).filter(|a| *a >= 0)?;
        Some(MathProblem {
            template,
            question: (t.text)(name, item, &numbers),
            name: name.to_string(),
            item: item.to_string(),
            numbers,
            answer,
        })
    }

    /// Problem `index` of `split` for generator `seed`: candidates drawn from
    /// `SeededRng::from_parts(&[seed, split, index, attempt])` until one falls in `split`.
    pub fn generate(seed: u64, split: Split, index: u64) -> Self {
        draw_in_split(seed, split, index, |rng| {
            let template = rng.range(0, TEMPLATE_COUNT as i64 - 1) as usize;
            let name = rng.choose(&NAMES).copied().unwrap_or("Ann");
            let item = rng.choose(&ITEMS).copied().unwrap_or("apple");
            let numbers = (TEMPLATES[template].draw)(rng);
            MathProblem::build(template, name, item, numbers)
                .filter(|p| split_of(&p.question) == split)
        })
    }

    /// The worked solution, e.g. `12+3*5-7=20` (its last number is the answer).
    pub fn work(&self) -> String {
        (TEMPLATES[self.template].work)(&self.numbers, self.answer)
    }

    /// Reads the problem back from a task made by [`MathProblem::to_task`], checking that the
    /// stored question and answer follow from the template and numbers.
    pub fn from_task(task: &Task) -> Result<Self> {
        let bad = |why: &str| Error::env(MATH_REASONING_ID, format!("task `{}`: {why}", task.id));
        if task.env_id != MATH_REASONING_ID {
            return Err(bad(&format!("belongs to env `{}`", task.env_id)));
        }
        let d = &task.data;
        let text = |key: &str| d.get(key).and_then(|v| v.as_str());
        let template = d.get("template").and_then(|v| v.as_u64());
        let numbers: Option<Vec<i64>> = d
            .get("numbers")
            .and_then(|v| v.as_array())
            .and_then(|a| a.iter().map(|n| n.as_i64()).collect());
        let (Some(template), Some(name), Some(item), Some(numbers)) =
            (template, text("name"), text("item"), numbers)
        else {
            return Err(bad("data needs template, name, item and numbers"));
        };
        let problem = usize::try_from(template)
            .ok()
            .and_then(|t| MathProblem::build(t, name, item, numbers))
            .ok_or_else(|| bad("the numbers do not fit the template"))?;
        let stored_answer = text("answer").and_then(|a| a.parse::<i64>().ok());
        if text("question") != Some(problem.question.as_str())
            || stored_answer != Some(problem.answer)
        {
            return Err(bad("question or answer does not match the template"));
        }
        Ok(problem)
    }

    /// The task for this problem, with id `{split}-{index}`.
    pub fn to_task(&self, split: Split, index: u64) -> Task {
        Task {
            env_id: MATH_REASONING_ID.to_string(),
            id: format!("{split}-{index}"),
            split,
            data: json!({
                "question": self.question,
                "answer": self.answer.to_string(),
                "template": self.template,
                "name": self.name,
                "item": self.item,
                "numbers": self.numbers,
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_template_generates_valid_problems() {
        let mut seen = [0usize; TEMPLATE_COUNT];
        for index in 0..400 {
            for split in [Split::Train, Split::Test] {
                let p = MathProblem::generate(1, split, index);
                seen[p.template] += 1;
                assert!(p.answer >= 0);
                assert!(crate::answer::answer_matches(&p.work(), p.answer));
                let task = p.to_task(split, index);
                assert_eq!(MathProblem::from_task(&task).unwrap(), p);
            }
        }
        assert!(seen.iter().all(|&n| n > 50), "{seen:?}");
    }

    #[test]
    fn first_template_reads_as_documented() {
        let p = MathProblem::build(0, "Ann", "apple", vec![12, 3, 5, 7]).unwrap();
        assert_eq!(
            p.question,
            "Ann has 12 apples, buys 3 bags of 5, gives away 7. How many apples now?"
        );
        assert_eq!(p.answer, 20);
        assert_eq!(p.work(), "12+3*5-7=20");
    }

    #[test]
    fn rejects_inconsistent_tasks() {
        let mut task = MathProblem::generate(0, Split::Train, 0).to_task(Split::Train, 0);
        task.data["answer"] = json!("-1");
        assert!(MathProblem::from_task(&task).is_err());
        task.data = json!({"template": 3, "name": "A", "item": "x", "numbers": [7, 2, 1]});
        assert!(MathProblem::from_task(&task).is_err());
        assert!(MathProblem::build(99, "A", "x", vec![]).is_none());
    }
}
