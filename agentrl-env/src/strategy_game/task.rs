//! `strategy-game` tasks: a seeded opening of 0-4 random plies, the opponent's strength and
//! seed, with the split rule and reading a task back.

use agentrl_core::{Error, Result, Split, Task};
use serde_json::{Value, json};

use super::STRATEGY_GAME_ID;
use super::board::{Board, Piece};
use super::search::Opponent;
use crate::session::{draw_in_split, split_of_text};

/// One game to play.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Game {
    /// Columns (1-based) played before the agent's first move, alternating from X.
    pub opening: Vec<usize>,
    /// The scripted opponent.
    pub opponent: Opponent,
    /// Seed of the opponent's random choices.
    pub opponent_seed: u64,
}

impl Game {
    /// The position after the opening.
    pub fn board(&self) -> Board {
        let mut board = Board::default();
        for &column in &self.opening {
            let piece = board.to_move();
            board.drop_piece(column.wrapping_sub(1), piece);
        }
        board
    }

    /// The agent's pieces: whoever moves after the opening.
    pub fn agent(&self) -> Piece {
        self.board().to_move()
    }

    /// The text shown to the agent.
    pub fn prompt(&self) -> String {
        format!(
            "Connect Four on a 7x6 board against a scripted opponent. You play {} ({} plays {}). \
             Call the drop tool with a column from 1 to 7; the piece falls to the lowest free \
             cell. Four in a row (across, up or diagonal) wins.\n{}",
            self.agent().symbol(),
            self.opponent.name(),
            self.agent().other().symbol(),
            self.board().render()
        )
    }

    /// The task data.
    fn data(&self) -> Value {
        json!({
            "opening": self.opening,
            "agent": self.agent().symbol().to_string(),
            "opponent": self.opponent.name(),
            "opponent_seed": self.opponent_seed,
        })
    }
}

/// Game `index` of `split` against `opponent` for generator `seed`: openings drawn from
/// `SeededRng::from_parts(&[seed, split, index, attempt])` (none already won) until one falls
/// in `split`.
pub fn generate(seed: u64, opponent: Opponent, split: Split, index: u64) -> Game {
    draw_in_split(seed, split, index, |rng| {
        let plies = rng.range(0, 4);
        let mut board = Board::default();
        let mut opening = Vec::new();
        for _ in 0..plies {
            let column = rng.choose(&board.legal_columns()).copied().unwrap_or(3);
            let piece = board.to_move();
            board.drop_piece(column, piece);
            opening.push(column + 1);
        }
        let game = Game {
            opening,
            opponent,
            opponent_seed: rng.next_u64() % 1_000_000,
        };
        let in_split = split_of_text(&game.data().to_string()) == split;
        (board.winner().is_none() && in_split).then_some(game)
    })
}

/// The task for `game`, with id `{split}-{index}`.
pub fn to_task(game: &Game, split: Split, index: u64) -> Task {
    Task {
        env_id: STRATEGY_GAME_ID.to_string(),
        id: format!("{split}-{index}"),
        split,
        data: game.data(),
    }
}

/// The game of a task made by [`to_task`]; an error when the data is not such a game.
pub fn game_of(task: &Task) -> Result<Game> {
    let bad = |why: &str| Error::env(STRATEGY_GAME_ID, format!("task `{}`: {why}", task.id));
    if task.env_id != STRATEGY_GAME_ID {
        return Err(bad(&format!("belongs to env `{}`", task.env_id)));
    }
    let opening: Option<Vec<usize>> = task
        .data
        .get("opening")
        .and_then(Value::as_array)
        .and_then(|a| a.iter().map(|c| c.as_u64().map(|c| c as usize)).collect());
    let opening = opening.ok_or_else(|| bad("`opening` must be an array of columns"))?;
    let opponent = task.data.get("opponent").and_then(Value::as_str);
    let opponent = opponent
        .and_then(Opponent::parse)
        .ok_or_else(|| bad("`opponent` must be random, greedy or minimax-1..6"))?;
    let opponent_seed = task.data.get("opponent_seed").and_then(Value::as_u64);
    let opponent_seed = opponent_seed.ok_or_else(|| bad("`opponent_seed` must be a number"))?;
    let game = Game {
        opening,
        opponent,
        opponent_seed,
    };
    let mut board = Board::default();
    for &column in &game.opening {
        let piece = board.to_move();
        if !(1..=7).contains(&column) || board.drop_piece(column - 1, piece).is_none() {
            return Err(bad("the opening has an illegal move"));
        }
    }
    if board.winner().is_some() {
        return Err(bad("the opening is already won"));
    }
    Ok(game)
}
