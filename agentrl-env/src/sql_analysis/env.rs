//! The `sql-analysis` session: a private read-only SQLite database per episode, the `sql`
//! tool over it, and the check of the final answer.

use std::sync::Arc;

use agentrl_core::{Env, Error, Message, Observation, Result, Step, StepInfo, Task, ToolContext};
use agentrl_tools::{Sql, SqlAccess, SqlDatabase, SqlLimits, ToolBox, ToolLimits};
use async_trait::async_trait;

use super::SQL_ANALYSIS_ID;
use super::data::SCHEMA;
use super::question::{Truth, check};
use super::task::SqlTask;
use crate::session::{continue_step, final_step, invalid_step, run_tool_calls, wrong_role};

/// What the agent is told after an unusable action.
const HINT: &str = "call the sql tool or give the answer";

/// Where the session stands.
enum State {
    /// No episode running (none started, or the last one ended).
    Idle,
    /// An episode is running: the expected answer and the tool box over its database (the
    /// database is removed when this state is left).
    Running {
        /// The ground truth.
        truth: Truth,
        /// The `sql` tool over this episode's database.
        tools: ToolBox,
        /// This episode's database.
        db: Arc<SqlDatabase>,
    },
}

/// One `sql-analysis` session, without turn limit (the factory adds it).
///
/// The agent sees the schema and a question, may query the database with the `sql` tool
/// (read-only), and ends the episode with a message without tool calls: its answer.
pub struct SqlAnalysisEnv {
    limits: SqlLimits,
    ctx: ToolContext,
    state: State,
}

impl Default for SqlAnalysisEnv {
    fn default() -> Self {
        Self::new(SqlLimits::default())
    }
}

impl SqlAnalysisEnv {
    /// A session whose `sql` tool applies `limits`.
    pub fn new(limits: SqlLimits) -> Self {
        SqlAnalysisEnv {
            limits,
            ctx: ToolContext::default(),
            state: State::Idle,
        }
    }

    /// The running episode's database (removed when the episode ends or the session drops).
    pub fn database(&self) -> Option<&Arc<SqlDatabase>> {
        match &self.state {
            State::Running { db, .. } => Some(db),
            State::Idle => None,
        }
    }
}

/// Builds the episode's database from `task` off the async runtime.
async fn database_for(task: &SqlTask) -> Result<Arc<SqlDatabase>> {
    let shop = task.shop.clone();
    let built = tokio::task::spawn_blocking(move || {
        SqlDatabase::build(SqlAccess::ReadOnly, |conn| shop.load(conn))
    })
    .await;
    let crashed = |e| {
        Error::env(
            SQL_ANALYSIS_ID,
            format!("building the database crashed: {e}"),
        )
    };
    Ok(Arc::new(built.map_err(crashed)??))
}

#[async_trait]
impl Env for SqlAnalysisEnv {
    fn id(&self) -> &str {
        SQL_ANALYSIS_ID
    }

    async fn reset(&mut self, task: &Task) -> Result<Observation> {
        self.state = State::Idle;
        let sql_task = SqlTask::from_task(task)?;
        let db = database_for(&sql_task).await?;
        let tools =
            ToolBox::new(ToolLimits::default()).with(Sql::new(Arc::clone(&db), self.limits))?;
        let text = format!(
            "A read-only SQLite database has these tables:\n{SCHEMA}\n\nQuestion: {}\nQuery \
             the database with the sql tool, then reply with the answer alone.",
            sql_task.question.text()
        );
        let observation = Observation {
            messages: vec![Message::user(text)],
            tools: tools.specs(),
        };
        self.state = State::Running {
            truth: sql_task.truth,
            tools,
            db,
        };
        Ok(observation)
    }

    async fn step(&mut self, action: &Message) -> Result<Step> {
        let State::Running { truth, tools, .. } = &self.state else {
            return Err(Error::env(
                SQL_ANALYSIS_ID,
                "step called outside an episode",
            ));
        };
        if let Some(reason) = wrong_role(action) {
            return Ok(invalid_step(&reason, HINT));
        }
        if !action.tool_calls.is_empty() {
            let (messages, info) =
                run_tool_calls(SQL_ANALYSIS_ID, tools, &self.ctx, action, || false).await?;
            return Ok(continue_step(messages, info));
        }
        let text = action.text();
        if text.trim().is_empty() {
            return Ok(invalid_step("empty message", HINT));
        }
        let success = check(truth, text);
        self.state = State::Idle;
        Ok(final_step(Vec::new(), success, StepInfo::default()))
    }
}
