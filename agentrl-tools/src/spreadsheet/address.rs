//! A1-style addresses: single columns `A`..`Z`, rows from 1, cells (`C4`), ranges (`B2:D5`)
//! and whole columns (`C:C`, `B:D`).

/// Columns a sheet has: `A` to `Z`.
pub const MAX_COLUMNS: usize = 26;
/// Highest row number a sheet may use.
pub const MAX_ROWS: u32 = 10_000;

/// The letter of column `index` (0 is `A`); `?` beyond `Z`.
pub fn column_letter(index: usize) -> char {
    if index < MAX_COLUMNS {
        char::from(b'A' + index as u8)
    } else {
        '?'
    }
}

/// The index of a one-letter column name (`a` or `A` is 0), if it is one.
pub fn column_index(name: &str) -> Option<usize> {
    let mut chars = name.trim().chars();
    match (chars.next(), chars.next()) {
        (Some(c), None) if c.is_ascii_alphabetic() => {
            Some(usize::from(c.to_ascii_uppercase() as u8 - b'A'))
        }
        _ => None,
    }
}

/// One cell's address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CellRef {
    /// Column index (0 is `A`).
    pub column: usize,
    /// Row number (1 is the first row).
    pub row: u32,
}

impl CellRef {
    /// Parses `C4` (case-insensitive); the error says what is wrong.
    pub fn parse(text: &str) -> Result<Self, String> {
        let text = text.trim();
        let bad = |why: &str| format!("bad cell address {text:?}: {why} (write e.g. \"C4\")");
        let letters = text.chars().take_while(char::is_ascii_alphabetic).count();
        let (col, row) = text.split_at(letters);
        if letters == 0 {
            return Err(bad("it must start with a column letter"));
        }
        let column = column_index(col).ok_or_else(|| bad("columns go from A to Z"))?;
        if row.is_empty() || !row.bytes().all(|b| b.is_ascii_digit()) {
            return Err(bad("the column letter must be followed by a row number"));
        }
        match row.parse::<u32>() {
            Ok(row) if (1..=MAX_ROWS).contains(&row) => Ok(CellRef { column, row }),
            _ => Err(bad(&format!("rows go from 1 to {MAX_ROWS}"))),
        }
    }
}

impl std::fmt::Display for CellRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}{}", column_letter(self.column), self.row)
    }
}

/// A rectangle of cells, corners in order (top-left first).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Range {
    /// Top-left cell.
    pub start: CellRef,
    /// Bottom-right cell.
    pub end: CellRef,
}

impl Range {
    /// Parses `B2:D5`, a single cell `B2`, or whole columns `C:C` / `B:D` (rows 1 to
    /// [`MAX_ROWS`]); corners may come in any order.
    pub fn parse(text: &str) -> Result<Self, String> {
        if let Some(range) = Self::parse_columns(text) {
            return Ok(range);
        }
        let (a, b) = match text.split_once(':') {
            Some((a, b)) => (CellRef::parse(a)?, CellRef::parse(b)?),
            None => {
                let cell = CellRef::parse(text)?;
                (cell, cell)
            }
        };
        Ok(Range {
            start: CellRef {
                column: a.column.min(b.column),
                row: a.row.min(b.row),
            },
            end: CellRef {
                column: a.column.max(b.column),
                row: a.row.max(b.row),
            },
        })
    }

    /// Whole columns `C:C` or `B:D`, if `text` is that.
    fn parse_columns(text: &str) -> Option<Self> {
        let (a, b) = text.trim().split_once(':')?;
        let (a, b) = (column_index(a)?, column_index(b)?);
        if a.max(b) >= MAX_COLUMNS {
            return None;
        }
        Some(Range {
            start: CellRef {
                column: a.min(b),
                row: 1,
            },
            end: CellRef {
                column: a.max(b),
                row: MAX_ROWS,
            },
        })
    }

    /// Whether the range covers whole columns (every row from 1 to [`MAX_ROWS`]).
    pub fn is_whole_columns(&self) -> bool {
        self.start.row == 1 && self.end.row == MAX_ROWS
    }

    /// Column indices covered, left to right.
    pub fn columns(&self) -> std::ops::RangeInclusive<usize> {
        self.start.column..=self.end.column
    }

    /// Number of cells covered.
    pub fn cell_count(&self) -> usize {
        self.columns().count() * (self.end.row - self.start.row + 1) as usize
    }
}

impl std::fmt::Display for Range {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.is_whole_columns() {
            let (a, b) = (self.start.column, self.end.column);
            write!(f, "{}:{}", column_letter(a), column_letter(b))
        } else if self.start == self.end {
            write!(f, "{}", self.start)
        } else {
            write!(f, "{}:{}", self.start, self.end)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_cells_and_ranges() {
        assert_eq!(CellRef::parse("c4").unwrap(), CellRef { column: 2, row: 4 });
        let r = Range::parse("D5:B2").unwrap();
        assert_eq!(r.to_string(), "B2:D5");
        assert_eq!(r.cell_count(), 12);
        assert_eq!(Range::parse("A1").unwrap().to_string(), "A1");
        let column = Range::parse("c:c").unwrap();
        assert_eq!(column.to_string(), "C:C");
        assert_eq!((column.start.row, column.end.row), (1, MAX_ROWS));
        assert_eq!(Range::parse("D:B").unwrap().to_string(), "B:D");
        assert_eq!(Range::parse("D:B").unwrap().cell_count(), 30_000);
        assert!(!Range::parse("C1:C9999").unwrap().is_whole_columns());
        for bad in [
            "", "4C", "AA1", "A0", "A", "B2:", "A1:B2:C3", "Z10001", "A-1", "C:", ":C", "AA:AB",
            "C:C:C", "C2:C",
        ] {
            assert!(Range::parse(bad).is_err(), "{bad}");
        }
    }
}
