//! Reading a score out of whatever a judge model wrote.

/// The range a judge is asked to grade in; scores are normalised from it to `[0, 1]`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ScoreScale {
    /// Worst grade.
    pub min: f64,
    /// Best grade (greater than `min`).
    pub max: f64,
}

impl Default for ScoreScale {
    /// Grades from 0 to 10.
    fn default() -> Self {
        ScoreScale {
            min: 0.0,
            max: 10.0,
        }
    }
}

impl ScoreScale {
    /// `value` mapped from `[min, max]` to `[0, 1]`, or `None` outside the scale.
    pub fn normalise(&self, value: f64) -> Option<f64> {
        let span = self.max - self.min;
        // `span > 0` is false for NaN bounds too.
        let valid_span = span > 0.0;
        if !valid_span || !(self.min..=self.max).contains(&value) {
            return None;
        }
        Some((value - self.min) / span)
    }
}

/// Words that announce a grade ("Score: 7", "rating = 4", "my grade is 8").
const CUES: [&str; 9] = [
    "score", "scored", "rating", "rate", "rated", "grade", "graded", "mark", "verdict",
];
/// Filler words allowed between a cue and its number.
const FILLERS: [&str; 5] = ["is", "of", "be", "was", "would"];

/// A number found in the text, with its byte range.
#[derive(Debug, Clone, Copy)]
struct Number {
    value: f64,
    start: usize,
    end: usize,
}

/// How much a candidate reading is trusted; the strongest, then the last, wins.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Strength {
    Plain,
    Percent,
    Marked,
    Cued,
}

/// The judge's grade in `text`, normalised to `[0, 1]`, or `None` when there is no usable one.
///
/// Readings, from most to least trusted (the last of the most trusted kind wins):
///
/// 1. a number after a cue word: `Score: 7`, `rating = 4/5`, `my grade is **8**`;
/// 2. a fraction or a bold number: `7/10`, `8 out of 10`, `**8**`;
/// 3. a percentage: `70%`;
/// 4. any other number: `I'd say 0.7`.
///
/// Fractions and percentages are normalised by themselves, other numbers by `scale`;
/// readings that fall outside `[0, 1]` after normalisation are ignored, as are numbers glued
/// to letters (`gpt4`, `3rd`).
pub fn parse_score(text: &str, scale: &ScoreScale) -> Option<f64> {
    let bytes = text.as_bytes();
    let lower = text.to_ascii_lowercase();
    let numbers = find_numbers(text);
    let mut best: Option<(Strength, f64)> = None;
    let mut skip_next = false;
    for (i, n) in numbers.iter().enumerate() {
        if std::mem::take(&mut skip_next) {
            continue;
        }
        let cued = cued(lower.as_bytes(), n.start);
        let (reading, strength) = if let Some(d) = denominator(&lower, n, numbers.get(i + 1)) {
            // The denominator is part of this reading, never a reading of its own.
            skip_next = true;
            ((d > 0.0).then(|| n.value / d), Strength::Marked)
        } else if next_non_space(bytes, n.end) == Some(b'%') {
            (Some(n.value / 100.0), Strength::Percent)
        } else if bold(bytes, n) {
            (scale.normalise(n.value), Strength::Marked)
        } else {
            (scale.normalise(n.value), Strength::Plain)
        };
        let strength = if cued { Strength::Cued } else { strength };
        let Some(value) = reading.filter(|v| (0.0..=1.0).contains(v)) else {
            continue;
        };
        if best.is_none_or(|(s, _)| strength >= s) {
            best = Some((strength, value));
        }
    }
    best.map(|(_, value)| value)
}

/// Every number in `text` (optional sign, digits, optional fraction part).
fn find_numbers(text: &str) -> Vec<Number> {
    let b = text.as_bytes();
    let digit = |i: usize| b.get(i).is_some_and(u8::is_ascii_digit);
    let letter = |i: Option<usize>| {
        i.and_then(|i| b.get(i))
            .is_some_and(u8::is_ascii_alphabetic)
    };
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let starts = digit(i) || (b[i] == b'.' && digit(i + 1));
        if !starts || (i > 0 && (digit(i - 1) || b[i - 1] == b'.')) {
            i += 1;
            continue;
        }
        let mut start = i;
        let mut end = i;
        while digit(end) {
            end += 1;
        }
        if b.get(end) == Some(&b'.') && digit(end + 1) {
            end += 1;
            while digit(end) {
                end += 1;
            }
        }
        let signed = start > 0
            && b[start - 1] == b'-'
            && (start < 2 || !b[start - 2].is_ascii_alphanumeric());
        if signed {
            start -= 1;
        }
        let glued = letter(start.checked_sub(1)) || letter(Some(end));
        if !glued && let Ok(value) = text[start..end].parse::<f64>() {
            out.push(Number { value, start, end });
        }
        i = end.max(i + 1);
    }
    out
}

/// The first byte at or after `from` that is not whitespace.
fn next_non_space(b: &[u8], from: usize) -> Option<u8> {
    b.get(from..)?
        .iter()
        .copied()
        .find(|c| !c.is_ascii_whitespace())
}

/// When `n` is the numerator of `n/d` or `n out of d` (markdown stars allowed around the
/// slash), the denominator `d`.
fn denominator(lower: &str, n: &Number, next: Option<&Number>) -> Option<f64> {
    let next = next?;
    let between = lower.get(n.end..next.start)?;
    let between = between.trim_matches(|c: char| c.is_ascii_whitespace() || c == '*');
    let joined = between == "/" || between.split_whitespace().eq(["out", "of"]);
    joined.then_some(next.value)
}

/// Whether `n` is written in bold (`**8**` or `__8__`).
fn bold(b: &[u8], n: &Number) -> bool {
    let before = n.start >= 2 && matches!(&b[n.start - 2..n.start], b"**" | b"__");
    let after = matches!(b.get(n.end..n.end + 2), Some(b"**" | b"__"));
    before && after
}

/// Whether a cue word precedes the number starting at `start`, separated only by punctuation
/// such as `:`, `=`, `*`, `(` and at most one filler word (`is`, `of`, ...).
fn cued(lower: &[u8], start: usize) -> bool {
    let is_sep = |c: u8| c.is_ascii_whitespace() || b":=*#_\"'([-".contains(&c);
    let skip_seps = |mut i: usize| {
        while i > 0 && is_sep(lower[i - 1]) {
            i -= 1;
        }
        i
    };
    // The start of the word that ends at `i`.
    let word_start = |i: usize| {
        let mut j = i;
        while j > 0 && lower[j - 1].is_ascii_alphabetic() {
            j -= 1;
        }
        j
    };
    let is_one_of = |words: &[&str], word: &[u8]| words.iter().any(|w| w.as_bytes() == word);
    let mut end = skip_seps(start);
    let mut begin = word_start(end);
    if is_one_of(&FILLERS, &lower[begin..end]) {
        end = skip_seps(begin);
        begin = word_start(end);
    }
    is_one_of(&CUES, &lower[begin..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ten(text: &str) -> Option<f64> {
        parse_score(text, &ScoreScale::default())
    }

    fn unit(text: &str) -> Option<f64> {
        parse_score(text, &ScoreScale { min: 0.0, max: 1.0 })
    }

    fn close(got: Option<f64>, want: f64) -> bool {
        got.is_some_and(|g| (g - want).abs() < 1e-9)
    }

    #[test]
    fn plain_and_cued_numbers() {
        assert!(close(ten("7"), 0.7));
        assert!(close(ten("Score: 7"), 0.7));
        assert!(close(ten("score:7"), 0.7));
        assert!(close(ten("SCORE = 9.5"), 0.95));
        assert!(close(ten("My final grade is 8."), 0.8));
        assert!(close(ten("Rating: (6)"), 0.6));
        assert!(close(ten("I would rate it a 4"), 0.4));
        assert!(close(ten("scored 3, accurate 9"), 0.3));
        assert!(close(unit("I'd say 0.7"), 0.7));
        assert!(close(unit("I'd say .7"), 0.7));
        assert!(close(ten("I'd say 0.7"), 0.07));
    }

    #[test]
    fn fractions_percentages_and_bold() {
        assert!(close(ten("Score: 7/10"), 0.7));
        assert!(close(ten("7 / 10"), 0.7));
        assert!(close(ten("**8**"), 0.8));
        assert!(close(ten("Score: **8**/10"), 0.8));
        assert!(close(ten("Rating: 4 out of 5"), 0.8));
        assert!(close(ten("3 out of 4 steps were right"), 0.75));
        assert!(close(ten("about 85%"), 0.85));
        assert!(close(ten("85 %"), 0.85));
        assert!(close(ten("__6__"), 0.6));
    }

    #[test]
    fn the_most_trusted_then_the_last_reading_wins() {
        // A cued grade beats numbers in the reasoning.
        assert!(close(ten("47*83 = 3901, 2 steps. Score: 9"), 0.9));
        assert!(close(ten("Score: 9. It took 2 turns."), 0.9));
        // Among equals the last wins (judges conclude at the end).
        assert!(close(ten("First 3, then on reflection 6"), 0.6));
        // A fraction beats a plain number.
        assert!(close(ten("8/10, used 3 tools"), 0.8));
        // Out-of-scale numbers are ignored.
        assert!(close(ten("The answer 3901 is right. 9"), 0.9));
        // A scale description does not count as a grade.
        assert!(close(ten("On a 1-10 scale, score: 8"), 0.8));
    }

    #[test]
    fn negative_scales() {
        let s = ScoreScale {
            min: -5.0,
            max: 5.0,
        };
        assert!(close(parse_score("score: -3", &s), 0.2));
        assert!(close(parse_score("score: 5", &s), 1.0));
        // A dash between numbers is not a sign.
        assert!(close(parse_score("between 2-4", &s), 0.9));
    }

    #[test]
    fn nonsense_gives_none() {
        for text in [
            "",
            "   ",
            "No idea, sorry.",
            "\u{fffd}\u{fffd}<|end|>x#q",
            "Score: eleven",
            "Score: 11/10",
            "Score: 12",
            "gpt4 says yes",
            "the 3rd one",
            "150%",
            "-",
            ".",
            "1/0",
            "0/0",
            "Score: -1",
            "ünïcödé ✓ 🙂",
        ] {
            assert_eq!(ten(text), None, "{text:?}");
        }
    }

    #[test]
    fn unicode_around_numbers_is_safe() {
        assert!(close(ten("Note — ✓ Score: 7 🙂"), 0.7));
        assert!(close(ten("«8»"), 0.8));
    }

    #[test]
    fn scale_normalisation() {
        let s = ScoreScale { min: 1.0, max: 5.0 };
        assert_eq!(s.normalise(1.0), Some(0.0));
        assert_eq!(s.normalise(5.0), Some(1.0));
        assert_eq!(s.normalise(3.0), Some(0.5));
        assert_eq!(s.normalise(0.5), None);
        assert_eq!(ScoreScale { min: 1.0, max: 1.0 }.normalise(1.0), None);
        assert_eq!(s.normalise(f64::NAN), None);
    }
}
