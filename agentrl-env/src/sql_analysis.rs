//! `sql-analysis`: answer a data-analysis question (filters, aggregations, joins) about a
//! generated shop database, querying it with a read-only `sql` tool. With `path` and
//! `database` options it plays a user's question file over the user's SQLite file instead
//! (see [`SQL_ANALYSIS_USER_DATA`]).

mod data;
mod demonstrator;
mod env;
mod question;
mod task;

use std::sync::Arc;

use agentrl_core::{Env, Message, Result, Role, Split, Task, ToolCall};
use agentrl_tools::Sql;
use serde_json::{Value, json};

pub use data::{Customer, Order, Product, SCHEMA, Shop};
pub use demonstrator::{SQL_DEMONSTRATOR_KNOBS, SqlDemonstrator};
pub use env::SqlAnalysisEnv;
pub use question::{Question, TOLERANCE, Truth, check};
pub use task::SqlTask;

use crate::dataset::{EnvOptions, UserDataEnv};
use crate::demonstrator::{DemonstratorKnobs, KnobDoc};
use crate::factory::{EnvFactory, Solver};
use crate::wrappers::TurnLimit;

/// Registry id of the env.
pub const SQL_ANALYSIS_ID: &str = "sql-analysis";

/// Steps allowed per episode: a few queries, then the answer.
pub const SQL_ANALYSIS_MAX_TURNS: usize = 6;

/// The `sql-analysis` factory; `seed` selects the task set (default `0`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SqlAnalysis {
    /// Seed of the task generator.
    pub seed: u64,
}

/// How `sql-analysis` plays a user's question file: `database` (a SQLite file, opened
/// read-only) is required, and the `sql` tool, the `auto` checker (numeric for a number, else
/// exact), a system prompt and this env's turn limit are the defaults.
pub const SQL_ANALYSIS_USER_DATA: UserDataEnv = UserDataEnv {
    id: SQL_ANALYSIS_ID,
    required: &[("database", "the SQLite file the questions are about")],
    defaults: sql_defaults,
};

/// Dataset option defaults of `sql-analysis`.
fn sql_defaults() -> Vec<(&'static str, Value)> {
    vec![
        ("tools", json!(["sql"])),
        ("checker", json!("auto")),
        ("max_turns", json!(SQL_ANALYSIS_MAX_TURNS)),
        (
            "system",
            json!(
                "Answer the question by querying the read-only SQLite database with the sql \
                 tool, then reply with the answer alone."
            ),
        ),
    ]
}

impl SqlAnalysis {
    /// The factory for the task set of `seed`.
    pub fn new(seed: u64) -> Self {
        SqlAnalysis { seed }
    }

    /// The factory `options` ask for: a user's question file and database with `path` and
    /// `database`, else the generated tasks of `seed` (see [`SQL_ANALYSIS_USER_DATA`]).
    pub fn from_options(options: &EnvOptions) -> Result<Arc<dyn EnvFactory>> {
        SQL_ANALYSIS_USER_DATA.factory(options, |seed| Arc::new(SqlAnalysis::new(seed)))
    }
}

impl EnvFactory for SqlAnalysis {
    fn id(&self) -> &str {
        SQL_ANALYSIS_ID
    }

    fn description(&self) -> &str {
        "answer a data question about a generated SQLite database with a read-only sql tool"
    }

    fn task(&self, split: Split, index: u64) -> Task {
        SqlTask::generate(self.seed, split, index).to_task(split, index)
    }

    fn make(&self) -> Box<dyn Env> {
        Box::new(TurnLimit::new(
            SqlAnalysisEnv::default(),
            SQL_ANALYSIS_MAX_TURNS,
        ))
    }

    fn max_turns(&self) -> usize {
        SQL_ANALYSIS_MAX_TURNS
    }

    /// The expert is deterministic, so `seed` is not used.
    fn solver(&self, _seed: u64) -> Box<dyn Solver> {
        Box::new(SqlExpert)
    }

    fn demonstrator_knobs(&self) -> &[KnobDoc] {
        SQL_DEMONSTRATOR_KNOBS
    }

    /// A [`SqlDemonstrator`] (see [`SqlDemonstrator::from_knobs`]).
    fn demonstrator(&self, knobs: &DemonstratorKnobs, seed: u64) -> Result<Box<dyn Solver>> {
        Ok(Box::new(SqlDemonstrator::from_knobs(seed, knobs)?))
    }
}

/// The reference solver: runs the question's reference SQL with the `sql` tool, then answers
/// with the value in the first row of the result.
#[derive(Debug, Clone, Copy, Default)]
pub struct SqlExpert;

impl Solver for SqlExpert {
    fn act(&mut self, task: &Task, history: &[Message]) -> Message {
        match SqlTask::from_task(task) {
            Ok(sql_task) => query_then_answer(&sql_task.question.reference_sql(), history),
            Err(e) => unreadable_task(&e),
        }
    }
}

/// The reply of a solver that cannot read its task.
fn unreadable_task(error: &agentrl_core::Error) -> Message {
    Message::assistant(format!("I cannot read this task: {error}"))
}

/// The scripted agents' action: run `query` with the `sql` tool, then answer with the value
/// in the first row of its result.
fn query_then_answer(query: &str, history: &[Message]) -> Message {
    let Some(result) = history.iter().rev().find(|m| m.role == Role::Tool) else {
        let call = ToolCall::new("call_0", Sql::NAME, &json!({ "query": query }));
        return Message::assistant_tool_calls(None, vec![call]);
    };
    // The result is a header line, then the one-value row.
    match result.text().lines().nth(1) {
        Some(value) if !result.text().starts_with("error") => Message::assistant(value.trim()),
        _ => Message::assistant(format!("The query failed: {}", result.text())),
    }
}
