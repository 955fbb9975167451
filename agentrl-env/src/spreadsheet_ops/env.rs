//! The `spreadsheet-ops` session: a private workbook per episode, the `spreadsheet` tool over
//! it, and the check of the final sheet (and of the answer, for look-ups).

use std::sync::Arc;

use agentrl_core::{Env, Error, Message, Observation, Result, Step, StepInfo, Task, ToolContext};
use agentrl_tools::spreadsheet::SheetRow;
use agentrl_tools::{Cell, Spreadsheet, ToolBox, ToolLimits, Workbook};
use async_trait::async_trait;

use super::SPREADSHEET_OPS_ID;
use super::task::{HEADERS, SHEET, SheetTask};
use crate::answer::answer_matches;
use crate::session::{continue_step, final_step, invalid_step, run_tool_calls, wrong_role};

/// What the agent is told after an unusable action.
const HINT: &str = "call the spreadsheet tool, or reply without a tool call when done";

/// A running episode: the task, its workbook and the tool box over it.
struct Episode {
    task: SheetTask,
    book: Arc<Workbook>,
    tools: ToolBox,
}

/// One `spreadsheet-ops` session, without turn limit (the factory adds it).
///
/// The agent works on sheet `inventory` with the `spreadsheet` tool; a message without tool
/// calls ends the episode. It succeeds when the sheet equals the expected one and, for a
/// look-up, the message's last number is the answer.
#[derive(Default)]
pub struct SpreadsheetOpsEnv {
    ctx: ToolContext,
    episode: Option<Episode>,
}

impl SpreadsheetOpsEnv {
    /// A fresh session.
    pub fn new() -> Self {
        Self::default()
    }
}

/// Runs blocking workbook work off the async runtime.
async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> std::result::Result<T, String> + Send + 'static,
) -> Result<T> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| Error::env(SPREADSHEET_OPS_ID, format!("workbook work crashed: {e}")))?
        .map_err(|e| Error::env(SPREADSHEET_OPS_ID, e))
}

/// Whether two cells hold the same value: numbers numerically (also when one is numeric
/// text), text trimmed and ignoring case.
pub fn same_cell(actual: &Cell, expected: &Cell) -> bool {
    let number = |c: &Cell| match c {
        Cell::Number(n) => Some(*n),
        Cell::Text(t) => t.trim().parse::<f64>().ok(),
        Cell::Empty => None,
    };
    match (actual, expected) {
        (Cell::Empty, Cell::Empty) => true,
        (Cell::Text(a), Cell::Text(e)) => a.trim().eq_ignore_ascii_case(e.trim()),
        (a, Cell::Number(e)) => number(a) == Some(*e),
        _ => false,
    }
}

/// Whether the sheet's used rows equal `expected` (rows from 1; trailing empty cells and
/// empty rows do not count).
pub fn same_sheet(actual: &[SheetRow], expected: &[Vec<Cell>]) -> bool {
    let trimmed = |cells: &[Cell]| -> Vec<Cell> {
        let end = cells
            .iter()
            .rposition(|c| !c.is_empty())
            .map_or(0, |i| i + 1);
        cells[..end].to_vec()
    };
    let want: Vec<(u32, Vec<Cell>)> = expected
        .iter()
        .enumerate()
        .map(|(i, cells)| (i as u32 + 1, trimmed(cells)))
        .filter(|(_, c)| !c.is_empty())
        .collect();
    let have: Vec<(u32, Vec<Cell>)> = actual
        .iter()
        .map(|(r, cells)| (*r, trimmed(cells)))
        .filter(|(_, c)| !c.is_empty())
        .collect();
    have.len() == want.len()
        && have.iter().zip(&want).all(|((hr, hc), (wr, wc))| {
            hr == wr && hc.len() == wc.len() && hc.iter().zip(wc).all(|(a, e)| same_cell(a, e))
        })
}

#[async_trait]
impl Env for SpreadsheetOpsEnv {
    fn id(&self) -> &str {
        SPREADSHEET_OPS_ID
    }

    async fn reset(&mut self, task: &Task) -> Result<Observation> {
        self.episode = None;
        let sheet_task = SheetTask::from_task(task)?;
        let rows = sheet_task.initial_rows();
        let book = blocking(move || {
            let book = Workbook::new().map_err(|e| e.to_string())?;
            book.add_sheet(SHEET, &rows)?;
            Ok(book)
        })
        .await?;
        let book = Arc::new(book);
        let tools =
            ToolBox::new(ToolLimits::default()).with(Spreadsheet::new(Arc::clone(&book)))?;
        let answer = if sheet_task.expected_answer().is_some() {
            "reply with the number alone"
        } else {
            "reply \"done\" without a tool call"
        };
        let text = format!(
            "Sheet `{SHEET}` lists one item a row under the headers {} in row 1 (columns A-D). \
             Task: {}\nUse the spreadsheet tool; when finished, {answer}.",
            HEADERS.join(", "),
            sheet_task.text()
        );
        let observation = Observation {
            messages: vec![Message::user(text)],
            tools: tools.specs(),
        };
        self.episode = Some(Episode {
            task: sheet_task,
            book,
            tools,
        });
        Ok(observation)
    }

    async fn step(&mut self, action: &Message) -> Result<Step> {
        let Some(episode) = &self.episode else {
            return Err(Error::env(
                SPREADSHEET_OPS_ID,
                "step called outside an episode",
            ));
        };
        if let Some(reason) = wrong_role(action) {
            return Ok(invalid_step(&reason, HINT));
        }
        if !action.tool_calls.is_empty() {
            let (messages, info) = run_tool_calls(
                SPREADSHEET_OPS_ID,
                &episode.tools,
                &self.ctx,
                action,
                || false,
            )
            .await?;
            return Ok(continue_step(messages, info));
        }
        let text = action.text();
        if text.trim().is_empty() {
            return Ok(invalid_step("empty message", HINT));
        }
        let book = Arc::clone(&episode.book);
        let actual = blocking(move || book.cells(SHEET)).await?;
        let sheet_ok = same_sheet(&actual, &episode.task.expected_rows());
        let answer_ok = episode
            .task
            .expected_answer()
            .is_none_or(|expected| answer_matches(text, expected));
        let mut info = StepInfo::default();
        info.extra.insert("sheet_ok".into(), sheet_ok.into());
        info.extra.insert("answer_ok".into(), answer_ok.into());
        self.episode = None;
        Ok(final_step(Vec::new(), sheet_ok && answer_ok, info))
    }
}
