//! The SQLite side of one sheet: its table `sheet_NAME (row INTEGER PRIMARY KEY, A, ..., Z)`,
//! name checks, and inserting and selecting rows.

use rusqlite::types::{ToSqlOutput, Value};
use rusqlite::{Connection, params_from_iter};

use super::address::column_letter;
use super::cell::Cell;

/// Longest sheet name.
const MAX_NAME_CHARS: usize = 32;

/// One row of a sheet: its number and cells `A..` (as many as asked for).
pub type SheetRow = (u32, Vec<Cell>);

/// The quoted table of sheet `name` (names are checked to be plain words).
pub(crate) fn table(name: &str) -> String {
    format!("\"sheet_{name}\"")
}

/// Fails unless `name` is 1 to 32 letters, digits or `_`.
pub(crate) fn check_name(name: &str) -> Result<(), String> {
    let ok = !name.is_empty()
        && name.chars().count() <= MAX_NAME_CHARS
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if ok {
        Ok(())
    } else {
        Err(format!(
            "bad sheet name {name:?}: use 1 to {MAX_NAME_CHARS} letters, digits or _"
        ))
    }
}

/// Inserts row `row` with `cells` from column A.
pub(crate) fn insert_row(
    conn: &Connection,
    sheet: &str,
    row: u32,
    cells: &[Cell],
) -> rusqlite::Result<()> {
    let columns: String = (0..cells.len())
        .map(|i| format!(", {}", column_letter(i)))
        .collect();
    let marks: String = (0..cells.len()).map(|i| format!(", ?{}", i + 2)).collect();
    let sql = format!(
        "INSERT INTO {} (row{columns}) VALUES (?1{marks})",
        table(sheet)
    );
    let row_value = ToSqlOutput::Owned(Value::Integer(row.into()));
    let values = std::iter::once(row_value).chain(cells.iter().map(Cell::to_sql));
    conn.execute(&sql, params_from_iter(values)).map(|_| ())
}

/// A cell value to match a column against, as SQL parameters: the text to compare trimmed and
/// case-insensitive, and the number to compare numerically (when the value is or reads as one).
#[derive(Debug, Clone)]
pub(crate) struct CellMatch {
    /// The value as text.
    text: String,
    /// The value as a number, if it is one.
    number: Option<f64>,
}

impl CellMatch {
    /// The match for `value`: a number matches equal numbers, a numeric string too.
    pub(crate) fn new(value: &Cell) -> Self {
        CellMatch {
            text: value.to_string(),
            number: value.as_number(),
        }
    }

    /// The SQL condition "column `column` matches", with the text bound as `?{first}` and the
    /// number as `?{first + 1}` (see [`CellMatch::params`]).
    pub(crate) fn condition(column: usize, first: usize) -> String {
        let col = column_letter(column);
        let (text, number) = (first, first + 1);
        format!(
            "((typeof({col}) = 'text' AND lower(trim({col})) = lower(trim(?{text}))) OR \
             (?{number} IS NOT NULL AND typeof({col}) IN ('integer', 'real') AND {col} = ?{number}))"
        )
    }

    /// The two parameters [`CellMatch::condition`] binds, in order.
    pub(crate) fn params(&self) -> [Value; 2] {
        [
            Value::Text(self.text.clone()),
            self.number.map_or(Value::Null, Value::Real),
        ]
    }
}

/// Rows of `sheet` (all, or those in `rows`), each with the first `width` cells.
pub(crate) fn select_rows(
    conn: &Connection,
    sheet: &str,
    rows: Option<(u32, u32)>,
    width: usize,
) -> rusqlite::Result<Vec<SheetRow>> {
    let columns: String = (0..width)
        .map(|i| format!(", {}", column_letter(i)))
        .collect();
    let (lo, hi) = rows.unwrap_or((0, u32::MAX));
    let sql = format!(
        "SELECT row{columns} FROM {} WHERE row BETWEEN ?1 AND ?2 ORDER BY row",
        table(sheet)
    );
    let mut stmt = conn.prepare(&sql)?;
    let found = stmt.query_map([lo, hi], |r| {
        let cells = (1..=width)
            .map(|i| r.get_ref(i).map(Cell::from_sql))
            .collect::<rusqlite::Result<Vec<Cell>>>()?;
        Ok((r.get::<_, u32>(0)?, cells))
    })?;
    found.collect()
}
