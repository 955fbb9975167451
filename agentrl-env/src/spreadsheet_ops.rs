//! `spreadsheet-ops`: look up and update a generated inventory sheet with the `spreadsheet`
//! tool; success is judged on the final sheet (and the answer, for look-ups).

mod env;
mod task;

use agentrl_core::{Env, Message, Role, Split, Task, ToolCall};
use agentrl_tools::Spreadsheet;
use serde_json::{Value, json};

pub use env::{SpreadsheetOpsEnv, same_cell, same_sheet};
pub use task::{HEADERS, Item, Job, SHEET, SheetTask};

use crate::registry::{EnvFactory, Solver};
use crate::wrappers::TurnLimit;

/// Registry id of the env.
pub const SPREADSHEET_OPS_ID: &str = "spreadsheet-ops";

/// Steps allowed per episode (the longest job takes the expert four).
pub const SPREADSHEET_OPS_MAX_TURNS: usize = 8;

/// The `spreadsheet-ops` factory; `seed` selects the task set (default `0`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SpreadsheetOps {
    /// Seed of the task generator.
    pub seed: u64,
}

impl SpreadsheetOps {
    /// The factory for the task set of `seed`.
    pub fn new(seed: u64) -> Self {
        SpreadsheetOps { seed }
    }
}

impl EnvFactory for SpreadsheetOps {
    fn id(&self) -> &str {
        SPREADSHEET_OPS_ID
    }

    fn description(&self) -> &str {
        "look up and update an inventory sheet with a spreadsheet tool"
    }

    fn task(&self, split: Split, index: u64) -> Task {
        SheetTask::generate(self.seed, split, index).to_task(split, index)
    }

    fn make(&self) -> Box<dyn Env> {
        Box::new(TurnLimit::new(
            SpreadsheetOpsEnv::new(),
            SPREADSHEET_OPS_MAX_TURNS,
        ))
    }

    fn max_turns(&self) -> usize {
        SPREADSHEET_OPS_MAX_TURNS
    }

    /// The expert is deterministic, so `seed` is not used.
    fn solver(&self, _seed: u64) -> Box<dyn Solver> {
        Box::new(SpreadsheetExpert)
    }
}

/// The reference solver: finds rows with `lookup` (or the sheet's extent with `sheets`), reads
/// the numbers it needs from the tool's answers, then writes, appends or answers.
#[derive(Debug, Clone, Copy, Default)]
pub struct SpreadsheetExpert;

/// A `spreadsheet` call with `args`.
fn call(step: usize, args: Value) -> Message {
    let call = ToolCall::new(format!("call_{step}"), Spreadsheet::NAME, &args);
    Message::assistant_tool_calls(None, vec![call])
}

/// Lines `row N | A: .. | B: ..` of a lookup answer as (row, cells by letter).
fn found_rows(text: &str) -> Vec<(u32, Vec<(String, String)>)> {
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

/// The value of column `letter` in a found row, as a number.
fn number_in(cells: &[(String, String)], letter: &str) -> Option<i64> {
    cells
        .iter()
        .find(|(k, _)| k == letter)?
        .1
        .trim()
        .parse()
        .ok()
}

impl Solver for SpreadsheetExpert {
    fn act(&mut self, task: &Task, history: &[Message]) -> Message {
        let sheet_task = match SheetTask::from_task(task) {
            Ok(t) => t,
            Err(e) => return Message::assistant(format!("I cannot read this task: {e}")),
        };
        let results: Vec<&str> = history
            .iter()
            .filter(|m| m.role == Role::Tool)
            .map(Message::text)
            .collect();
        let step = results.len();
        let last = results.last().copied().unwrap_or("");
        let rows = found_rows(last);
        let first = rows.first();
        let lookup = |item: &str| {
            call(
                step,
                json!({"op": "lookup", "sheet": SHEET, "column": "Item", "value": item}),
            )
        };
        let done = || Message::assistant("done");
        let gave_up = || Message::assistant(format!("I could not finish: {last}"));
        match (&sheet_task.job, step) {
            (
                Job::LookUp { item, .. } | Job::SetStock { item, .. } | Job::Restock { item, .. },
                0,
            ) => lookup(item),
            (Job::CategoryTotal { category }, 0) => call(
                step,
                json!({"op": "lookup", "sheet": SHEET, "column": "Category", "value": category}),
            ),
            (Job::AddItem { item }, 0) => call(
                step,
                json!({"op": "append", "sheet": SHEET, "values": [item.name, item.category, item.stock, item.price]}),
            ),
            (Job::WriteTotal { .. }, 0) => call(step, json!({"op": "sheets"})),
            (Job::LookUp { price, .. }, 1) => {
                let letter = if *price { "D" } else { "C" };
                match first.and_then(|(_, cells)| number_in(cells, letter)) {
                    Some(n) => Message::assistant(n.to_string()),
                    None => gave_up(),
                }
            }
            (Job::CategoryTotal { .. }, 1) => {
                let total: Option<i64> = rows.iter().map(|(_, c)| number_in(c, "C")).sum();
                total.map_or_else(gave_up, |t| Message::assistant(t.to_string()))
            }
            (Job::SetStock { stock, .. }, 1) => match first {
                Some((row, _)) => call(
                    step,
                    json!({"op": "write", "sheet": SHEET, "cell": format!("C{row}"), "value": stock}),
                ),
                None => gave_up(),
            },
            (Job::Restock { received, .. }, 1) => {
                match first.and_then(|(r, c)| Some((r, number_in(c, "C")?))) {
                    Some((row, stock)) => call(
                        step,
                        json!({"op": "write", "sheet": SHEET, "cell": format!("C{row}"), "value": stock + received}),
                    ),
                    None => gave_up(),
                }
            }
            (Job::WriteTotal { .. }, 1) => {
                // "inventory: A1:D9 (...)": the last used row.
                let end = last
                    .split_once(":D")
                    .and_then(|(_, r)| r.split(' ').next()?.parse::<u32>().ok());
                match end {
                    Some(end) => call(
                        step,
                        json!({"op": "aggregate", "sheet": SHEET, "range": format!("C2:C{end}"), "function": "sum"}),
                    ),
                    None => gave_up(),
                }
            }
            (Job::WriteTotal { cell }, 2) => {
                // "sum of C2:C9 = 420 (8 numeric cells)"
                let total = last
                    .split_once(" = ")
                    .and_then(|(_, r)| r.split(' ').next()?.parse::<i64>().ok());
                match total {
                    Some(total) => call(
                        step,
                        json!({"op": "write", "sheet": SHEET, "cell": cell, "value": total}),
                    ),
                    None => gave_up(),
                }
            }
            _ if last.starts_with("error") => gave_up(),
            _ => done(),
        }
    }
}
