//! Reading a final answer out of free text and comparing it exactly with an integer.
//!
//! A number is an optional `-`, one or more ASCII digits and an optional `.digits` fraction.
//! The `-` counts as a sign only when it does not follow a digit, so in `5-3` the numbers are
//! `5` and `3`. Comparison is done on the decimal text, so it is exact for any length.

/// The last number in `text`, as written (e.g. `"10181"`, `"-12"`, `"3.50"`), if there is one.
pub fn last_number(text: &str) -> Option<&str> {
    let bytes = text.as_bytes();
    let mut last = None;
    let mut i = 0;
    while i < bytes.len() {
        let negative = bytes[i] == b'-'
            && bytes.get(i + 1).is_some_and(u8::is_ascii_digit)
            && (i == 0 || !bytes[i - 1].is_ascii_digit());
        if !negative && !bytes[i].is_ascii_digit() {
            i += 1;
            continue;
        }
        let start = i;
        if negative {
            i += 1;
        }
        i = skip_digits(bytes, i);
        if bytes.get(i) == Some(&b'.') && bytes.get(i + 1).is_some_and(u8::is_ascii_digit) {
            i = skip_digits(bytes, i + 1);
        }
        last = Some(&text[start..i]);
    }
    last
}

/// Index of the first non-digit byte at or after `i`.
fn skip_digits(bytes: &[u8], mut i: usize) -> usize {
    while bytes.get(i).is_some_and(u8::is_ascii_digit) {
        i += 1;
    }
    i
}

/// Whether `number` (in the form [`last_number`] returns) has exactly the value `expected`.
///
/// `"10181"`, `"10181.0"` and `"010181"` all equal `10181`; `"-0"` equals `0`; anything that is
/// not a well-formed number is unequal.
pub fn number_equals(number: &str, expected: i64) -> bool {
    canonical_integer(number).is_some_and(|n| n == expected.to_string())
}

/// Whether the last number in `text` equals `expected` exactly.
pub fn answer_matches(text: &str, expected: i64) -> bool {
    last_number(text).is_some_and(|n| number_equals(n, expected))
}

/// Whether `text`, trimmed, is one whole number and nothing else.
pub fn is_plain_number(text: &str) -> bool {
    let trimmed = text.trim();
    !trimmed.is_empty() && last_number(trimmed) == Some(trimmed)
}

/// The integer `number` denotes, written without sign noise or leading zeros; `None` when it
/// has a non-zero fraction or is malformed.
fn canonical_integer(number: &str) -> Option<String> {
    let (negative, unsigned) = match number.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, number),
    };
    let (int_part, frac_part) = match unsigned.split_once('.') {
        Some((i, f)) => (i, Some(f)),
        None => (unsigned, None),
    };
    let all_digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if !all_digits(int_part) || frac_part.is_some_and(|f| !all_digits(f)) {
        return None;
    }
    if frac_part.is_some_and(|f| f.bytes().any(|b| b != b'0')) {
        return None;
    }
    let digits = int_part.trim_start_matches('0');
    Some(match (digits.is_empty(), negative) {
        (true, _) => "0".to_string(),
        (false, true) => format!("-{digits}"),
        (false, false) => digits.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_last_number() {
        assert_eq!(last_number("The answer is 10181."), Some("10181"));
        assert_eq!(last_number("-12"), Some("-12"));
        assert_eq!(last_number("2+3 = 5.50 ok"), Some("5.50"));
        assert_eq!(last_number("5-3"), Some("3"));
        assert_eq!(last_number("x -7"), Some("-7"));
        assert_eq!(last_number("no digits here"), None);
        assert_eq!(last_number(""), None);
        assert_eq!(last_number("ends with 4."), Some("4"));
    }

    #[test]
    fn compares_exactly() {
        assert!(number_equals("10181", 10181));
        assert!(number_equals("10181.0", 10181));
        assert!(number_equals("010181.000", 10181));
        assert!(number_equals("-0", 0));
        assert!(number_equals("-12", -12));
        assert!(!number_equals("10181.5", 10181));
        assert!(!number_equals("12", -12));
        assert!(!number_equals("99999999999999999999999", 10181));
        assert!(!number_equals("1.", 1));
    }

    #[test]
    fn plain_numbers() {
        assert!(is_plain_number(" 10181\n"));
        assert!(is_plain_number("-4"));
        assert!(!is_plain_number("error: 4"));
        assert!(!is_plain_number(""));
    }
}
