//! The `spreadsheet` tool: named sheets backed by SQLite tables ([`Workbook`]), used through
//! one tool whose `op` argument picks the operation.
//!
//! One tool with a flat argument object (`op` plus the arguments that op needs) is what a
//! model calls most reliably: a single name to remember, every argument typed in one schema,
//! and an error naming the missing argument when an op lacks one. The ops:
//!
//! | `op` | arguments | result |
//! |---|---|---|
//! | `sheets` | | each sheet with its used range |
//! | `read` | `sheet`, `range` (`B2:D5` or `C4`) | the cells, one row a line |
//! | `lookup` | `sheet`, `column` (letter or row-1 header), `value` | matching rows |
//! | `write` | `sheet`, `cell`, `value` | the cell's old and new value |
//! | `add` | `sheet`, `cell`, `value` (a number) | the cell's old and new value |
//! | `append` | `sheet`, `values` (from column A) | the new row's number |
//! | `aggregate` | `sheet`, `range`, `function` (`sum`/`avg`/`min`/`max`/`count`), optional `column` and `value` | the value |
//!
//! `sheet` may be left out when the workbook has one sheet. A range is `B2:D5`, one cell `C4`,
//! or whole columns `C:C`. Numbers aggregate, text is skipped; `count` counts non-empty cells.
//! An `aggregate` with `column` and `value` takes only the range's rows whose cell in that
//! column matches the value as `lookup` matches (a spreadsheet's `SUMIF`, `COUNTIF`, ...).

mod address;
mod aggregate;
mod cell;
mod table;
mod workbook;

use std::sync::Arc;

use agentrl_core::{Tool, ToolContext, ToolError, ToolSpec};
use async_trait::async_trait;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::arguments::{any_value, parse_args};

pub use address::{CellRef, MAX_COLUMNS, MAX_ROWS, Range, column_index, column_letter};
pub use aggregate::Aggregate;
pub use cell::{Cell, show_number};
pub use table::SheetRow;
pub use workbook::Workbook;

/// Cells a `read` may return at most.
pub const MAX_READ_CELLS: usize = 400;
/// Matching rows a `lookup` shows at most.
const MAX_LOOKUP_ROWS: usize = 50;

/// The ops, in the order the schema lists them.
const OPS: [&str; 7] = [
    "sheets",
    "read",
    "lookup",
    "write",
    "add",
    "append",
    "aggregate",
];

/// The arguments of the `spreadsheet` tool: the op and whichever of the rest it needs.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SpreadsheetArgs {
    /// One of [`OPS`].
    op: String,
    /// Sheet name (may be left out when the workbook has one sheet).
    sheet: Option<String>,
    /// A1-style range.
    range: Option<String>,
    /// One cell.
    cell: Option<String>,
    /// Column letter or row-1 header (`lookup`; the filter of `aggregate`).
    column: Option<String>,
    /// A cell value; `null` (an empty cell) included.
    #[serde(default, deserialize_with = "any_value")]
    value: Option<Value>,
    /// Cell values from column A.
    values: Option<Vec<Value>>,
    /// Aggregate function name.
    function: Option<String>,
}

/// The `spreadsheet` tool over a shared [`Workbook`].
#[derive(Debug, Clone)]
pub struct Spreadsheet {
    book: Arc<Workbook>,
}

impl Spreadsheet {
    /// Name the model calls the tool by.
    pub const NAME: &'static str = "spreadsheet";

    /// The tool over `book`.
    pub fn new(book: Arc<Workbook>) -> Self {
        Spreadsheet { book }
    }
}

#[async_trait]
impl Tool for Spreadsheet {
    fn spec(&self) -> ToolSpec {
        let cell_value = json!({"type": ["string", "number", "null"]});
        let functions: Vec<&str> = Aggregate::ALL.iter().map(|a| a.name()).collect();
        ToolSpec::function(
            Self::NAME,
            "Works on spreadsheet sheets. op=sheets lists them; read {sheet, range}; lookup \
             {sheet, column, value} finds rows; write {sheet, cell, value}; add {sheet, cell, \
             value} adds a number to a cell; append {sheet, values}; aggregate {sheet, range, \
             function} and, to use only rows where a column equals a value, {column, value}.",
            json!({
                "type": "object",
                "properties": {
                    "op": {"type": "string", "enum": OPS},
                    "sheet": {"type": "string", "description": "Sheet name (may be left out with one sheet)."},
                    "range": {"type": "string", "description": "A1-style range, e.g. \"B2:D5\", \"C4\" or \"C:C\"."},
                    "cell": {"type": "string", "description": "One cell, e.g. \"C4\"."},
                    "column": {"type": "string", "description": "Column letter or row-1 header."},
                    "value": cell_value,
                    "values": {"type": "array", "items": cell_value, "maxItems": MAX_COLUMNS},
                    "function": {"type": "string", "enum": functions}
                },
                "required": ["op"],
                "additionalProperties": false
            }),
        )
    }

    async fn call(&self, args: Value, _ctx: &ToolContext) -> Result<String, ToolError> {
        let args: SpreadsheetArgs = parse_args(args)?;
        let book = Arc::clone(&self.book);
        tokio::task::spawn_blocking(move || run_op(&book, &args))
            .await
            .map_err(|e| ToolError::Failed(format!("the spreadsheet operation crashed: {e}")))?
    }
}

/// The string argument `key` (holding `given`), required by `op`.
fn needed<'a>(given: &'a Option<String>, key: &str, op: &str) -> Result<&'a str, ToolError> {
    given
        .as_deref()
        .ok_or_else(|| invalid(format!("op `{op}` needs the `{key}` argument")))
}

/// An invalid-arguments error.
fn invalid(message: String) -> ToolError {
    ToolError::InvalidArguments(message)
}

/// Runs the op `args` asks for (blocking).
fn run_op(book: &Workbook, args: &SpreadsheetArgs) -> Result<String, ToolError> {
    let op = args.op.as_str();
    if op == "sheets" {
        return list_sheets(book);
    }
    let sheet = sheet_arg(book, args, op)?;
    let failed = ToolError::Failed;
    match op {
        "read" => {
            let range = Range::parse(needed(&args.range, "range", op)?).map_err(invalid)?;
            if range.cell_count() > MAX_READ_CELLS {
                return Err(invalid(format!(
                    "range {range} has {} cells, more than the limit of {MAX_READ_CELLS}; read \
                     a smaller range",
                    range.cell_count()
                )));
            }
            let rows = book.read(&sheet, &range).map_err(failed)?;
            let letters: Vec<String> = range.columns().map(|c| column_letter(c).into()).collect();
            let mut lines = vec![
                format!("{sheet} {range}"),
                format!("row | {}", letters.join(" | ")),
            ];
            lines.extend(
                rows.iter()
                    .map(|(r, cells)| format!("{r} | {}", join(cells))),
            );
            Ok(lines.join("\n"))
        }
        "lookup" => {
            let column = column_arg(book, &sheet, needed(&args.column, "column", op)?)?;
            let value = value_arg(args, op)?;
            let rows = book.lookup(&sheet, column, &value).map_err(failed)?;
            let what = format!(
                "in {sheet} where {} = {:?}",
                column_letter(column),
                value.to_string()
            );
            if rows.is_empty() {
                return Ok(format!("no rows {what}"));
            }
            let plural = if rows.len() == 1 { "" } else { "s" };
            let mut lines = vec![format!("{} row{plural} {what}:", rows.len())];
            for (r, cells) in rows.iter().take(MAX_LOOKUP_ROWS) {
                let shown: Vec<String> = cells
                    .iter()
                    .enumerate()
                    .map(|(i, c)| format!("{}: {c}", column_letter(i)))
                    .collect();
                lines.push(format!("row {r} | {}", shown.join(" | ")));
            }
            if rows.len() > MAX_LOOKUP_ROWS {
                lines.push(format!("…[only the first {MAX_LOOKUP_ROWS} rows shown]"));
            }
            Ok(lines.join("\n"))
        }
        "write" => {
            let at = CellRef::parse(needed(&args.cell, "cell", op)?).map_err(invalid)?;
            let value = value_arg(args, op)?;
            let old = book.write(&sheet, at, &value).map_err(failed)?;
            Ok(format!("{at} = {value} (was {old})"))
        }
        "add" => {
            let at = CellRef::parse(needed(&args.cell, "cell", op)?).map_err(invalid)?;
            let value = value_arg(args, op)?;
            let amount = value.as_number().ok_or_else(|| {
                invalid(format!(
                    "op `add` needs a number as `value`, not {:?}",
                    value.to_string()
                ))
            })?;
            let (old, new) = book.add(&sheet, at, amount).map_err(failed)?;
            Ok(format!("{at} = {new} (was {old})"))
        }
        "append" => {
            let values = match &args.values {
                Some(items) if !items.is_empty() => items
                    .iter()
                    .map(Cell::from_json)
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(invalid)?,
                Some(_) => return Err(invalid("`values` must be a non-empty array".into())),
                None => return Err(invalid("op `append` needs the `values` argument".into())),
            };
            let row = book.append(&sheet, &values).map_err(failed)?;
            Ok(format!("appended row {row}: {}", join(&values)))
        }
        "aggregate" => {
            let range = Range::parse(needed(&args.range, "range", op)?).map_err(invalid)?;
            let name = needed(&args.function, "function", op)?;
            let function = Aggregate::parse(name)
                .ok_or_else(|| invalid(format!("unknown function {name:?}")))?;
            let filter = match (&args.column, &args.value) {
                (Some(name), Some(_)) => {
                    Some((column_arg(book, &sheet, name)?, value_arg(args, op)?))
                }
                (None, None) => None,
                (Some(_), None) => {
                    return Err(invalid(
                        "`column` filters rows by a `value`: give both or neither".into(),
                    ));
                }
                (None, Some(_)) => {
                    return Err(invalid(
                        "`value` filters rows of a `column`: give both or neither".into(),
                    ));
                }
            };
            let (value, used) = book
                .aggregate(
                    &sheet,
                    &range,
                    function,
                    filter.as_ref().map(|(c, v)| (*c, v)),
                )
                .map_err(failed)?;
            let scope = match &filter {
                Some((column, value)) => format!(
                    "{range} where {} = {:?}",
                    column_letter(*column),
                    value.to_string()
                ),
                None => range.to_string(),
            };
            let value = value
                .ok_or_else(|| failed(format!("{scope} holds no numbers to take the {name} of")))?;
            let what = if function == Aggregate::Count {
                "non-empty"
            } else {
                "numeric"
            };
            Ok(format!(
                "{name} of {scope} = {} ({used} {what} cells)",
                show_number(value)
            ))
        }
        other => Err(invalid(format!(
            "unknown op {other:?} (ops: {})",
            OPS.join(", ")
        ))),
    }
}

/// The `sheet` argument, or the only sheet when it is left out.
fn sheet_arg(book: &Workbook, args: &SpreadsheetArgs, op: &str) -> Result<String, ToolError> {
    if let Some(sheet) = &args.sheet {
        return Ok(sheet.clone());
    }
    let names = book.sheet_names().map_err(ToolError::Failed)?;
    match names.as_slice() {
        [only] => Ok(only.clone()),
        _ => Err(invalid(format!(
            "op `{op}` needs the `sheet` argument (sheets: {})",
            names.join(", ")
        ))),
    }
}

/// The column named `name` (a letter, or a row-1 header of `sheet`).
fn column_arg(book: &Workbook, sheet: &str, name: &str) -> Result<usize, ToolError> {
    match column_index(name) {
        Some(c) if c < MAX_COLUMNS => Ok(c),
        _ => book
            .header_column(sheet, name)
            .map_err(ToolError::Failed)?
            .ok_or_else(|| {
                invalid(format!(
                    "no column {name:?}: give a letter A-Z or a row-1 header"
                ))
            }),
    }
}

/// The `value` argument as a cell.
fn value_arg(args: &SpreadsheetArgs, op: &str) -> Result<Cell, ToolError> {
    let value = args
        .value
        .as_ref()
        .ok_or_else(|| invalid(format!("op `{op}` needs the `value` argument")))?;
    Cell::from_json(value).map_err(invalid)
}

/// Cells joined with ` | `.
fn join(cells: &[Cell]) -> String {
    cells
        .iter()
        .map(Cell::to_string)
        .collect::<Vec<_>>()
        .join(" | ")
}

/// One line per sheet with its used range.
fn list_sheets(book: &Workbook) -> Result<String, ToolError> {
    let names = book.sheet_names().map_err(ToolError::Failed)?;
    if names.is_empty() {
        return Ok("(no sheets)".to_string());
    }
    let mut lines = Vec::new();
    for name in names {
        let rows = book.cells(&name).map_err(ToolError::Failed)?;
        let width = rows.iter().map(|(_, c)| c.len()).max().unwrap_or(0);
        lines.push(match rows.last() {
            Some((last, _)) if width > 0 => {
                let end = CellRef {
                    column: width - 1,
                    row: *last,
                };
                format!("{name}: A1:{end} ({} rows with values)", rows.len())
            }
            _ => format!("{name}: empty"),
        });
    }
    Ok(lines.join("\n"))
}
