//! Aggregates over a range of a sheet (`sum`, `avg`, `min`, `max`, `count`), computed by
//! SQLite over the range's cells, optionally only in the rows where one column matches a value
//! (like a spreadsheet's `SUMIF`).

use super::address::{Range, column_letter};
use super::table::CellMatch;

/// What `Workbook::aggregate` computes over the numeric cells of a range (`count` counts
/// every non-empty cell).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Aggregate {
    /// Sum of the numbers (0 when there are none).
    Sum,
    /// Mean of the numbers.
    Avg,
    /// Smallest number.
    Min,
    /// Largest number.
    Max,
    /// Number of non-empty cells.
    Count,
}

impl Aggregate {
    /// Every function, in the order the tool's schema lists them.
    pub const ALL: [Aggregate; 5] = [
        Aggregate::Sum,
        Aggregate::Avg,
        Aggregate::Min,
        Aggregate::Max,
        Aggregate::Count,
    ];

    /// The function's name (`sum`, `avg`, ...).
    pub fn name(self) -> &'static str {
        match self {
            Aggregate::Sum => "sum",
            Aggregate::Avg => "avg",
            Aggregate::Min => "min",
            Aggregate::Max => "max",
            Aggregate::Count => "count",
        }
    }

    /// The function named `name`.
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|a| a.name() == name)
    }
}

impl Aggregate {
    /// The SQL giving `(value, cells used)` for the range of `table` whose rows are bound as
    /// `?1..=?2`: numbers only (text is skipped), except that `count` counts non-empty cells.
    /// With `filter`, only the rows whose cell in that column matches the value bound as
    /// `?3`/`?4` (see [`CellMatch`]).
    pub(crate) fn query(self, table: &str, range: &Range, filter: Option<usize>) -> String {
        let rows = match filter {
            Some(column) => format!(
                "row BETWEEN ?1 AND ?2 AND {}",
                CellMatch::condition(column, 3)
            ),
            None => "row BETWEEN ?1 AND ?2".to_string(),
        };
        let cells: Vec<String> = range
            .columns()
            .map(|c| {
                let col = column_letter(c);
                format!("SELECT {col} AS v FROM {table} WHERE {rows}")
            })
            .collect();
        let cells = cells.join(" UNION ALL ");
        let function = match self {
            Aggregate::Count => return format!("SELECT COUNT(v), COUNT(v) FROM ({cells})"),
            Aggregate::Sum => "TOTAL",
            Aggregate::Avg => "AVG",
            Aggregate::Min => "MIN",
            Aggregate::Max => "MAX",
        };
        format!(
            "SELECT {function}(v), COUNT(v) FROM ({cells}) WHERE typeof(v) IN ('integer', 'real')"
        )
    }
}
