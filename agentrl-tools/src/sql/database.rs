//! A session's private SQLite database: built once, opened read-only or read-write, guarded
//! against touching other files, and run under a per-statement time limit.

use std::path::Path;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use agentrl_core::{Error, Result};
use rusqlite::hooks::{AuthAction, AuthContext, Authorization};
use rusqlite::limits::Limit;
use rusqlite::{Connection, ErrorCode, OpenFlags};

/// Pragmas that take an argument but only read (e.g. `PRAGMA table_info(orders)`).
const READING_PRAGMAS: [&str; 6] = [
    "table_info",
    "table_xinfo",
    "table_list",
    "index_list",
    "index_info",
    "foreign_key_list",
];

/// SQLite virtual-machine steps between two checks of the time limit.
const PROGRESS_STEPS: i32 = 1000;
/// Longest string or blob a statement may make, in bytes.
const MAX_VALUE_BYTES: i32 = 1 << 20;
/// Pages a database may grow to (64 MiB at SQLite's default page size of 4 KiB).
const MAX_PAGES: i64 = 16_384;

/// Whether the agent may change the database.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SqlAccess {
    /// Opened with `SQLITE_OPEN_READ_ONLY`; statements that write are refused.
    ReadOnly,
    /// Reads and writes allowed (within this database only).
    ReadWrite,
}

/// A private SQLite database owned by one session. A database built by
/// [`SqlDatabase::build`] lives in its own temporary directory, removed when the value is
/// dropped. `ATTACH`, `DETACH` and pragmas that change settings are always refused, so a
/// statement can never reach another file or lift read-only mode; values are limited to 1 MiB
/// and the database to 64 MiB.
#[derive(Debug)]
pub struct SqlDatabase {
    conn: Mutex<Connection>,
    access: SqlAccess,
    /// Keeps the directory of a built database alive; dropped after `conn`.
    temp_dir: Option<tempfile::TempDir>,
}

impl SqlDatabase {
    /// An empty read-write database in memory.
    pub fn in_memory() -> Result<Self> {
        let conn = Connection::open_in_memory().map_err(|e| fail("cannot open", &e))?;
        Self::guarded(conn, SqlAccess::ReadWrite, None)
    }

    /// A fresh database in a new temporary directory: `setup` fills it over a read-write
    /// connection, then it is reopened with `access`.
    pub fn build(
        access: SqlAccess,
        setup: impl FnOnce(&Connection) -> rusqlite::Result<()>,
    ) -> Result<Self> {
        let dir = tempfile::tempdir().map_err(|e| Error::Tool {
            tool: super::Sql::NAME.to_string(),
            message: format!("cannot create a directory for the database: {e}"),
        })?;
        let path = dir.path().join("task.sqlite");
        {
            let conn = Connection::open(&path).map_err(|e| fail("cannot create", &e))?;
            // A throwaway file: no journal, no syncing, one transaction.
            conn.execute_batch("PRAGMA journal_mode = OFF; PRAGMA synchronous = OFF;")
                .map_err(|e| fail("cannot configure", &e))?;
            let tx = conn
                .unchecked_transaction()
                .map_err(|e| fail("cannot fill", &e))?;
            setup(&tx).map_err(|e| fail("cannot fill", &e))?;
            tx.commit().map_err(|e| fail("cannot fill", &e))?;
        }
        let conn = open(&path, access)?;
        Self::guarded(conn, access, Some(dir))
    }

    /// A database file opened with `access` (read-write creates a missing file; the file is not
    /// removed on drop).
    pub fn open(path: &Path, access: SqlAccess) -> Result<Self> {
        Self::guarded(open(path, access)?, access, None)
    }

    /// The directory holding a database made by [`SqlDatabase::build`] (removed on drop).
    pub fn dir(&self) -> Option<&Path> {
        self.temp_dir.as_ref().map(tempfile::TempDir::path)
    }

    /// Whether the agent may write.
    pub fn access(&self) -> SqlAccess {
        self.access
    }

    /// Runs `work` on the connection (blocking: call it off the async runtime); SQLite
    /// interrupts any statement still running `limit` after the start, which then fails with
    /// [`ErrorCode::OperationInterrupted`].
    pub fn with_time_limit<T>(&self, limit: Duration, work: impl FnOnce(&Connection) -> T) -> T {
        let mut conn = self.lock();
        let deadline = Instant::now() + limit;
        // Registering a handler cannot fail for a valid step count.
        let _ = conn.progress_handler(PROGRESS_STEPS, Some(move || Instant::now() >= deadline));
        let out = work(&conn);
        let _ = conn.progress_handler(0, None::<fn() -> bool>);
        out
    }

    /// Locks the connection, recovering it if a holder panicked (SQLite keeps it consistent).
    fn lock(&self) -> MutexGuard<'_, Connection> {
        self.conn.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Installs the guards on `conn`.
    fn guarded(
        mut conn: Connection,
        access: SqlAccess,
        dir: Option<tempfile::TempDir>,
    ) -> Result<Self> {
        let limit = |e: rusqlite::Error| fail("cannot limit", &e);
        conn.set_limit(Limit::SQLITE_LIMIT_ATTACHED, 0)
            .map_err(limit)?;
        conn.set_limit(Limit::SQLITE_LIMIT_LENGTH, MAX_VALUE_BYTES)
            .map_err(limit)?;
        conn.pragma_update(None, "max_page_count", MAX_PAGES)
            .map_err(limit)?;
        if access == SqlAccess::ReadOnly {
            conn.pragma_update(None, "query_only", true)
                .map_err(|e| fail("cannot make read-only", &e))?;
        }
        conn.authorizer(Some(authorize))
            .map_err(|e| fail("cannot guard", &e))?;
        Ok(SqlDatabase {
            conn: Mutex::new(conn),
            access,
            temp_dir: dir,
        })
    }
}

/// Opens `path` with the flags of `access` (never creating it when read-only).
fn open(path: &Path, access: SqlAccess) -> Result<Connection> {
    let mode = match access {
        SqlAccess::ReadOnly => OpenFlags::SQLITE_OPEN_READ_ONLY,
        SqlAccess::ReadWrite => OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_CREATE,
    };
    Connection::open_with_flags(path, mode | OpenFlags::SQLITE_OPEN_NO_MUTEX)
        .map_err(|e| fail("cannot open", &e))
}

/// Refuses `ATTACH`, `DETACH` and pragmas that set a value (other than reading ones).
fn authorize(ctx: AuthContext<'_>) -> Authorization {
    match ctx.action {
        AuthAction::Attach { .. } | AuthAction::Detach { .. } => Authorization::Deny,
        AuthAction::Pragma {
            pragma_name,
            pragma_value: Some(_),
        } if !READING_PRAGMAS.contains(&pragma_name.to_ascii_lowercase().as_str()) => {
            Authorization::Deny
        }
        _ => Authorization::Allow,
    }
}

/// An [`Error::Tool`] for a database that could not be set up.
fn fail(what: &str, e: &rusqlite::Error) -> Error {
    Error::Tool {
        tool: super::Sql::NAME.to_string(),
        message: format!("{what} the database: {e}"),
    }
}

/// What went wrong with a statement, in words for the model; `limit` is the time limit.
pub(crate) fn describe_error(e: &rusqlite::Error, limit: Duration) -> String {
    match e {
        rusqlite::Error::SqliteFailure(f, _) if f.code == ErrorCode::OperationInterrupted => {
            format!(
                "the statement ran longer than the time limit of {} ms and was stopped",
                limit.as_millis()
            )
        }
        rusqlite::Error::SqliteFailure(f, msg)
            if f.code == ErrorCode::AuthorizationForStatementDenied =>
        {
            format!(
                "not allowed: {} (ATTACH, DETACH and setting pragmas are refused)",
                msg.as_deref().unwrap_or("not authorized")
            )
        }
        rusqlite::Error::SqliteFailure(f, _) if f.code == ErrorCode::ReadOnly => {
            "the database is read-only: only statements that read are allowed".to_string()
        }
        rusqlite::Error::MultipleStatement => {
            "only one statement per call is allowed (text follows the first `;`)".to_string()
        }
        rusqlite::Error::SqliteFailure(_, Some(msg)) => format!("SQL error: {msg}"),
        other => format!("SQL error: {other}"),
    }
}
