//! A [`Workbook`]: named sheets, each an SQLite table `sheet_NAME (row INTEGER PRIMARY KEY,
//! A, ..., Z)` in a private in-memory database. Every method blocks: call it off the async
//! runtime.

use std::time::Duration;

use agentrl_core::Result;
use rusqlite::types::Value;
use rusqlite::{Connection, params_from_iter};

use super::address::{CellRef, MAX_COLUMNS, Range, column_letter};
use super::aggregate::Aggregate;
use super::cell::Cell;
use super::table::{CellMatch, SheetRow, check_name, insert_row, select_rows, table};
use crate::sql::{SqlDatabase, describe_error};

/// Time one workbook operation may take.
const TIME_LIMIT: Duration = Duration::from_secs(2);

/// Named sheets backed by SQLite tables.
#[derive(Debug)]
pub struct Workbook {
    db: SqlDatabase,
}

impl Workbook {
    /// An empty workbook in a private in-memory database.
    pub fn new() -> Result<Self> {
        Ok(Workbook {
            db: SqlDatabase::in_memory()?,
        })
    }

    /// Runs `work`, turning SQLite errors into text.
    fn run<T>(&self, work: impl FnOnce(&Connection) -> rusqlite::Result<T>) -> Result<T, String> {
        self.db
            .with_time_limit(TIME_LIMIT, work)
            .map_err(|e| describe_error(&e, TIME_LIMIT))
    }

    /// Adds sheet `name` holding `rows` from row 1 (at most 26 cells a row).
    pub fn add_sheet(&self, name: &str, rows: &[Vec<Cell>]) -> Result<(), String> {
        check_name(name)?;
        if self.has_sheet(name)? {
            return Err(format!("a sheet named {name:?} already exists"));
        }
        if let Some(row) = rows.iter().find(|r| r.len() > MAX_COLUMNS) {
            return Err(format!(
                "a row has {} cells, more than {MAX_COLUMNS}",
                row.len()
            ));
        }
        let columns: Vec<String> = (0..MAX_COLUMNS).map(|i| column_letter(i).into()).collect();
        let create = format!(
            "CREATE TABLE {} (row INTEGER PRIMARY KEY, {})",
            table(name),
            columns.join(", ")
        );
        self.run(|conn| {
            conn.execute_batch(&create)?;
            for (i, cells) in rows.iter().enumerate() {
                insert_row(conn, name, i as u32 + 1, cells)?;
            }
            Ok(())
        })
    }

    /// Names of the sheets, sorted.
    pub fn sheet_names(&self) -> Result<Vec<String>, String> {
        self.run(|conn| {
            let mut stmt = conn.prepare(
                "SELECT substr(name, 7) FROM sqlite_master WHERE type = 'table' \
                 AND name LIKE 'sheet\\_%' ESCAPE '\\' ORDER BY name",
            )?;
            let names = stmt.query_map([], |r| r.get::<_, String>(0))?;
            names.collect()
        })
    }

    /// Whether sheet `name` exists.
    pub fn has_sheet(&self, name: &str) -> Result<bool, String> {
        Ok(self.sheet_names()?.iter().any(|n| n == name))
    }

    /// Fails unless sheet `name` exists, listing the sheets there are.
    fn require(&self, name: &str) -> Result<(), String> {
        let names = self.sheet_names()?;
        if names.iter().any(|n| n == name) {
            return Ok(());
        }
        Err(format!(
            "no sheet named {name:?} (sheets: {})",
            names.join(", ")
        ))
    }

    /// Every used row of `sheet` (rows with a value), each with cells `A..=last used column`.
    pub fn cells(&self, sheet: &str) -> Result<Vec<SheetRow>, String> {
        self.require(sheet)?;
        let rows = self.run(|conn| select_rows(conn, sheet, None, MAX_COLUMNS))?;
        let width = rows
            .iter()
            .filter_map(|(_, c)| c.iter().rposition(|v| !v.is_empty()))
            .max()
            .map_or(0, |w| w + 1);
        Ok(rows
            .into_iter()
            .filter(|(_, c)| c.iter().any(|v| !v.is_empty()))
            .map(|(r, mut c)| {
                c.truncate(width);
                (r, c)
            })
            .collect())
    }

    /// The cells of `range`, row by row (every row of the range, empty ones included).
    pub fn read(&self, sheet: &str, range: &Range) -> Result<Vec<SheetRow>, String> {
        self.require(sheet)?;
        let found = self.run(|conn| {
            select_rows(
                conn,
                sheet,
                Some((range.start.row, range.end.row)),
                MAX_COLUMNS,
            )
        })?;
        let width = range.columns().count();
        Ok((range.start.row..=range.end.row)
            .map(|row| {
                let cells = found
                    .iter()
                    .find(|(r, _)| *r == row)
                    .map(|(_, c)| c[range.columns()].to_vec())
                    .unwrap_or_else(|| vec![Cell::Empty; width]);
                (row, cells)
            })
            .collect())
    }

    /// The value of one cell.
    pub fn get(&self, sheet: &str, at: CellRef) -> Result<Cell, String> {
        let rows = self.read(sheet, &Range { start: at, end: at })?;
        Ok(rows
            .into_iter()
            .next()
            .and_then(|(_, c)| c.into_iter().next())
            .unwrap_or(Cell::Empty))
    }

    /// The column whose row-1 cell is `header` (case-insensitive), if any.
    pub fn header_column(&self, sheet: &str, header: &str) -> Result<Option<usize>, String> {
        let first = self.read(sheet, &Range::parse("A1:Z1")?)?;
        let wanted = header.trim().to_lowercase();
        Ok(first.first().and_then(|(_, cells)| {
            cells
                .iter()
                .position(|c| matches!(c, Cell::Text(t) if t.trim().to_lowercase() == wanted))
        }))
    }

    /// Rows whose cell in `column` equals `value`: text compared trimmed and case-insensitive,
    /// numbers numerically (a numeric string matches a number).
    pub fn lookup(
        &self,
        sheet: &str,
        column: usize,
        value: &Cell,
    ) -> Result<Vec<SheetRow>, String> {
        self.require(sheet)?;
        let sql = format!(
            "SELECT row FROM {} WHERE {} ORDER BY row",
            table(sheet),
            CellMatch::condition(column, 1)
        );
        let rows: Vec<u32> = self.run(|conn| {
            let mut stmt = conn.prepare(&sql)?;
            let rows = stmt.query_map(params_from_iter(CellMatch::new(value).params()), |r| {
                r.get(0)
            })?;
            rows.collect()
        })?;
        let all = self.cells(sheet)?;
        Ok(all.into_iter().filter(|(r, _)| rows.contains(r)).collect())
    }

    /// Sets one cell and returns its previous value.
    pub fn write(&self, sheet: &str, at: CellRef, value: &Cell) -> Result<Cell, String> {
        let old = self.get(sheet, at)?;
        self.set(sheet, at, value)?;
        Ok(old)
    }

    /// Sets one cell of an existing sheet (creating its row when needed).
    fn set(&self, sheet: &str, at: CellRef, value: &Cell) -> Result<(), String> {
        let sql = format!(
            "UPDATE {} SET {} = ?1 WHERE row = ?2",
            table(sheet),
            column_letter(at.column)
        );
        self.run(|conn| {
            conn.execute(
                &format!("INSERT OR IGNORE INTO {} (row) VALUES (?1)", table(sheet)),
                [at.row],
            )?;
            conn.execute(&sql, rusqlite::params![value.to_sql(), at.row])
        })?;
        Ok(())
    }

    /// Writes `values` from column A into the row after the last used one; returns its number.
    pub fn append(&self, sheet: &str, values: &[Cell]) -> Result<u32, String> {
        self.require(sheet)?;
        if values.len() > MAX_COLUMNS {
            return Err(format!(
                "{} values, more than {MAX_COLUMNS} columns",
                values.len()
            ));
        }
        let last = self.cells(sheet)?.last().map_or(0, |(r, _)| *r);
        let row = last + 1;
        if row > super::address::MAX_ROWS {
            return Err("the sheet is full".to_string());
        }
        self.run(|conn| {
            conn.execute(
                &format!("DELETE FROM {} WHERE row = ?1", table(sheet)),
                [row],
            )?;
            insert_row(conn, sheet, row, values)
        })?;
        Ok(row)
    }

    /// `function` over `range` (computed by SQLite), or over the range's rows whose cell in
    /// column `filter.0` matches `filter.1` as in [`Workbook::lookup`] (a `SUMIF`); returns the
    /// value (`None` when there are no numbers to take an average, minimum or maximum of) and
    /// the number of cells it used.
    pub fn aggregate(
        &self,
        sheet: &str,
        range: &Range,
        function: Aggregate,
        filter: Option<(usize, &Cell)>,
    ) -> Result<(Option<f64>, usize), String> {
        self.require(sheet)?;
        let sql = function.query(&table(sheet), range, filter.map(|(column, _)| column));
        let rows = [range.start.row, range.end.row].map(|r| Value::Integer(r.into()));
        let matched = filter.map(|(_, value)| CellMatch::new(value).params());
        let params = rows.into_iter().chain(matched.into_iter().flatten());
        self.run(|conn| {
            conn.query_row(&sql, params_from_iter(params), |r| {
                Ok((r.get::<_, Option<f64>>(0)?, r.get::<_, i64>(1)? as usize))
            })
        })
    }

    /// Adds `amount` to the number in cell `at` (an empty cell counts as 0) and returns the
    /// old and new values; a cell holding text is an error and is left as it was.
    pub fn add(&self, sheet: &str, at: CellRef, amount: f64) -> Result<(Cell, Cell), String> {
        let old = self.get(sheet, at)?;
        let sum = match old {
            Cell::Number(n) => n + amount,
            Cell::Empty => amount,
            Cell::Text(ref t) => {
                return Err(format!("{at} holds the text {t:?}, not a number to add to"));
            }
        };
        if !sum.is_finite() {
            return Err(format!("{old} + {amount} is not a finite number"));
        }
        let new = Cell::Number(sum);
        self.set(sheet, at, &new)?;
        Ok((old, new))
    }
}
