//! The `spreadsheet-ops` reference solver: it finds rows with `lookup` (or the sheet's extent
//! with `sheets`), reads the numbers it needs from the tool's answers, then writes, appends or
//! answers.

use agentrl_core::{Message, Role, Task, ToolCall};
use agentrl_tools::Spreadsheet;
use serde_json::{Value, json};

use super::task::{Job, SHEET, SheetTask};
use crate::factory::Solver;

/// The reference solver (deterministic; one tool call a step).
#[derive(Debug, Clone, Copy, Default)]
pub struct SpreadsheetExpert;

/// A `spreadsheet` call with `args` (the sheet is always named).
fn call(step: usize, mut args: Value) -> Message {
    args["sheet"] = json!(SHEET);
    let call = ToolCall::new(format!("call_{step}"), Spreadsheet::NAME, &args);
    Message::assistant_tool_calls(None, vec![call])
}

/// A row found by `lookup`: its number and its cells by column letter.
type FoundRow = (u32, Vec<(String, String)>);

/// The lines `row N | A: .. | B: ..` of a lookup answer.
fn found_rows(text: &str) -> Vec<FoundRow> {
    text.lines()
        .filter_map(|line| {
            let mut parts = line.split(" | ");
            let row = parts.next()?.strip_prefix("row ")?.parse().ok()?;
            let cells = parts
                .filter_map(|p| p.split_once(": "))
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            Some((row, cells))
        })
        .collect()
}

/// The number in column `letter` of a found row.
fn number_in(row: &FoundRow, letter: &str) -> Option<i64> {
    let (_, value) = row.1.iter().find(|(k, _)| k == letter)?;
    value.trim().parse().ok()
}

/// The last row of the sheet from a `sheets` answer (`inventory: A1:D9 (...)`).
fn last_row(text: &str) -> Option<u32> {
    let (_, rest) = text.split_once(":D")?;
    rest.split(' ').next()?.parse().ok()
}

/// The value of an `aggregate` answer (`sum of C2:C9 = 420 (8 numeric cells)`).
fn aggregate_value(text: &str) -> Option<i64> {
    let (_, rest) = text.split_once(" = ")?;
    rest.split(' ').next()?.parse().ok()
}

/// The next action for `job` after `step` tool answers, the last being `last`; `None` when
/// the answer it needs cannot be read. With `off_by_one`, every row it works out for itself
/// (an item's row to write, the last row of a total) is one too small, as if the header row
/// did not count.
pub(super) fn next(job: &Job, step: usize, last: &str, off_by_one: bool) -> Option<Message> {
    let rows = found_rows(last);
    let first = rows.first();
    let shift = |row: u32| row.saturating_sub(u32::from(off_by_one));
    let write = |row: u32, value: i64| {
        let cell = format!("C{}", shift(row));
        json!({"op": "write", "cell": cell, "value": value})
    };
    let args = match (job, step) {
        (Job::LookUp { item, .. } | Job::SetStock { item, .. } | Job::Restock { item, .. }, 0) => {
            json!({"op": "lookup", "column": "Item", "value": item})
        }
        (Job::CategoryTotal { category }, 0) => {
            json!({"op": "lookup", "column": "Category", "value": category})
        }
        (Job::AddItem { item }, 0) => {
            let values = json!([item.name, item.category, item.stock, item.price]);
            json!({"op": "append", "values": values})
        }
        (Job::WriteTotal { .. }, 0) => json!({"op": "sheets"}),
        (Job::LookUp { price, .. }, 1) => {
            let value = number_in(first?, if *price { "D" } else { "C" })?;
            return Some(Message::assistant(value.to_string()));
        }
        (Job::CategoryTotal { .. }, 1) => {
            let total: Option<i64> = rows.iter().map(|r| number_in(r, "C")).sum();
            return Some(Message::assistant(total?.to_string()));
        }
        (Job::SetStock { stock, .. }, 1) => write(first?.0, *stock),
        (Job::Restock { received, .. }, 1) => write(first?.0, number_in(first?, "C")? + received),
        (Job::WriteTotal { .. }, 1) => {
            let range = format!("C2:C{}", shift(last_row(last)?));
            json!({"op": "aggregate", "range": range, "function": "sum"})
        }
        (Job::WriteTotal { cell }, 2) => {
            json!({"op": "write", "cell": cell, "value": aggregate_value(last)?})
        }
        _ if last.starts_with("error") => return None,
        _ => return Some(Message::assistant("done")),
    };
    Some(call(step, args))
}

/// The next action of the scripted agents for `job` after the tool answers in `history`;
/// with `off_by_one`, see [`next`].
pub(super) fn next_after(job: &Job, history: &[Message], off_by_one: bool) -> Message {
    let results: Vec<&str> = history
        .iter()
        .filter(|m| m.role == Role::Tool)
        .map(Message::text)
        .collect();
    let last = results.last().copied().unwrap_or("");
    next(job, results.len(), last, off_by_one)
        .unwrap_or_else(|| Message::assistant(format!("I could not finish: {last}")))
}

/// The reply of a solver that cannot read its task.
pub(super) fn unreadable_task(error: &agentrl_core::Error) -> Message {
    Message::assistant(format!("I cannot read this task: {error}"))
}

impl Solver for SpreadsheetExpert {
    fn act(&mut self, task: &Task, history: &[Message]) -> Message {
        match SheetTask::from_task(task) {
            Ok(sheet_task) => next_after(&sheet_task.job, history, false),
            Err(e) => unreadable_task(&e),
        }
    }
}
