//! Why an arithmetic expression could not be evaluated.

/// An evaluation error; positions are 0-based character offsets into the expression.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CalcError {
    /// The expression contains nothing but whitespace.
    #[error("empty expression")]
    Empty,
    /// A character that is not part of the arithmetic language.
    #[error("unexpected character '{ch}' at position {position}")]
    UnexpectedCharacter {
        /// The offending character.
        ch: char,
        /// Where it is.
        position: usize,
    },
    /// A valid token in a place where it makes no sense (e.g. `1 2`, `*3`).
    #[error("unexpected '{token}' at position {position}")]
    UnexpectedToken {
        /// The token's text.
        token: String,
        /// Where it starts.
        position: usize,
    },
    /// The expression stops where an operand was expected (e.g. `1+`).
    #[error("unexpected end of expression: expected a number or '('")]
    UnexpectedEnd,
    /// A `(` that is never closed, or a `)` that closes nothing.
    #[error("unbalanced parenthesis at position {position}")]
    UnbalancedParenthesis {
        /// Where the unmatched parenthesis is.
        position: usize,
    },
    /// A division whose divisor evaluates to zero.
    #[error("division by zero at position {position}")]
    DivisionByZero {
        /// Where the `/` is.
        position: usize,
    },
    /// A literal with too many digits to be represented exactly.
    #[error("number too large at position {position}")]
    NumberTooLarge {
        /// Where the literal starts.
        position: usize,
    },
    /// An intermediate result whose numerator or denominator does not fit in 128 bits.
    #[error("number too large: the result of the operator at position {position} overflows")]
    Overflow {
        /// Where the operator is.
        position: usize,
    },
    /// A malformed numeric literal (e.g. a lone `.`).
    #[error("invalid number at position {position}")]
    InvalidNumber {
        /// Where the literal starts.
        position: usize,
    },
    /// Parentheses nested deeper than the evaluator allows.
    #[error("expression nested too deeply at position {position} (at most {limit} levels)")]
    TooDeep {
        /// Where the parenthesis that went too deep is.
        position: usize,
        /// The nesting limit.
        limit: usize,
    },
}
