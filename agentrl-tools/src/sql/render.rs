//! Running one statement and showing its result as a ` | `-separated table within the row and
//! character limits, saying what was left out.

use agentrl_core::ToolError;
use rusqlite::Connection;
use rusqlite::types::ValueRef;

use super::{SqlAccess, SqlLimits, describe_error};

/// Rows counted at most beyond those shown, to say how many a query returned.
const MAX_COUNTED_ROWS: usize = 100_000;

/// Runs `sql` (one statement) and renders its rows, or the number of rows it changed.
pub(crate) fn run_statement(
    conn: &Connection,
    sql: &str,
    access: SqlAccess,
    limits: &SqlLimits,
) -> Result<String, ToolError> {
    let failed = |e: rusqlite::Error| ToolError::Failed(describe_error(&e, limits.time_limit));
    let mut stmt = conn.prepare(sql).map_err(failed)?;
    if access == SqlAccess::ReadOnly && !stmt.readonly() {
        return Err(ToolError::Failed(
            "the database is read-only: only statements that read (SELECT, WITH ... SELECT) are \
             allowed"
                .to_string(),
        ));
    }
    if stmt.column_count() == 0 {
        let changed = stmt.execute([]).map_err(failed)?;
        return Ok(format!("ok ({changed} rows changed)"));
    }
    let names: Vec<String> = stmt.column_names().map(str::to_string).collect();
    let width = names.len();
    let mut lines = vec![names.join(" | ")];
    let mut rows = stmt.query([]).map_err(failed)?;
    let mut total = 0usize;
    while let Some(row) = rows.next().map_err(failed)? {
        total += 1;
        if total <= limits.max_rows {
            let cells: Vec<String> = (0..width)
                .map(|i| row.get_ref(i).map_or_else(|_| "?".to_string(), show_value))
                .collect();
            lines.push(cells.join(" | "));
        } else if total >= limits.max_rows + MAX_COUNTED_ROWS {
            break;
        }
    }
    let shown = total.min(limits.max_rows);
    lines.push(if total > shown {
        let more = if total >= limits.max_rows + MAX_COUNTED_ROWS {
            "more than "
        } else {
            ""
        };
        format!(
            "…[row limit: showing the first {shown} of {more}{total} rows; use LIMIT, WHERE or \
             aggregates]"
        )
    } else {
        format!("({total} row{})", if total == 1 { "" } else { "s" })
    });
    Ok(cut(lines.join("\n"), limits.max_output_chars))
}

/// A cell as text: `NULL`, the number, the text (newlines escaped) or `<blob N bytes>`.
fn show_value(value: ValueRef<'_>) -> String {
    match value {
        ValueRef::Null => "NULL".to_string(),
        ValueRef::Integer(i) => i.to_string(),
        ValueRef::Real(f) => format!("{f:?}"),
        ValueRef::Text(t) => String::from_utf8_lossy(t).replace('\n', "\\n"),
        ValueRef::Blob(b) => format!("<blob {} bytes>", b.len()),
    }
}

/// `text` cut to `max` characters (on a char boundary) with a note saying so.
fn cut(mut text: String, max: usize) -> String {
    let total = text.chars().count();
    if let Some((at, _)) = text.char_indices().nth(max) {
        text.truncate(at);
        text.push_str(&format!(
            "\n…[output limit: showing {max} of {total} characters; select fewer rows or columns]"
        ));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_and_cutting() {
        assert_eq!(show_value(ValueRef::Real(3.0)), "3.0");
        assert_eq!(show_value(ValueRef::Integer(-4)), "-4");
        assert_eq!(show_value(ValueRef::Text(b"a\nb")), "a\\nb");
        assert_eq!(show_value(ValueRef::Blob(&[1, 2])), "<blob 2 bytes>");
        assert!(cut("héllo".into(), 2).starts_with("hé\n…[output limit: showing 2 of 5"));
        assert_eq!(cut("ab".into(), 2), "ab");
    }
}
