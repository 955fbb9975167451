//! The `sql` tool: one SQL statement per call on a session's private SQLite database
//! ([`SqlDatabase`]), read-only or read-write, with row, output and time limits.
//!
//! SQLite calls block, so the tool runs them on tokio's blocking pool; a statement that runs
//! past [`SqlLimits::time_limit`] is interrupted by SQLite's progress handler.

mod database;
mod render;

use std::sync::Arc;
use std::time::Duration;

use agentrl_core::{Tool, ToolContext, ToolError, ToolSpec};
use async_trait::async_trait;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::arguments::parse_args;

pub(crate) use database::describe_error;
pub use database::{SqlAccess, SqlDatabase};

/// Limits of the [`Sql`] tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SqlLimits {
    /// Rows shown at most; the output says when a query returned more.
    pub max_rows: usize,
    /// Characters of output at most; longer output is cut with a note.
    pub max_output_chars: usize,
    /// Time one statement may run before SQLite interrupts it.
    pub time_limit: Duration,
}

impl Default for SqlLimits {
    /// 50 rows, 3000 characters, 2 seconds.
    fn default() -> Self {
        SqlLimits {
            max_rows: 50,
            max_output_chars: 3000,
            time_limit: Duration::from_secs(2),
        }
    }
}

/// The `sql` tool: runs the `query` argument on its database and shows the result as a table.
#[derive(Debug, Clone)]
pub struct Sql {
    db: Arc<SqlDatabase>,
    limits: SqlLimits,
}

impl Sql {
    /// Name the model calls the tool by.
    pub const NAME: &'static str = "sql";

    /// The tool over `db` with `limits`.
    pub fn new(db: Arc<SqlDatabase>, limits: SqlLimits) -> Self {
        Sql { db, limits }
    }

    /// The database the tool queries.
    pub fn database(&self) -> &Arc<SqlDatabase> {
        &self.db
    }
}

/// The arguments of the `sql` tool.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SqlArgs {
    /// One SQLite statement.
    query: String,
}

#[async_trait]
impl Tool for Sql {
    fn spec(&self) -> ToolSpec {
        let access = match self.db.access() {
            SqlAccess::ReadOnly => "The database is read-only: only statements that read.",
            SqlAccess::ReadWrite => "The database is writable.",
        };
        ToolSpec::function(
            Self::NAME,
            format!(
                "Runs one SQLite statement and returns the result rows (at most {}). {access}",
                self.limits.max_rows
            ),
            json!({
                "type": "object",
                "properties": {
                    "query": {
                        "type": "string",
                        "description": "One SQLite statement, e.g. \"SELECT COUNT(*) FROM orders\"."
                    }
                },
                "required": ["query"],
                "additionalProperties": false
            }),
        )
    }

    async fn call(&self, args: Value, _ctx: &ToolContext) -> Result<String, ToolError> {
        let SqlArgs { query } = parse_args(args)?;
        let query = query.trim().to_string();
        if query.is_empty() {
            return Err(ToolError::InvalidArguments("`query` is empty".to_string()));
        }
        let db = Arc::clone(&self.db);
        let limits = self.limits;
        tokio::task::spawn_blocking(move || {
            db.with_time_limit(limits.time_limit, |conn| {
                render::run_statement(conn, &query, db.access(), &limits)
            })
        })
        .await
        .map_err(|e| ToolError::Failed(format!("the SQL statement crashed: {e}")))?
    }
}
