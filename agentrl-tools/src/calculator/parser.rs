//! Recursive-descent evaluation of a token stream with the usual precedence.
//!
//! ```text
//! expr    := term (('+' | '-') term)*
//! term    := unary (('*' | '/') unary)*
//! unary   := ('+' | '-')* primary
//! primary := NUMBER | '(' expr ')'
//! ```

use super::lexer::{Kind, Token};
use super::{CalcError, Number};

/// Deepest parenthesis nesting accepted, so hostile input cannot exhaust the stack.
pub const MAX_DEPTH: usize = 200;

/// Evaluates a complete token stream.
pub(crate) fn evaluate_tokens(tokens: &[Token<'_>]) -> Result<Number, CalcError> {
    if tokens.is_empty() {
        return Err(CalcError::Empty);
    }
    let mut parser = Parser {
        tokens,
        next: 0,
        depth: 0,
    };
    let value = parser.expr()?;
    match parser.peek() {
        None => Ok(value),
        Some(t) if t.kind == Kind::RParen => Err(CalcError::UnbalancedParenthesis {
            position: t.position,
        }),
        Some(t) => Err(unexpected(t)),
    }
}

/// Cursor over the tokens.
struct Parser<'t, 'a> {
    tokens: &'t [Token<'a>],
    next: usize,
    depth: usize,
}

impl<'a> Parser<'_, 'a> {
    fn peek(&self) -> Option<Token<'a>> {
        self.tokens.get(self.next).copied()
    }

    fn bump(&mut self) -> Option<Token<'a>> {
        let t = self.peek()?;
        self.next += 1;
        Some(t)
    }

    fn expr(&mut self) -> Result<Number, CalcError> {
        let mut acc = self.term()?;
        while let Some(op) = self.peek() {
            let apply: fn(Number, Number) -> Option<Number> = match op.kind {
                Kind::Plus => Number::checked_add,
                Kind::Minus => Number::checked_sub,
                _ => break,
            };
            self.next += 1;
            let rhs = self.term()?;
            acc = apply(acc, rhs).ok_or(CalcError::Overflow {
                position: op.position,
            })?;
        }
        Ok(acc)
    }

    fn term(&mut self) -> Result<Number, CalcError> {
        let mut acc = self.unary()?;
        while let Some(op) = self.peek() {
            let is_div = match op.kind {
                Kind::Star => false,
                Kind::Slash => true,
                _ => break,
            };
            self.next += 1;
            let rhs = self.unary()?;
            let position = op.position;
            acc = if is_div {
                if rhs == Number::ZERO {
                    return Err(CalcError::DivisionByZero { position });
                }
                acc.checked_div(rhs)
            } else {
                acc.checked_mul(rhs)
            }
            .ok_or(CalcError::Overflow { position })?;
        }
        Ok(acc)
    }

    fn unary(&mut self) -> Result<Number, CalcError> {
        let mut negate = None;
        while let Some(t) = self.peek() {
            match t.kind {
                Kind::Minus => {
                    negate = if negate.is_some() {
                        None
                    } else {
                        Some(t.position)
                    }
                }
                Kind::Plus => {}
                _ => break,
            }
            self.next += 1;
        }
        let value = self.primary()?;
        match negate {
            Some(position) => value.checked_neg().ok_or(CalcError::Overflow { position }),
            None => Ok(value),
        }
    }

    fn primary(&mut self) -> Result<Number, CalcError> {
        let t = self.bump().ok_or(CalcError::UnexpectedEnd)?;
        match t.kind {
            Kind::Num(value) => Ok(value),
            Kind::LParen => {
                if self.depth >= MAX_DEPTH {
                    return Err(CalcError::TooDeep {
                        position: t.position,
                        limit: MAX_DEPTH,
                    });
                }
                self.depth += 1;
                let value = self.expr()?;
                self.depth -= 1;
                match self.bump() {
                    Some(close) if close.kind == Kind::RParen => Ok(value),
                    Some(other) => Err(unexpected(other)),
                    None => Err(CalcError::UnbalancedParenthesis {
                        position: t.position,
                    }),
                }
            }
            _ => Err(unexpected(t)),
        }
    }
}

/// The error for a token that does not fit where it is.
fn unexpected(t: Token<'_>) -> CalcError {
    CalcError::UnexpectedToken {
        token: t.text.to_string(),
        position: t.position,
    }
}
