//! The checkers of a dataset row: how the agent's final answer is compared with the
//! reference. `exact`, `numeric`, `regex` and `contains` are decided here; `python` and
//! `shell` run a script in the sandbox (see `script`); `judge` leaves the verdict to the
//! reward's LLM judge.

use serde::{Deserialize, Serialize};

use super::final_answer::{last_number_in, normalize, parse_number};

/// Which checker decides a row.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CheckerKind {
    /// `numeric` when the reference is a number, else `exact`.
    #[default]
    Auto,
    /// The final answer equals the reference, ignoring case, surrounding space, repeated
    /// whitespace and a trailing period.
    Exact,
    /// The last number of the final answer is within the relative tolerance of the reference.
    Numeric,
    /// The final answer matches the reference read as a regex.
    Regex,
    /// The agent's whole final message contains the reference, ignoring case.
    Contains,
    /// A Python script in the sandbox decides (exit 0 = solved).
    Python,
    /// A shell script in the sandbox decides (exit 0 = solved).
    Shell,
    /// The reward's `llm_judge` grades the answer; the env reports no verdict.
    Judge,
}

/// The checker names, as options and checker columns spell them.
pub const CHECKER_NAMES: &[&str] = &[
    "auto", "exact", "numeric", "regex", "contains", "python", "shell", "judge",
];

impl CheckerKind {
    /// The checker named `name` (any case).
    pub fn from_name(name: &str) -> Option<Self> {
        serde_json::from_value(serde_json::Value::String(name.trim().to_lowercase())).ok()
    }

    /// Its name, as options spell it.
    pub fn name(self) -> &'static str {
        match self {
            CheckerKind::Auto => "auto",
            CheckerKind::Exact => "exact",
            CheckerKind::Numeric => "numeric",
            CheckerKind::Regex => "regex",
            CheckerKind::Contains => "contains",
            CheckerKind::Python => "python",
            CheckerKind::Shell => "shell",
            CheckerKind::Judge => "judge",
        }
    }

    /// Whether it runs a script in the sandbox.
    pub fn runs_script(self) -> bool {
        matches!(self, CheckerKind::Python | CheckerKind::Shell)
    }

    /// `auto` resolved for `reference`: `numeric` for a number, else `exact`; others as they
    /// are.
    pub fn resolve(self, reference: &str) -> Self {
        match self {
            CheckerKind::Auto if parse_number(reference).is_some() => CheckerKind::Numeric,
            CheckerKind::Auto => CheckerKind::Exact,
            other => other,
        }
    }
}

/// What a checker made of a final answer.
#[derive(Debug, Clone, PartialEq)]
pub struct Verdict {
    /// Solved or not; `None` when the env does not decide (the `judge` checker).
    pub success: Option<bool>,
    /// Why a wrong answer is wrong (shown in the step's `info.extra["feedback"]`).
    pub feedback: Option<String>,
}

impl Verdict {
    /// A solved answer.
    pub fn solved() -> Self {
        Verdict {
            success: Some(true),
            feedback: None,
        }
    }

    /// A wrong answer, with why.
    pub fn wrong(feedback: impl Into<String>) -> Self {
        Verdict {
            success: Some(false),
            feedback: Some(feedback.into()),
        }
    }

    /// No verdict: someone else (the LLM judge) decides.
    pub fn undecided() -> Self {
        Verdict {
            success: None,
            feedback: None,
        }
    }

    /// Solved when `ok`, else wrong with `feedback()`.
    fn from_test(ok: bool, feedback: impl FnOnce() -> String) -> Self {
        if ok {
            Verdict::solved()
        } else {
            Verdict::wrong(feedback())
        }
    }
}

/// The verdict of an in-process checker (`exact`, `numeric`, `regex`, `contains`; `auto` is
/// resolved first) on `answer` (the extracted final answer) out of the whole final `message`;
/// `None` for the checkers that run elsewhere (`python`, `shell`, `judge`).
pub fn check_in_process(
    kind: CheckerKind,
    reference: &str,
    answer: &str,
    message: &str,
    tolerance: f64,
) -> Option<Verdict> {
    let verdict = match kind.resolve(reference) {
        CheckerKind::Exact => Verdict::from_test(normalize(answer) == normalize(reference), || {
            format!("`{}` is not the reference answer", answer.trim())
        }),
        CheckerKind::Numeric => numeric_verdict(reference, answer, tolerance),
        CheckerKind::Regex => regex_verdict(reference, answer),
        CheckerKind::Contains => {
            let found = message
                .to_lowercase()
                .contains(&reference.trim().to_lowercase());
            Verdict::from_test(found, || "the reference answer is not in the reply".into())
        }
        CheckerKind::Auto | CheckerKind::Python | CheckerKind::Shell | CheckerKind::Judge => {
            return None;
        }
    };
    Some(verdict)
}

/// The `numeric` verdict: the last number of `answer` against the reference number.
fn numeric_verdict(reference: &str, answer: &str, tolerance: f64) -> Verdict {
    let Some(expected) = parse_number(reference) else {
        return Verdict::wrong(format!("the reference `{reference}` is not a number"));
    };
    let Some(given) = last_number_in(answer) else {
        return Verdict::wrong("no number found in the answer");
    };
    let close = (given - expected).abs() <= tolerance * expected.abs().max(1.0);
    Verdict::from_test(close, || {
        let side = if given > expected { "high" } else { "low" };
        format!("{given} is too {side}")
    })
}

/// The `regex` verdict: `answer` (trimmed) matches the reference pattern.
fn regex_verdict(pattern: &str, answer: &str) -> Verdict {
    match regex::Regex::new(pattern) {
        Ok(re) => Verdict::from_test(re.is_match(answer.trim()), || {
            "the answer does not match the expected pattern".into()
        }),
        Err(e) => Verdict::wrong(format!("the reference pattern is not a valid regex: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decide(kind: CheckerKind, reference: &str, answer: &str) -> Option<bool> {
        check_in_process(kind, reference, answer, answer, DEFAULT_TEST_TOLERANCE)
            .and_then(|v| v.success)
    }

    const DEFAULT_TEST_TOLERANCE: f64 = 1e-6;

    #[test]
    fn names_round_trip() {
        for name in CHECKER_NAMES {
            let kind = CheckerKind::from_name(name).expect(name);
            assert_eq!(kind.name(), *name);
        }
        assert_eq!(
            CheckerKind::from_name(" Numeric "),
            Some(CheckerKind::Numeric)
        );
        assert_eq!(CheckerKind::from_name("fuzzy"), None);
    }

    #[test]
    fn in_process_checkers() {
        assert_eq!(decide(CheckerKind::Exact, "Paris", " paris. "), Some(true));
        assert_eq!(decide(CheckerKind::Exact, "Paris", "Lyon"), Some(false));
        assert_eq!(
            decide(CheckerKind::Numeric, "1,000", "1000.0000001"),
            Some(true)
        );
        assert_eq!(decide(CheckerKind::Numeric, "72", "71"), Some(false));
        assert_eq!(decide(CheckerKind::Auto, "72", "it is 72"), Some(true));
        assert_eq!(decide(CheckerKind::Auto, "blue", "Blue"), Some(true));
        assert_eq!(
            decide(CheckerKind::Regex, "^[0-9]+ apples$", "12 apples"),
            Some(true)
        );
        assert_eq!(
            decide(CheckerKind::Regex, "^[0-9]+ apples$", "apples"),
            Some(false)
        );
        assert_eq!(
            decide(CheckerKind::Contains, "blue", "It is BLUE."),
            Some(true)
        );
        assert_eq!(decide(CheckerKind::Judge, "x", "y"), None);
    }
}
