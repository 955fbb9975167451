//! The Connect Four board (7 columns, 6 rows): drops, wins, text rendering and reading a
//! rendered board back.

/// Columns of the board.
pub const COLUMNS: usize = 7;
/// Rows of the board.
pub const ROWS: usize = 6;

/// A player's pieces.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Piece {
    /// Moves first.
    X,
    /// Moves second.
    O,
}

impl Piece {
    /// The other player.
    pub fn other(self) -> Piece {
        match self {
            Piece::X => Piece::O,
            Piece::O => Piece::X,
        }
    }

    /// `X` or `O`.
    pub fn symbol(self) -> char {
        match self {
            Piece::X => 'X',
            Piece::O => 'O',
        }
    }

    /// The piece written `symbol`.
    pub fn parse(symbol: &str) -> Option<Piece> {
        match symbol {
            "X" => Some(Piece::X),
            "O" => Some(Piece::O),
            _ => None,
        }
    }
}

/// Bits per column in a [`Board`]'s masks: the column's rows and one empty guard bit above
/// them, so a shift that steps past the top of a column never lands on a piece.
const COLUMN_BITS: usize = ROWS + 1;

/// The shifts from a cell to its neighbour in each direction of four in a row: up a column,
/// along a row, up the rising and the falling diagonal.
const LINE_SHIFTS: [usize; 4] = [1, COLUMN_BITS, COLUMN_BITS + 1, COLUMN_BITS - 1];

/// The cells of rows `first..=last` in every column, as a mask of [`cell_bit`]s.
const fn rows_mask(first: usize, last: usize) -> u64 {
    let mut mask = 0;
    let mut column = 0;
    while column < COLUMNS {
        let mut row = first;
        while row <= last {
            mask |= cell_bit(row, column);
            row += 1;
        }
        column += 1;
    }
    mask
}

/// Every cell of the board (no guard bits).
const ON_BOARD: u64 = rows_mask(0, ROWS - 1);

/// The mask of every top cell: the board is full when both players hold all of them.
const TOP_ROW: u64 = rows_mask(ROWS - 1, ROWS - 1);

/// The bit of the cell at `row`, `column` in a [`Board`]'s masks.
const fn cell_bit(row: usize, column: usize) -> u64 {
    1 << (column * COLUMN_BITS + row)
}

/// Number of windows of four cells in a row on the board: 24 across, 21 up, 12 on each
/// diagonal.
const WINDOW_COUNT: usize = 69;

/// Every window of four cells in a row, as a mask of [`cell_bit`]s (the search heuristic's
/// terms), built once at compile time.
pub(crate) const WINDOWS: [u64; WINDOW_COUNT] = windows();

/// Builds [`WINDOWS`]: along each of [`LINE_SHIFTS`], every four bits in a row from a start
/// bit that lie on the board (a run that crosses a guard bit or leaves the board is none).
const fn windows() -> [u64; WINDOW_COUNT] {
    let mut out = [0; WINDOW_COUNT];
    let mut n = 0;
    let mut line = 0;
    while line < LINE_SHIFTS.len() {
        let shift = LINE_SHIFTS[line];
        let mut start = 0;
        while start + 3 * shift < u64::BITS as usize {
            let window = (1 << start)
                | (1 << (start + shift))
                | (1 << (start + 2 * shift))
                | (1 << (start + 3 * shift));
            if window & ON_BOARD == window {
                out[n] = window;
                n += 1;
            }
            start += 1;
        }
        line += 1;
    }
    assert!(n == WINDOW_COUNT, "a 6x7 board has 69 windows of four");
    out
}

/// A position, row 0 at the bottom: one bit mask per player (bit `7 · column + row`), so search
/// copies 16 bytes and finds fours with shifts.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct Board {
    /// The cells holding an `X`.
    x: u64,
    /// The cells holding an `O`.
    o: u64,
}

impl Board {
    /// The piece at `row` (0 = bottom), `column`; `None` for an empty cell or one off the
    /// board.
    pub fn at(&self, row: usize, column: usize) -> Option<Piece> {
        if row >= ROWS || column >= COLUMNS {
            return None;
        }
        let bit = cell_bit(row, column);
        if self.x & bit != 0 {
            Some(Piece::X)
        } else if self.o & bit != 0 {
            Some(Piece::O)
        } else {
            None
        }
    }

    /// The cells holding `piece`, as a mask of [`cell_bit`]s.
    pub(crate) fn mask(&self, piece: Piece) -> u64 {
        match piece {
            Piece::X => self.x,
            Piece::O => self.o,
        }
    }

    /// Puts `piece` (or nothing) at `row`, `column`, which are on the board.
    fn set(&mut self, row: usize, column: usize, piece: Option<Piece>) {
        let bit = cell_bit(row, column);
        self.x &= !bit;
        self.o &= !bit;
        match piece {
            Some(Piece::X) => self.x |= bit,
            Some(Piece::O) => self.o |= bit,
            None => {}
        }
    }

    /// Number of pieces on the board.
    pub fn pieces(&self) -> usize {
        (self.x | self.o).count_ones() as usize
    }

    /// The player to move (X moves first).
    pub fn to_move(&self) -> Piece {
        if self.pieces().is_multiple_of(2) {
            Piece::X
        } else {
            Piece::O
        }
    }

    /// Whether a piece can be dropped into `column` (0-based).
    pub fn can_drop(&self, column: usize) -> bool {
        column < COLUMNS && (self.x | self.o) & cell_bit(ROWS - 1, column) == 0
    }

    /// The columns that are not full, in order.
    pub fn legal_columns(&self) -> Vec<usize> {
        (0..COLUMNS).filter(|&c| self.can_drop(c)).collect()
    }

    /// Whether the board is full.
    pub fn full(&self) -> bool {
        (self.x | self.o) & TOP_ROW == TOP_ROW
    }

    /// The number of pieces in `column` (which is on the board): the row the next one lands
    /// in.
    fn height(&self, column: usize) -> usize {
        let column_mask = ((1u64 << ROWS) - 1) << (column * COLUMN_BITS);
        ((self.x | self.o) & column_mask).count_ones() as usize
    }

    /// Drops `piece` into `column` (0-based); the row it lands in, or `None` when the column
    /// is full or does not exist.
    pub fn drop_piece(&mut self, column: usize, piece: Piece) -> Option<usize> {
        if !self.can_drop(column) {
            return None;
        }
        let row = self.height(column);
        self.set(row, column, Some(piece));
        Some(row)
    }

    /// Removes the top piece of `column` (to undo a drop in search).
    pub fn undo(&mut self, column: usize) {
        if column < COLUMNS
            && let Some(row) = self.height(column).checked_sub(1)
        {
            self.set(row, column, None);
        }
    }

    /// Whether the piece at `row`, `column` is part of four in a row.
    pub fn wins_at(&self, row: usize, column: usize) -> bool {
        let Some(piece) = self.at(row, column) else {
            return false;
        };
        let own = self.mask(piece);
        let bit = cell_bit(row, column);
        LINE_SHIFTS.iter().any(|&shift| {
            // The first cells of fours along `shift`, then every cell of those fours.
            let starts = own & (own >> shift) & (own >> (2 * shift)) & (own >> (3 * shift));
            let cells = starts | starts << shift | starts << (2 * shift) | starts << (3 * shift);
            cells & bit != 0
        })
    }

    /// The player with four in a row, if any.
    pub fn winner(&self) -> Option<Piece> {
        (0..ROWS)
            .flat_map(|r| (0..COLUMNS).map(move |c| (r, c)))
            .find(|&(r, c)| self.wins_at(r, c))
            .and_then(|(r, c)| self.at(r, c))
    }

    /// The board as text: a header of column numbers, then one line per row, top first, with
    /// `.` for empty cells.
    pub fn render(&self) -> String {
        let mut text = String::from("1234567\n");
        for row in (0..ROWS).rev() {
            let line: String = (0..COLUMNS)
                .map(|column| self.at(row, column).map_or('.', Piece::symbol))
                .collect();
            text.push_str(&line);
            text.push('\n');
        }
        text
    }

    /// The board in the last six board lines (7 characters of `.XO`) of `text`, as
    /// [`Board::render`] writes them; `None` when there are fewer than six or pieces float.
    pub fn parse_last(text: &str) -> Option<Board> {
        let lines: Vec<&str> = text
            .lines()
            .map(str::trim)
            .filter(|l| l.len() == COLUMNS && l.chars().all(|c| matches!(c, '.' | 'X' | 'O')))
            .collect();
        let top_first = lines.get(lines.len().checked_sub(ROWS)?..)?;
        let mut board = Board::default();
        for (i, line) in top_first.iter().enumerate() {
            let row = ROWS - 1 - i;
            for (column, ch) in line.chars().enumerate() {
                board.set(row, column, Piece::parse(&ch.to_string()));
            }
        }
        let floating = (1..ROWS).any(|r| {
            (0..COLUMNS).any(|c| board.at(r, c).is_some() && board.at(r - 1, c).is_none())
        });
        (!floating).then_some(board)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use agentrl_core::SeededRng;

    /// Whether the piece at `row`, `column` is part of four in a row, by walking the cells.
    fn wins_by_walking(board: &Board, row: usize, column: usize) -> bool {
        let Some(piece) = board.at(row, column) else {
            return false;
        };
        [(0i64, 1i64), (1, 0), (1, 1), (1, -1)]
            .iter()
            .any(|&(dr, dc)| {
                let run = |sign: i64| {
                    (1..4)
                        .take_while(|&k| {
                            let (r, c) =
                                (row as i64 + sign * k * dr, column as i64 + sign * k * dc);
                            r >= 0 && c >= 0 && board.at(r as usize, c as usize) == Some(piece)
                        })
                        .count()
                };
                1 + run(1) + run(-1) >= 4
            })
    }

    #[test]
    fn the_masks_agree_with_walking_the_cells_through_random_games() {
        let mut rng = SeededRng::new(7);
        let (mut wins, mut full_boards) = (0, 0);
        for _ in 0..300 {
            // Play on past wins, so boards with several fours (and full ones) come up too.
            let mut board = Board::default();
            let mut piece = Piece::X;
            while let Some(&column) = rng.choose(&board.legal_columns()) {
                let before = board.clone();
                let row = board.drop_piece(column, piece).expect("a legal column");
                assert_eq!(board.at(row, column), Some(piece));
                assert!(
                    row == 0 || board.at(row - 1, column).is_some(),
                    "pieces fall"
                );
                for r in 0..ROWS {
                    for c in 0..COLUMNS {
                        assert_eq!(
                            board.wins_at(r, c),
                            wins_by_walking(&board, r, c),
                            "{r},{c}"
                        );
                    }
                }
                wins += usize::from(board.wins_at(row, column));
                assert_eq!(Board::parse_last(&board.render()), Some(board.clone()));
                let mut undone = board.clone();
                undone.undo(column);
                assert_eq!(undone, before);
                piece = piece.other();
            }
            assert!(board.full());
            assert_eq!(board.pieces(), ROWS * COLUMNS);
            assert_eq!(board.drop_piece(3, piece), None);
            full_boards += 1;
        }
        assert!(wins > 300, "{wins} winning drops");
        assert_eq!(full_boards, 300);
        assert_eq!(Board::default().at(ROWS, 0), None);
        assert_eq!(Board::default().at(0, COLUMNS), None);
    }
}
