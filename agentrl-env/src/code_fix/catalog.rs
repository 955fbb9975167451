//! The Python functions `code-fix` projects are made of: each with its correct source, the
//! line-level bugs that can be planted in it, and a seeded generator of unit-test cases whose
//! expected values are computed here in Rust (every bug fails at least one case).

use agentrl_core::SeededRng;

/// One test case: the call's argument list and the expected result, both as Python literals.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Case {
    /// Argument list, e.g. `5, 1, 10`.
    pub args: String,
    /// Expected value, e.g. `15`, `"b a"`, `True`.
    pub expected: String,
}

/// A function of the catalogue.
#[derive(Debug)]
pub struct Template {
    /// Function name.
    pub name: &'static str,
    /// The correct source, one line per entry, without trailing newlines.
    pub lines: &'static [&'static str],
    /// Plantable bugs: (correct line, buggy line), whole lines with indentation.
    pub bugs: &'static [(&'static str, &'static str)],
    /// Three seeded test cases.
    pub cases: fn(&mut SeededRng) -> Vec<Case>,
}

/// A case from displayable arguments and result.
fn case(args: impl ToString, expected: impl ToString) -> Case {
    Case {
        args: args.to_string(),
        expected: expected.to_string(),
    }
}

/// A Python boolean literal.
fn py_bool(b: bool) -> &'static str {
    if b { "True" } else { "False" }
}

/// Lowercase words with vowels, for the text functions.
const WORDS: &[&str] = &[
    "apple", "river", "stone", "cloud", "tiger", "lemon", "orbit", "piano", "uncle", "eagle",
];

/// A word from [`WORDS`].
fn word(rng: &mut SeededRng) -> &'static str {
    rng.choose(WORDS).copied().unwrap_or("apple")
}

fn sum_to_cases(rng: &mut SeededRng) -> Vec<Case> {
    (0..3)
        .map(|_| {
            let n = rng.range(2, 60);
            case(n, n * (n + 1) / 2)
        })
        .collect()
}

fn count_vowels_cases(rng: &mut SeededRng) -> Vec<Case> {
    (0..3)
        .map(|_| {
            let text = format!("{} {}", word(rng).to_uppercase(), word(rng));
            let n = text.chars().filter(|c| "aeiouAEIOU".contains(*c)).count();
            case(format!("{text:?}"), n)
        })
        .collect()
}

fn max_of_cases(rng: &mut SeededRng) -> Vec<Case> {
    (0..3)
        .map(|i| {
            let len = rng.range(4, 6) as usize;
            let mut values: Vec<i64> = (0..len).map(|_| rng.range(-50, 50)).collect();
            let top = values.iter().max().copied().unwrap_or(0) + rng.range(1, 9);
            // The maximum is never first; in the first case it is second.
            let at = if i == 0 {
                1
            } else {
                rng.range(1, len as i64 - 1) as usize
            };
            values[at] = top;
            let list: Vec<String> = values.iter().map(i64::to_string).collect();
            case(format!("[{}]", list.join(", ")), top)
        })
        .collect()
}

fn factorial_cases(rng: &mut SeededRng) -> Vec<Case> {
    let mut cases = vec![case(0, 1)];
    for _ in 0..2 {
        let n = rng.range(3, 12);
        cases.push(case(n, (1..=n).product::<i64>()));
    }
    cases
}

fn gcd_of(a: i64, b: i64) -> i64 {
    if b == 0 { a } else { gcd_of(b, a % b) }
}

fn gcd_cases(rng: &mut SeededRng) -> Vec<Case> {
    (0..3)
        .map(|_| {
            let k = rng.range(2, 12);
            let (a, b) = (k * rng.range(1, 20), k * rng.range(1, 20));
            case(format!("{a}, {b}"), gcd_of(a, b))
        })
        .collect()
}

fn reverse_words_cases(rng: &mut SeededRng) -> Vec<Case> {
    (0..3)
        .map(|_| {
            let words: Vec<&str> = (0..rng.range(2, 4)).map(|_| word(rng)).collect();
            let reversed: Vec<&str> = words.iter().rev().copied().collect();
            case(
                format!("{:?}", words.join(" ")),
                format!("{:?}", reversed.join(" ")),
            )
        })
        .collect()
}

fn is_palindrome_cases(rng: &mut SeededRng) -> Vec<Case> {
    let half = word(rng);
    let mirrored: String = half.chars().rev().collect();
    let mut first = mirrored.clone() + half;
    first[..1].make_ascii_uppercase();
    let plain = format!("{} {}", word(rng), word(rng));
    let is_pal = |t: &str| {
        let l: Vec<char> = t
            .chars()
            .filter(char::is_ascii_alphabetic)
            .map(|c| c.to_ascii_lowercase())
            .collect();
        l.iter().eq(l.iter().rev())
    };
    let other = format!("{}, {}", mirrored.to_uppercase(), half);
    [first, plain, other]
        .into_iter()
        .map(|t| {
            let p = is_pal(&t);
            case(format!("{t:?}"), py_bool(p))
        })
        .collect()
}

fn clamp_cases(rng: &mut SeededRng) -> Vec<Case> {
    let low = rng.range(-20, 10);
    let high = low + rng.range(5, 30);
    vec![
        case(format!("{}, {low}, {high}", low - rng.range(1, 9)), low),
        case(format!("{}, {low}, {high}", high + rng.range(1, 9)), high),
        case(format!("{}, {low}, {high}", low + 1), low + 1),
    ]
}

/// The catalogue.
pub const TEMPLATES: &[Template] = &[
    Template {
        name: "sum_to",
        lines: &[
            "def sum_to(n):",
            "    \"\"\"Return 1 + 2 + ... + n.\"\"\"",
            "    total = 0",
            "    for i in range(1, n + 1):",
            "        total += i",
            "    return total",
        ],
        bugs: &[
            ("    for i in range(1, n + 1):", "    for i in range(1, n):"),
            ("        total += i", "        total += 1"),
        ],
        cases: sum_to_cases,
    },
    Template {
        name: "count_vowels",
        lines: &[
            "def count_vowels(text):",
            "    \"\"\"Return how many letters of text are vowels (a, e, i, o, u, any case).\"\"\"",
            "    return sum(1 for c in text.lower() if c in \"aeiou\")",
        ],
        bugs: &[(
            "    return sum(1 for c in text.lower() if c in \"aeiou\")",
            "    return sum(1 for c in text if c in \"aeiou\")",
        )],
        cases: count_vowels_cases,
    },
    Template {
        name: "max_of",
        lines: &[
            "def max_of(values):",
            "    \"\"\"Return the largest number of a non-empty list.\"\"\"",
            "    best = values[0]",
            "    for v in values[1:]:",
            "        if v > best:",
            "            best = v",
            "    return best",
        ],
        bugs: &[
            ("        if v > best:", "        if v < best:"),
            ("    for v in values[1:]:", "    for v in values[2:]:"),
        ],
        cases: max_of_cases,
    },
    Template {
        name: "factorial",
        lines: &[
            "def factorial(n):",
            "    \"\"\"Return n! for n >= 0.\"\"\"",
            "    result = 1",
            "    for i in range(2, n + 1):",
            "        result *= i",
            "    return result",
        ],
        bugs: &[
            ("    for i in range(2, n + 1):", "    for i in range(2, n):"),
            ("    result = 1", "    result = 0"),
        ],
        cases: factorial_cases,
    },
    Template {
        name: "gcd",
        lines: &[
            "def gcd(a, b):",
            "    \"\"\"Return the greatest common divisor of two positive integers.\"\"\"",
            "    while b:",
            "        a, b = b, a % b",
            "    return a",
        ],
        bugs: &[("    return a", "    return b")],
        cases: gcd_cases,
    },
    Template {
        name: "reverse_words",
        lines: &[
            "def reverse_words(sentence):",
            "    \"\"\"Return the words of sentence in reverse order, separated by one space.\"\"\"",
            "    return \" \".join(reversed(sentence.split()))",
        ],
        bugs: &[(
            "    return \" \".join(reversed(sentence.split()))",
            "    return \"\".join(reversed(sentence.split()))",
        )],
        cases: reverse_words_cases,
    },
    Template {
        name: "is_palindrome",
        lines: &[
            "def is_palindrome(text):",
            "    \"\"\"Return True if text reads the same backwards, ignoring case and non-letters.\"\"\"",
            "    letters = [c.lower() for c in text if c.isalpha()]",
            "    return letters == letters[::-1]",
        ],
        bugs: &[(
            "    letters = [c.lower() for c in text if c.isalpha()]",
            "    letters = [c for c in text if c.isalpha()]",
        )],
        cases: is_palindrome_cases,
    },
    Template {
        name: "clamp",
        lines: &[
            "def clamp(x, low, high):",
            "    \"\"\"Return x limited to the range [low, high].\"\"\"",
            "    if x < low:",
            "        return low",
            "    if x > high:",
            "        return high",
            "    return x",
        ],
        bugs: &[
            ("        return high", "        return x"),
            ("    if x < low:", "    if x > low:"),
        ],
        cases: clamp_cases,
    },
];
