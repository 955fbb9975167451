//! `spreadsheet-ops`: look up and update a generated inventory sheet with the `spreadsheet`
//! tool; success is judged on the final sheet (and the answer, for look-ups).

mod demonstrator;
mod env;
mod solver;
mod task;

use agentrl_core::{Env, Result, Split, Task};

pub use demonstrator::{SPREADSHEET_DEMONSTRATOR_KNOBS, SpreadsheetDemonstrator};
pub use env::{SpreadsheetOpsEnv, same_cell, same_sheet};
pub use solver::SpreadsheetExpert;
pub use task::{HEADERS, Item, Job, SHEET, SheetTask};

use crate::demonstrator::{DemonstratorKnobs, KnobDoc};
use crate::factory::{EnvFactory, Solver};
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

    fn demonstrator_knobs(&self) -> &[KnobDoc] {
        SPREADSHEET_DEMONSTRATOR_KNOBS
    }

    /// A [`SpreadsheetDemonstrator`] (see [`SpreadsheetDemonstrator::from_knobs`]).
    fn demonstrator(&self, knobs: &DemonstratorKnobs, seed: u64) -> Result<Box<dyn Solver>> {
        Ok(Box::new(SpreadsheetDemonstrator::from_knobs(seed, knobs)?))
    }
}
