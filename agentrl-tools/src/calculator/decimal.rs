//! Decimal expansion of positive fractions without overflow.

/// Whether `d` has no prime factors other than 2 and 5, i.e. `n / d` has a finite decimal form.
pub(crate) fn terminates(mut d: u128) -> bool {
    if d == 0 {
        return false;
    }
    d >>= d.trailing_zeros();
    while d.is_multiple_of(5) {
        d /= 5;
    }
    d == 1
}

/// The exact decimal form of `n / d`; `d` must satisfy [`terminates`].
pub(crate) fn exact(n: u128, d: u128) -> String {
    let mut out = (n / d).to_string();
    let mut r = n % d;
    if r != 0 {
        out.push('.');
    }
    // `d = 2^a 5^b` ends after at most max(a, b) <= 128 digits; the bound guards misuse.
    for _ in 0..=128 {
        if r == 0 {
            break;
        }
        let (digit, rest) = next_digit(r, d);
        out.push(char::from(b'0' + digit));
        r = rest;
    }
    out
}

/// `n / d` (both positive) rounded half-up to `count` significant digits, trailing zeros
/// dropped; scientific notation when the decimal exponent is below -6 or above 10.
pub(crate) fn rounded(n: u128, d: u128, count: usize) -> String {
    let (digits, exp) = significant_digits(n, d, count);
    let sci = exp - 1;
    let text: String = digits.iter().map(|&x| char::from(b'0' + x)).collect();
    if !(-6..=10).contains(&sci) {
        let (first, rest) = text.split_at(1);
        return if rest.is_empty() {
            format!("{first}e{sci}")
        } else {
            format!("{first}.{rest}e{sci}")
        };
    }
    let len = text.len() as i32;
    if exp <= 0 {
        format!("0.{}{text}", "0".repeat(exp.unsigned_abs() as usize))
    } else if exp >= len {
        format!("{text}{}", "0".repeat((exp - len) as usize))
    } else {
        let (int, frac) = text.split_at(exp as usize);
        format!("{int}.{frac}")
    }
}

/// The first `count` significant digits of `n / d` (rounded half-up, trailing zeros dropped) and
/// the exponent `e` such that the value is `0.DIGITS × 10^e`.
fn significant_digits(n: u128, d: u128, count: usize) -> (Vec<u8>, i32) {
    let int = n / d;
    let mut r = n % d;
    let mut digits: Vec<u8> = if int == 0 {
        Vec::new()
    } else {
        int.to_string().bytes().map(|b| b - b'0').collect()
    };
    let mut exp = digits.len() as i32;
    // One digit beyond `count` decides the rounding; a non-terminating tail is never exactly 0.
    while digits.len() <= count && r != 0 {
        let (digit, rest) = next_digit(r, d);
        r = rest;
        if digits.is_empty() && digit == 0 {
            exp -= 1;
        } else {
            digits.push(digit);
        }
    }
    let round_up = digits.get(count).is_some_and(|&x| x >= 5);
    digits.truncate(count);
    if round_up {
        let mut i = digits.len();
        loop {
            if i == 0 {
                digits.insert(0, 1);
                digits.truncate(count);
                exp += 1;
                break;
            }
            i -= 1;
            if digits[i] == 9 {
                digits[i] = 0;
            } else {
                digits[i] += 1;
                break;
            }
        }
    }
    while digits.len() > 1 && digits.last() == Some(&0) {
        digits.pop();
    }
    (digits, exp)
}

/// `(10 r) / d` and `(10 r) % d` for `r < d`, without overflowing `u128`.
fn next_digit(r: u128, d: u128) -> (u8, u128) {
    if let Some(ten_r) = r.checked_mul(10) {
        // The quotient is below 10 because r < d.
        return ((ten_r / d) as u8, ten_r % d);
    }
    // Add `r` ten times modulo `d`, counting the wrap-arounds.
    let (mut acc, mut q) = (0u128, 0u8);
    let gap = d - r;
    for _ in 0..10 {
        if acc >= gap {
            acc -= gap;
            q += 1;
        } else {
            acc += r;
        }
    }
    (q, acc)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn terminating_denominators() {
        assert!(terminates(8) && terminates(20) && terminates(1));
        assert!(!terminates(3) && !terminates(14) && !terminates(0));
    }

    #[test]
    fn digit_step_without_overflow() {
        let d = 1u128 << 127;
        let r = d - 1;
        assert_eq!(next_digit(r, d), (9, d - 10));
        assert_eq!(next_digit(3, 7), (4, 2));
    }

    #[test]
    fn rounding_and_notation() {
        assert_eq!(rounded(1, 3, 12), "0.333333333333");
        assert_eq!(rounded(2, 3, 12), "0.666666666667");
        assert_eq!(rounded(1, 3_000_000_000, 12), "3.33333333333e-10");
        assert_eq!(rounded(100_000_000_000_000, 3, 12), "3.33333333333e13");
        assert_eq!(
            rounded(1_000_000_000_000_000 - 1, 1_000_000_000_000_003, 3),
            "1"
        );
        assert_eq!(exact(1, 8), "0.125");
        assert_eq!(exact(5, 4), "1.25");
    }
}
