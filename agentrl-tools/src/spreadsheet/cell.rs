//! The value of one spreadsheet cell and its conversions to SQLite, JSON and text.

use rusqlite::types::{ToSqlOutput, Value as SqlValue, ValueRef};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A cell: empty, a number or text. In JSON: `null`, a number or a string.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Cell {
    /// No value.
    Empty,
    /// A number (integers are stored as SQLite integers).
    Number(f64),
    /// Text.
    Text(String),
}

impl Cell {
    /// A text cell.
    pub fn text(text: impl Into<String>) -> Self {
        Cell::Text(text.into())
    }

    /// The cell a JSON argument denotes: a string, a number or `null`.
    pub fn from_json(value: &Value) -> Result<Self, String> {
        match value {
            Value::Null => Ok(Cell::Empty),
            Value::String(s) => Ok(Cell::Text(s.clone())),
            Value::Number(n) => n
                .as_f64()
                .filter(|f| f.is_finite())
                .map(Cell::Number)
                .ok_or_else(|| format!("{n} is not a usable number")),
            other => Err(format!(
                "a cell holds a string, a number or null, not {other}"
            )),
        }
    }

    /// The cell an SQLite value denotes (a blob reads as text).
    pub(crate) fn from_sql(value: ValueRef<'_>) -> Self {
        match value {
            ValueRef::Null => Cell::Empty,
            ValueRef::Integer(i) => Cell::Number(i as f64),
            ValueRef::Real(f) => Cell::Number(f),
            ValueRef::Text(t) | ValueRef::Blob(t) => Cell::Text(String::from_utf8_lossy(t).into()),
        }
    }

    /// The SQLite value stored for the cell.
    pub(crate) fn to_sql(&self) -> ToSqlOutput<'_> {
        match self {
            Cell::Empty => ToSqlOutput::Owned(SqlValue::Null),
            Cell::Number(f) if is_integral(*f) => ToSqlOutput::Owned(SqlValue::Integer(*f as i64)),
            Cell::Number(f) => ToSqlOutput::Owned(SqlValue::Real(*f)),
            Cell::Text(t) => ToSqlOutput::Borrowed(ValueRef::Text(t.as_bytes())),
        }
    }

    /// The cell as a number: a number, or text that reads as a finite one (trimmed).
    pub fn as_number(&self) -> Option<f64> {
        match self {
            Cell::Number(n) => Some(*n),
            Cell::Text(t) => t.trim().parse::<f64>().ok().filter(|f| f.is_finite()),
            Cell::Empty => None,
        }
    }

    /// Whether the cell is empty.
    pub fn is_empty(&self) -> bool {
        matches!(self, Cell::Empty)
    }
}

/// Whether `f` is a whole number that an `i64` holds exactly.
fn is_integral(f: f64) -> bool {
    f.fract() == 0.0 && f.abs() < 9.0e15
}

/// Shows a number without a trailing `.0` when it is whole.
pub fn show_number(f: f64) -> String {
    if is_integral(f) {
        format!("{}", f as i64)
    } else {
        format!("{f}")
    }
}

impl std::fmt::Display for Cell {
    /// Empty as ``, numbers as [`show_number`], text as is.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Cell::Empty => Ok(()),
            Cell::Number(n) => f.write_str(&show_number(*n)),
            Cell::Text(t) => f.write_str(t),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn converts() {
        assert_eq!(
            Cell::from_json(&serde_json::json!(4)).unwrap(),
            Cell::Number(4.0)
        );
        assert_eq!(Cell::from_json(&Value::Null).unwrap(), Cell::Empty);
        assert!(Cell::from_json(&serde_json::json!([1])).is_err());
        assert_eq!(Cell::Number(40.0).to_string(), "40");
        assert_eq!(Cell::Number(2.5).to_string(), "2.5");
        assert_eq!(Cell::text(" -2.5 ").as_number(), Some(-2.5));
        for not_a_number in [Cell::text("many"), Cell::text("inf"), Cell::Empty] {
            assert_eq!(not_a_number.as_number(), None, "{not_a_number:?}");
        }
        let json = serde_json::to_string(&vec![Cell::Empty, Cell::text("a"), Cell::Number(1.0)]);
        assert_eq!(json.unwrap(), r#"[null,"a",1.0]"#);
        let back: Vec<Cell> = serde_json::from_str(r#"[null,"a",1]"#).unwrap();
        assert_eq!(back, vec![Cell::Empty, Cell::text("a"), Cell::Number(1.0)]);
    }
}
