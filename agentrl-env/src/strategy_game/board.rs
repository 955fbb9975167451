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

/// A position; `cells[row][column]`, row 0 at the bottom.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct Board {
    cells: [[Option<Piece>; COLUMNS]; ROWS],
}

impl Board {
    /// The piece at `row` (0 = bottom), `column`.
    pub fn at(&self, row: usize, column: usize) -> Option<Piece> {
        self.cells[row][column]
    }

    /// Number of pieces on the board.
    pub fn pieces(&self) -> usize {
        self.cells.iter().flatten().filter(|c| c.is_some()).count()
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
        column < COLUMNS && self.cells[ROWS - 1][column].is_none()
    }

    /// The columns that are not full, in order.
    pub fn legal_columns(&self) -> Vec<usize> {
        (0..COLUMNS).filter(|&c| self.can_drop(c)).collect()
    }

    /// Whether the board is full.
    pub fn full(&self) -> bool {
        self.legal_columns().is_empty()
    }

    /// Drops `piece` into `column` (0-based); the row it lands in, or `None` when the column
    /// is full or does not exist.
    pub fn drop_piece(&mut self, column: usize, piece: Piece) -> Option<usize> {
        if !self.can_drop(column) {
            return None;
        }
        let row = (0..ROWS).find(|&r| self.cells[r][column].is_none())?;
        self.cells[row][column] = Some(piece);
        Some(row)
    }

    /// Removes the top piece of `column` (to undo a drop in search).
    pub fn undo(&mut self, column: usize) {
        if let Some(row) = (0..ROWS).rev().find(|&r| self.cells[r][column].is_some()) {
            self.cells[row][column] = None;
        }
    }

    /// Whether the piece at `row`, `column` is part of four in a row.
    pub fn wins_at(&self, row: usize, column: usize) -> bool {
        let Some(piece) = self.cells[row][column] else {
            return false;
        };
        let same = |r: i64, c: i64| {
            (0..ROWS as i64).contains(&r)
                && (0..COLUMNS as i64).contains(&c)
                && self.cells[r as usize][c as usize] == Some(piece)
        };
        [(0, 1), (1, 0), (1, 1), (1, -1)].iter().any(|&(dr, dc)| {
            let run = |sign: i64| {
                (1..4)
                    .take_while(|&k| {
                        same(row as i64 + sign * k * dr, column as i64 + sign * k * dc)
                    })
                    .count()
            };
            1 + run(1) + run(-1) >= 4
        })
    }

    /// The player with four in a row, if any.
    pub fn winner(&self) -> Option<Piece> {
        (0..ROWS)
            .flat_map(|r| (0..COLUMNS).map(move |c| (r, c)))
            .find(|&(r, c)| self.wins_at(r, c))
            .and_then(|(r, c)| self.cells[r][c])
    }

    /// The board as text: a header of column numbers, then one line per row, top first, with
    /// `.` for empty cells.
    pub fn render(&self) -> String {
        let mut text = String::from("1234567\n");
        for row in (0..ROWS).rev() {
            let line: String = self.cells[row]
                .iter()
                .map(|c| c.map_or('.', Piece::symbol))
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
                board.cells[row][column] = Piece::parse(&ch.to_string());
            }
        }
        let floating = (1..ROWS).any(|r| {
            (0..COLUMNS).any(|c| board.cells[r][c].is_some() && board.cells[r - 1][c].is_none())
        });
        (!floating).then_some(board)
    }
}
