//! Exact rational numbers over `i128` with checked arithmetic.

use std::fmt;

use super::decimal;

/// An exact rational number, always in lowest terms with a positive denominator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Number {
    numer: i128,
    denom: i128,
}

impl Number {
    /// Zero.
    pub const ZERO: Number = Number { numer: 0, denom: 1 };

    /// The integer `n`.
    pub const fn integer(n: i128) -> Self {
        Number { numer: n, denom: 1 }
    }

    /// The fraction `numer / denom` in lowest terms; `None` when `denom` is zero or the reduced
    /// fraction does not fit in `i128`.
    pub fn new(numer: i128, denom: i128) -> Option<Self> {
        if denom == 0 {
            return None;
        }
        let (n, d) = (numer.unsigned_abs(), denom.unsigned_abs());
        let g = gcd(n, d);
        from_magnitudes((numer < 0) != (denom < 0), n / g, d / g)
    }

    /// The numerator (carries the sign).
    pub const fn numer(&self) -> i128 {
        self.numer
    }

    /// The denominator (always positive).
    pub const fn denom(&self) -> i128 {
        self.denom
    }

    /// Whether the value is a whole number.
    pub const fn is_integer(&self) -> bool {
        self.denom == 1
    }

    /// The nearest `f64` (approximate for large or non-dyadic values).
    pub fn to_f64(&self) -> f64 {
        self.numer as f64 / self.denom as f64
    }

    /// `-self`, or `None` on overflow.
    pub fn checked_neg(self) -> Option<Self> {
        Some(Number {
            numer: self.numer.checked_neg()?,
            denom: self.denom,
        })
    }

    /// `self + other`, or `None` on overflow.
    pub fn checked_add(self, other: Self) -> Option<Self> {
        let g = gcd(self.denom.unsigned_abs(), other.denom.unsigned_abs());
        // Both denominators are positive i128, so their gcd fits in i128.
        let g = i128::try_from(g).ok()?;
        let (bg, dg) = (self.denom / g, other.denom / g);
        let denom = bg.checked_mul(other.denom)?;
        let numer = self
            .numer
            .checked_mul(dg)?
            .checked_add(other.numer.checked_mul(bg)?)?;
        Number::new(numer, denom)
    }

    /// `self - other`, or `None` on overflow.
    pub fn checked_sub(self, other: Self) -> Option<Self> {
        self.checked_add(other.checked_neg()?)
    }

    /// `self * other`, or `None` on overflow.
    pub fn checked_mul(self, other: Self) -> Option<Self> {
        // Cross-reduce first so that intermediate products stay as small as possible.
        let g1 = i128::try_from(gcd(self.numer.unsigned_abs(), other.denom.unsigned_abs())).ok()?;
        let g2 = i128::try_from(gcd(other.numer.unsigned_abs(), self.denom.unsigned_abs())).ok()?;
        let numer = (self.numer / g1).checked_mul(other.numer / g2)?;
        let denom = (self.denom / g2).checked_mul(other.denom / g1)?;
        Number::new(numer, denom)
    }

    /// `self / other`, or `None` when `other` is zero or on overflow.
    pub fn checked_div(self, other: Self) -> Option<Self> {
        let reciprocal = Number::new(other.denom, other.numer)?;
        self.checked_mul(reciprocal)
    }
}

impl From<i64> for Number {
    fn from(n: i64) -> Self {
        Number::integer(i128::from(n))
    }
}

/// Integers print as integers (`-42`); fractions whose denominator has only the prime factors 2
/// and 5 print as exact decimals (`0.125`); others print rounded to 12 significant digits
/// (`0.333333333333`), in scientific notation when very large or very small (`3.33333333333e14`).
impl fmt::Display for Number {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.numer < 0 {
            f.write_str("-")?;
        }
        let (n, d) = (self.numer.unsigned_abs(), self.denom.unsigned_abs());
        if d == 1 {
            return write!(f, "{n}");
        }
        if decimal::terminates(d) {
            f.write_str(&decimal::exact(n, d))
        } else {
            f.write_str(&decimal::rounded(n, d, SIGNIFICANT_DIGITS))
        }
    }
}

/// How many significant digits non-terminating fractions are shown with.
const SIGNIFICANT_DIGITS: usize = 12;

/// Greatest common divisor (`gcd(0, 0) == 0`).
fn gcd(mut a: u128, mut b: u128) -> u128 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

/// Builds a reduced number from a sign and magnitudes, checking they fit in `i128`.
fn from_magnitudes(negative: bool, n: u128, d: u128) -> Option<Number> {
    let denom = i128::try_from(d).ok()?;
    let numer = if negative && n != 0 {
        0i128.checked_sub_unsigned(n)?
    } else {
        i128::try_from(n).ok()?
    };
    Some(Number { numer, denom })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalises_sign_and_terms() {
        let x = Number::new(6, -8).unwrap();
        assert_eq!((x.numer(), x.denom()), (-3, 4));
        assert_eq!(Number::new(0, -5), Some(Number::ZERO));
        assert_eq!(Number::new(1, 0), None);
        assert_eq!(Number::new(i128::MIN, 1).unwrap().numer(), i128::MIN);
        assert_eq!(Number::new(1, i128::MIN), None);
        assert_eq!(Number::new(i128::MIN, i128::MIN), Some(Number::integer(1)));
    }

    #[test]
    fn checked_ops() {
        let half = Number::new(1, 2).unwrap();
        let third = Number::new(1, 3).unwrap();
        assert_eq!(half.checked_add(third), Number::new(5, 6));
        assert_eq!(half.checked_sub(third), Number::new(1, 6));
        assert_eq!(half.checked_mul(third), Number::new(1, 6));
        assert_eq!(half.checked_div(third), Number::new(3, 2));
        assert_eq!(half.checked_div(Number::ZERO), None);
        assert_eq!(
            Number::integer(i128::MAX).checked_add(Number::integer(1)),
            None
        );
        assert_eq!(Number::integer(i128::MIN).checked_neg(), None);
    }
}
