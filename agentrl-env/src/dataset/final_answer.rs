//! Reading the final answer out of the agent's last message, the way the single-answer envs
//! do: the last `\boxed{...}`, else what follows the last `Answer:` (or `####`), else the
//! whole message; and the number helpers of the `numeric` checker.

use crate::answer::last_number;

/// Markers after which the rest of the line is the answer, most specific first.
const ANSWER_MARKERS: &[&str] = &["final answer:", "answer:", "####"];

/// The final answer in `message`: the content of its last `\boxed{...}`, else the rest of the
/// line after its last answer marker (`Final answer:`, `Answer:`, `####`, any case), else the
/// whole message; trimmed.
pub fn extract_final_answer(message: &str) -> &str {
    if let Some(boxed) = last_boxed(message) {
        return boxed.trim();
    }
    let lower = message.to_ascii_lowercase();
    for marker in ANSWER_MARKERS {
        if let Some(at) = lower.rfind(marker) {
            let rest = &message[at + marker.len()..];
            let line = rest.lines().next().unwrap_or("");
            if !line.trim().is_empty() {
                return line.trim();
            }
        }
    }
    message.trim()
}

/// The content of the last `\boxed{...}` in `text`, braces balanced; `None` when there is none
/// or it is not closed.
fn last_boxed(text: &str) -> Option<&str> {
    let start = text.rfind("\\boxed{")? + "\\boxed{".len();
    let mut depth = 1usize;
    for (offset, c) in text[start..].char_indices() {
        match c {
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    return Some(&text[start..start + offset]);
                }
            }
            _ => {}
        }
    }
    None
}

/// `text` compared loosely: trimmed, a trailing period dropped, runs of whitespace made one
/// space, lower case.
pub fn normalize(text: &str) -> String {
    let trimmed = text.trim();
    let trimmed = trimmed.strip_suffix('.').unwrap_or(trimmed);
    trimmed
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .to_lowercase()
}

/// `text` read as one number, allowing thousands commas, a leading `$` and a trailing `%`
/// (e.g. `"$1,234.50"`); `None` when it is anything else.
pub fn parse_number(text: &str) -> Option<f64> {
    let t = text.trim();
    let t = t.strip_prefix('$').unwrap_or(t);
    let t = t.strip_suffix('%').unwrap_or(t);
    let plain: String = t.chars().filter(|c| *c != ',').collect();
    if plain.is_empty() || last_number(&plain) != Some(plain.as_str()) {
        return None;
    }
    plain.parse().ok()
}

/// The value of the last number in `text` (thousands commas allowed).
pub fn last_number_in(text: &str) -> Option<f64> {
    let plain = without_thousands_commas(text);
    last_number(&plain).and_then(|n| n.parse().ok())
}

/// `text` with the commas between digit groups removed (`1,234` -> `1234`).
fn without_thousands_commas(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let digit = |i: usize| chars.get(i).is_some_and(char::is_ascii_digit);
    chars
        .iter()
        .enumerate()
        .filter(|&(i, c)| !(*c == ',' && i > 0 && digit(i - 1) && digit(i + 1)))
        .map(|(_, c)| *c)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_final_answer() {
        assert_eq!(
            extract_final_answer("so \\boxed{\\frac{1}{2}} done"),
            "\\frac{1}{2}"
        );
        assert_eq!(extract_final_answer("work...\nAnswer: 42\n"), "42");
        assert_eq!(extract_final_answer("6*7\n#### 42"), "42");
        assert_eq!(extract_final_answer("Final answer: Paris."), "Paris.");
        assert_eq!(extract_final_answer("  just this  "), "just this");
        assert_eq!(extract_final_answer("\\boxed{open"), "\\boxed{open");
    }

    #[test]
    fn reads_numbers() {
        assert_eq!(parse_number("1,234.5"), Some(1234.5));
        assert_eq!(parse_number("$18"), Some(18.0));
        assert_eq!(parse_number("-3"), Some(-3.0));
        assert_eq!(parse_number("18 apples"), None);
        assert_eq!(last_number_in("it costs $1,234 in total"), Some(1234.0));
        assert_eq!(normalize("  New   York. "), "new york");
    }
}
