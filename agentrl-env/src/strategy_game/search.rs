//! Move choice for Connect Four: depth-limited negamax with alpha-beta pruning and a window
//! heuristic, and the scripted opponents built on it.

use agentrl_core::SeededRng;

use super::board::{Board, COLUMNS, Piece, ROWS, WINDOWS};

/// Score of a win (minus the plies it takes, so faster wins score higher).
const WIN: i64 = 1_000_000;

/// Columns in search order: centre first.
const ORDER: [usize; COLUMNS] = [3, 2, 4, 1, 5, 0, 6];

/// A scripted opponent's strength.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Opponent {
    /// A uniformly random legal column.
    Random,
    /// Wins when it can, blocks an immediate win of the agent, otherwise random.
    Greedy,
    /// Negamax to this depth (ties broken at random).
    Minimax(u8),
}

impl Opponent {
    /// The name used in configs and task data (`random`, `greedy`, `minimax-N`).
    pub fn name(self) -> String {
        match self {
            Opponent::Random => "random".into(),
            Opponent::Greedy => "greedy".into(),
            Opponent::Minimax(d) => format!("minimax-{d}"),
        }
    }

    /// The opponent called `name`; depths go from 1 to 6.
    pub fn parse(name: &str) -> Option<Opponent> {
        match name {
            "random" => Some(Opponent::Random),
            "greedy" => Some(Opponent::Greedy),
            _ => {
                let depth: u8 = name.strip_prefix("minimax-")?.parse().ok()?;
                (1..=6).contains(&depth).then_some(Opponent::Minimax(depth))
            }
        }
    }

    /// The column (0-based) this opponent plays for `piece` on `board` (which has a legal
    /// move), drawing any randomness from `rng`.
    pub fn choose(self, board: &Board, piece: Piece, rng: &mut SeededRng) -> usize {
        let legal = board.legal_columns();
        let random = |rng: &mut SeededRng| rng.choose(&legal).copied().unwrap_or(0);
        match self {
            Opponent::Random => random(rng),
            Opponent::Greedy => winning_column(board, piece)
                .or_else(|| winning_column(board, piece.other()))
                .unwrap_or_else(|| random(rng)),
            Opponent::Minimax(depth) => {
                let scored = scored_moves(board, piece, depth);
                let best = scored.iter().map(|&(_, s)| s).max().unwrap_or(0);
                let top: Vec<usize> = scored
                    .iter()
                    .filter(|&&(_, s)| s == best)
                    .map(|&(c, _)| c)
                    .collect();
                rng.choose(&top).copied().unwrap_or_else(|| random(rng))
            }
        }
    }
}

/// A column where `piece` wins at once, if any.
pub fn winning_column(board: &Board, piece: Piece) -> Option<usize> {
    let mut board = board.clone();
    board.legal_columns().into_iter().find(|&c| {
        let wins = board
            .drop_piece(c, piece)
            .is_some_and(|row| board.wins_at(row, c));
        board.undo(c);
        wins
    })
}

/// Each legal column with its negamax score for `piece` searched to `depth` plies.
pub fn scored_moves(board: &Board, piece: Piece, depth: u8) -> Vec<(usize, i64)> {
    let mut board = board.clone();
    let mut out = Vec::new();
    for column in ORDER {
        let Some(row) = board.drop_piece(column, piece) else {
            continue;
        };
        let score = if board.wins_at(row, column) {
            WIN
        } else {
            -negamax(
                &mut board,
                piece.other(),
                depth.saturating_sub(1),
                1,
                -WIN * 2,
                WIN * 2,
            )
        };
        board.undo(column);
        out.push((column, score));
    }
    out
}

/// The best column for `piece` by negamax to `depth` (centre-most among equals).
pub fn best_column(board: &Board, piece: Piece, depth: u8) -> Option<usize> {
    let scored = scored_moves(board, piece, depth);
    let best = scored.iter().map(|&(_, s)| s).max()?;
    scored.iter().find(|&&(_, s)| s == best).map(|&(c, _)| c)
}

/// Negamax value of `board` for `piece` to move, `ply` plies below the root.
fn negamax(board: &mut Board, piece: Piece, depth: u8, ply: i64, mut alpha: i64, beta: i64) -> i64 {
    if board.full() {
        return 0;
    }
    if depth == 0 {
        return heuristic(board, piece);
    }
    let mut best = -WIN * 2;
    for column in ORDER {
        let Some(row) = board.drop_piece(column, piece) else {
            continue;
        };
        let score = if board.wins_at(row, column) {
            WIN - ply
        } else {
            -negamax(board, piece.other(), depth - 1, ply + 1, -beta, -alpha)
        };
        board.undo(column);
        best = best.max(score);
        alpha = alpha.max(score);
        if alpha >= beta {
            break;
        }
    }
    best
}

/// Static value for `piece`: every window of four with pieces of one player only scores by
/// how full it is (3 in a window weighs most), plus a bonus for the centre column.
fn heuristic(board: &Board, piece: Piece) -> i64 {
    const WEIGHT: [i64; 5] = [0, 1, 8, 60, 60];
    let (own, other) = (board.mask(piece), board.mask(piece.other()));
    let mut score = 0;
    for window in WINDOWS {
        let mine = (window & own).count_ones() as usize;
        let theirs = (window & other).count_ones() as usize;
        if theirs == 0 {
            score += WEIGHT[mine];
        } else if mine == 0 {
            score -= WEIGHT[theirs];
        }
    }
    let centre: i64 = (0..ROWS)
        .filter_map(|r| board.at(r, 3))
        .map(|p| if p == piece { 1 } else { -1 })
        .sum();
    score + 3 * centre
}
