//! Parsing the agent's text commands.

use crate::maze::Direction;

/// One command of the adventure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// `go north` (or just `north`).
    Go(Direction),
    /// `take key`.
    Take(String),
    /// `drop key`.
    Drop(String),
    /// `open chest`.
    Open(String),
    /// `put key in chest`.
    Put(String, String),
    /// `look`.
    Look,
    /// `inventory`.
    Inventory,
}

/// Commands the agent may use, for error messages.
pub const USAGE: &str = "go DIR, take X, drop X, open X, put X in Y, look, inventory";

impl Command {
    /// Parses `text` (case-insensitive; `the`, `a` and a final `.` are ignored); the error
    /// says why it is not a command.
    pub fn parse(text: &str) -> Result<Command, String> {
        let lower = text.trim().trim_end_matches('.').to_lowercase();
        let words: Vec<&str> = lower
            .split_whitespace()
            .filter(|w| !matches!(*w, "the" | "a" | "an"))
            .collect();
        let command = match words.as_slice() {
            ["go" | "walk", d] | [d] if Direction::parse(d).is_some() => {
                Direction::parse(d).map(Command::Go)
            }
            ["take" | "get", x] => Some(Command::Take(x.to_string())),
            ["drop", x] => Some(Command::Drop(x.to_string())),
            ["open", x] => Some(Command::Open(x.to_string())),
            ["put", x, "in" | "into", y] => Some(Command::Put(x.to_string(), y.to_string())),
            ["look"] => Some(Command::Look),
            ["inventory" | "i"] => Some(Command::Inventory),
            _ => None,
        };
        command.ok_or_else(|| format!("unknown command {:?} (commands: {USAGE})", text.trim()))
    }

    /// The command as text, in the form [`Command::parse`] reads.
    pub fn text(&self) -> String {
        match self {
            Command::Go(d) => format!("go {}", d.name()),
            Command::Take(x) => format!("take {x}"),
            Command::Drop(x) => format!("drop {x}"),
            Command::Open(x) => format!("open {x}"),
            Command::Put(x, y) => format!("put {x} in {y}"),
            Command::Look => "look".into(),
            Command::Inventory => "inventory".into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_prints() {
        for text in [
            "go north",
            "take key",
            "drop gem",
            "open chest",
            "put key in chest",
            "look",
        ] {
            assert_eq!(Command::parse(text).unwrap().text(), text);
        }
        assert_eq!(
            Command::parse("Put the key into the chest.")
                .unwrap()
                .text(),
            "put key in chest"
        );
        assert_eq!(
            Command::parse("west").unwrap(),
            Command::Go(Direction::West)
        );
        for bad in ["", "go up", "dance", "put key", "take"] {
            assert!(Command::parse(bad).is_err(), "{bad}");
        }
    }
}
