//! A tokenizer for Rust source, just fine enough to find module paths: identifiers, `::`,
//! single punctuation characters and opaque literals, each with its line number. Comments
//! (nested block comments included) are dropped; strings, raw strings, byte strings, chars and
//! numbers become [`Tok::Literal`], so nothing inside them is mistaken for code.

/// What a token is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Tok {
    /// An identifier or keyword (raw identifiers without their `r#`).
    Ident(String),
    /// `::`.
    PathSep,
    /// Any other single punctuation character.
    Punct(char),
    /// A lifetime or label such as `'a`.
    Lifetime,
    /// A string, char or number literal.
    Literal,
}

/// A token and the 1-based line it starts on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Token {
    /// What it is.
    pub tok: Tok,
    /// Its line.
    pub line: u32,
}

impl Token {
    /// Whether this is the identifier or keyword `word`.
    pub fn is_ident(&self, word: &str) -> bool {
        matches!(&self.tok, Tok::Ident(w) if w == word)
    }

    /// Whether this is the punctuation character `c`.
    pub fn is_punct(&self, c: char) -> bool {
        self.tok == Tok::Punct(c)
    }

    /// The identifier, if this is one.
    pub fn ident(&self) -> Option<&str> {
        match &self.tok {
            Tok::Ident(w) => Some(w),
            _ => None,
        }
    }
}

/// Splits `src` into tokens.
pub fn tokenize(src: &str) -> Vec<Token> {
    let chars: Vec<char> = src.chars().collect();
    let mut lexer = Lexer {
        chars: &chars,
        at: 0,
        line: 1,
    };
    let mut tokens = Vec::new();
    while let Some(token) = lexer.next_token() {
        tokens.push(token);
    }
    tokens
}

/// The state of [`tokenize`].
struct Lexer<'a> {
    /// The whole source.
    chars: &'a [char],
    /// Index of the next character.
    at: usize,
    /// Line of the next character.
    line: u32,
}

impl Lexer<'_> {
    /// The character `ahead` places after the next one.
    fn peek(&self, ahead: usize) -> Option<char> {
        self.chars.get(self.at + ahead).copied()
    }

    /// Consumes one character.
    fn bump(&mut self) -> Option<char> {
        let c = self.peek(0)?;
        self.at += 1;
        if c == '\n' {
            self.line += 1;
        }
        Some(c)
    }

    /// The next token, skipping whitespace and comments; `None` at the end.
    fn next_token(&mut self) -> Option<Token> {
        loop {
            let c = self.peek(0)?;
            if c.is_whitespace() {
                self.bump();
            } else if c == '/' && self.peek(1) == Some('/') {
                while self.peek(0).is_some_and(|c| c != '\n') {
                    self.bump();
                }
            } else if c == '/' && self.peek(1) == Some('*') {
                self.block_comment();
            } else {
                break;
            }
        }
        let line = self.line;
        let c = self.peek(0)?;
        let tok = if let Some(hashes) = self.raw_string_start() {
            self.raw_string(hashes);
            Tok::Literal
        } else if c == 'r' && self.peek(1) == Some('#') && self.peek(2).is_some_and(is_ident_start)
        {
            self.bump();
            self.bump();
            Tok::Ident(self.ident())
        } else if (c == 'b' || c == 'c') && self.peek(1) == Some('"') {
            self.bump();
            self.quoted('"');
            Tok::Literal
        } else if c == 'b' && self.peek(1) == Some('\'') {
            self.bump();
            self.quoted('\'');
            Tok::Literal
        } else if is_ident_start(c) {
            Tok::Ident(self.ident())
        } else if c.is_ascii_digit() {
            while self
                .peek(0)
                .is_some_and(|c| c.is_alphanumeric() || c == '_')
            {
                self.bump();
            }
            Tok::Literal
        } else if c == '"' {
            self.quoted('"');
            Tok::Literal
        } else if c == '\'' {
            self.char_or_lifetime()
        } else if c == ':' && self.peek(1) == Some(':') {
            self.bump();
            self.bump();
            Tok::PathSep
        } else {
            self.bump();
            Tok::Punct(c)
        };
        Some(Token { tok, line })
    }

    /// Skips a (possibly nested) block comment starting at `/*`.
    fn block_comment(&mut self) {
        self.bump();
        self.bump();
        let mut depth = 1;
        while depth > 0 {
            match (self.peek(0), self.peek(1)) {
                (Some('/'), Some('*')) => {
                    self.bump();
                    self.bump();
                    depth += 1;
                }
                (Some('*'), Some('/')) => {
                    self.bump();
                    self.bump();
                    depth -= 1;
                }
                (Some(_), _) => {
                    self.bump();
                }
                (None, _) => return,
            }
        }
    }

    /// If a raw string (`r"`, `r#"`, `br#"`, `cr"`) starts here: the number of its `#`s.
    fn raw_string_start(&self) -> Option<usize> {
        let mut ahead = match (self.peek(0), self.peek(1)) {
            (Some('b' | 'c'), Some('r')) => 2,
            (Some('r'), _) => 1,
            _ => return None,
        };
        let mut hashes = 0;
        while self.peek(ahead) == Some('#') {
            hashes += 1;
            ahead += 1;
        }
        (self.peek(ahead) == Some('"')).then_some(hashes)
    }

    /// Consumes a raw string with `hashes` hashes.
    fn raw_string(&mut self, hashes: usize) {
        while self.bump().is_some_and(|c| c != '"') {}
        loop {
            match self.bump() {
                None => return,
                Some('"') if (0..hashes).all(|i| self.peek(i) == Some('#')) => {
                    for _ in 0..hashes {
                        self.bump();
                    }
                    return;
                }
                Some(_) => {}
            }
        }
    }

    /// Consumes a quoted literal with backslash escapes, starting at its opening `quote`.
    fn quoted(&mut self, quote: char) {
        self.bump();
        while let Some(c) = self.bump() {
            if c == '\\' {
                self.bump();
            } else if c == quote {
                return;
            }
        }
    }

    /// A char literal (`'a'`, `'\n'`, `'\u{1F600}'`) or a lifetime (`'a`), starting at `'`.
    fn char_or_lifetime(&mut self) -> Tok {
        if self.peek(1) == Some('\\') || self.peek(2) == Some('\'') {
            self.quoted('\'');
            return Tok::Literal;
        }
        self.bump();
        while self.peek(0).is_some_and(is_ident_continue) {
            self.bump();
        }
        Tok::Lifetime
    }

    /// Consumes an identifier.
    fn ident(&mut self) -> String {
        let mut word = String::new();
        while let Some(c) = self.peek(0).filter(|&c| is_ident_continue(c)) {
            word.push(c);
            self.bump();
        }
        word
    }
}

/// Whether `c` can start an identifier.
fn is_ident_start(c: char) -> bool {
    c == '_' || c.is_alphabetic()
}

/// Whether `c` can continue an identifier.
fn is_ident_continue(c: char) -> bool {
    c == '_' || c.is_alphanumeric()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The tokens as short strings: identifiers as they are, `::`, punctuation, `'a`, `lit`.
    fn words(src: &str) -> Vec<String> {
        tokenize(src)
            .into_iter()
            .map(|t| match t.tok {
                Tok::Ident(w) => w,
                Tok::PathSep => "::".to_string(),
                Tok::Punct(c) => c.to_string(),
                Tok::Lifetime => "'a".to_string(),
                Tok::Literal => "lit".to_string(),
            })
            .collect()
    }

    #[test]
    fn drops_comments_and_keeps_paths() {
        assert_eq!(
            words("use crate::a::B; // crate::x\n/* crate::y /* nested */ */ super::c"),
            [
                "use", "crate", "::", "a", "::", "B", ";", "super", "::", "c"
            ]
        );
    }

    #[test]
    fn strings_chars_and_raw_strings_are_opaque() {
        assert_eq!(
            words(
                r####"f("crate::a", r#"crate::"b"#, b"x", '"', '\'', 'c', br##"y"##, 1_000u8)"####
            ),
            [
                "f", "(", "lit", ",", "lit", ",", "lit", ",", "lit", ",", "lit", ",", "lit", ",",
                "lit", ",", "lit", ")"
            ]
        );
    }

    #[test]
    fn lifetimes_are_not_chars() {
        assert_eq!(
            words("fn f<'a>(x: &'a str) -> char { 'x' }"),
            [
                "fn", "f", "<", "'a", ">", "(", "x", ":", "&", "'a", "str", ")", "-", ">", "char",
                "{", "lit", "}"
            ]
        );
    }

    #[test]
    fn raw_identifiers_lose_their_prefix_and_lines_are_counted() {
        let tokens = tokenize("a\n/* x\n y */ r#type\n\"two\nlines\" z");
        let lines: Vec<(Option<&str>, u32)> = tokens.iter().map(|t| (t.ident(), t.line)).collect();
        assert_eq!(
            lines,
            [(Some("a"), 1), (Some("type"), 3), (None, 4), (Some("z"), 5)]
        );
    }
}
