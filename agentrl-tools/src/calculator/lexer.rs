//! Splits an expression into tokens, each with its character position.

use super::{CalcError, Number};

/// What a token is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// A numeric literal and its exact value.
    Num(Number),
    /// `+`.
    Plus,
    /// `-` (or `−`).
    Minus,
    /// `*` (or `×`).
    Star,
    /// `/` (or `÷`).
    Slash,
    /// `(`.
    LParen,
    /// `)`.
    RParen,
}

/// One token with where it is in the source.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Token<'a> {
    /// What it is.
    pub kind: Kind,
    /// 0-based character offset of its first character.
    pub position: usize,
    /// Its source text.
    pub text: &'a str,
}

/// Tokenises `src`, skipping whitespace.
pub(crate) fn tokenize(src: &str) -> Result<Vec<Token<'_>>, CalcError> {
    let mut tokens = Vec::new();
    let mut chars = src.char_indices().enumerate().peekable();
    while let Some((position, (start, ch))) = chars.next() {
        let kind = match ch {
            c if c.is_whitespace() => continue,
            '+' => Kind::Plus,
            '-' | '−' => Kind::Minus,
            '*' | '×' => Kind::Star,
            '/' | '÷' => Kind::Slash,
            '(' => Kind::LParen,
            ')' => Kind::RParen,
            '0'..='9' | '.' => {
                let mut end = start + ch.len_utf8();
                while let Some(&(_, (i, c))) = chars.peek() {
                    if !(c.is_ascii_digit() || c == '.') {
                        break;
                    }
                    end = i + c.len_utf8();
                    chars.next();
                }
                let text = &src[start..end];
                tokens.push(Token {
                    kind: Kind::Num(parse_literal(text, position)?),
                    position,
                    text,
                });
                continue;
            }
            ch => return Err(CalcError::UnexpectedCharacter { ch, position }),
        };
        tokens.push(Token {
            kind,
            position,
            text: &src[start..start + ch.len_utf8()],
        });
    }
    Ok(tokens)
}

/// The exact value of a literal made of ASCII digits and dots (`12`, `1.25`, `.5`, `3.`).
fn parse_literal(text: &str, position: usize) -> Result<Number, CalcError> {
    let (int, frac) = text.split_once('.').unwrap_or((text, ""));
    if let Some(dot) = frac.find('.') {
        return Err(CalcError::UnexpectedCharacter {
            ch: '.',
            position: position + int.len() + 1 + dot,
        });
    }
    if int.is_empty() && frac.is_empty() {
        return Err(CalcError::InvalidNumber { position });
    }
    let frac = frac.trim_end_matches('0');
    let too_large = CalcError::NumberTooLarge { position };
    let mut mantissa: i128 = 0;
    for b in int.bytes().chain(frac.bytes()) {
        mantissa = mantissa
            .checked_mul(10)
            .and_then(|m| m.checked_add(i128::from(b - b'0')))
            .ok_or_else(|| too_large.clone())?;
    }
    let scale = u32::try_from(frac.len())
        .ok()
        .and_then(|e| 10i128.checked_pow(e))
        .ok_or_else(|| too_large.clone())?;
    Number::new(mantissa, scale).ok_or(too_large)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literals() {
        assert_eq!(parse_literal("1.25", 0), Ok(Number::new(5, 4).unwrap()));
        assert_eq!(parse_literal(".5", 0), Ok(Number::new(1, 2).unwrap()));
        assert_eq!(parse_literal("3.", 0), Ok(Number::integer(3)));
        assert_eq!(
            parse_literal("2.500000000000000000000000000000000000000000", 0),
            Ok(Number::new(5, 2).unwrap())
        );
        assert_eq!(
            parse_literal(".", 4),
            Err(CalcError::InvalidNumber { position: 4 })
        );
        assert_eq!(
            parse_literal("1.2.3", 2),
            Err(CalcError::UnexpectedCharacter {
                ch: '.',
                position: 5
            })
        );
    }

    #[test]
    fn positions_count_characters() {
        let tokens = tokenize("× 12").unwrap();
        assert_eq!(tokens[0].kind, Kind::Star);
        assert_eq!((tokens[1].position, tokens[1].text), (2, "12"));
        assert_eq!(
            tokenize("1 + x"),
            Err(CalcError::UnexpectedCharacter {
                ch: 'x',
                position: 4
            })
        );
    }
}
