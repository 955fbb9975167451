//! # agentrl-tools
//!
//! Tools an AgentRL agent can call, and the [`ToolBox`] that sits between the model and them:
//! it validates each call's JSON arguments against the tool's schema (compiled once), runs the
//! tool under a time limit, truncates long output and turns every failure into a `tool` message
//! the model can read, flagging the model's own mistakes as invalid actions.
//!
//! ```
//! use agentrl_core::{ToolCall, ToolContext};
//! use agentrl_tools::{Calculator, ToolBox, ToolLimits, evaluate};
//!
//! assert_eq!(evaluate("-3*-(2+1)").unwrap().to_string(), "9");
//!
//! let toolbox = ToolBox::new(ToolLimits::default()).with(Calculator).unwrap();
//! let call = ToolCall::new("call_1", "calculator", &serde_json::json!({"expression": "1/8"}));
//! let rt = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
//! let outcome = rt.block_on(toolbox.dispatch(&call, &ToolContext::default()));
//! assert_eq!(outcome.message.text(), "0.125");
//! assert!(outcome.error.is_none());
//! ```
//!
//! Beyond the calculator: [`files`] (`read_file`, `write_file`, `list_dir`, confined to the
//! session workspace), [`exec`] (`shell` and `python`, run in the bubblewrap [`sandbox`]) and
//! [`standard_toolbox`] with the calculator, file and exec tools; [`sql`] (a session's SQLite
//! database), [`spreadsheet`] (named sheets backed by SQLite tables), [`search`] (BM25
//! full-text search over a document collection), and [`http`] and [`browser`], which reach
//! web services on an allowlist of base URLs.

#![warn(missing_docs)]

pub mod browser;
pub mod calculator;
pub mod exec;
pub mod files;
pub mod http;
pub mod sandbox;
pub mod search;
pub mod spreadsheet;
pub mod sql;
pub mod standard;
pub mod toolbox;
pub mod web;

pub use browser::Browser;
pub use calculator::{CalcError, Calculator, Number, evaluate};
pub use exec::{Python, Shell};
pub use files::{FileLimits, ListDir, ReadFile, WriteFile};
pub use http::HttpTool;
pub use sandbox::{Sandbox, SandboxConfig, SandboxError, SandboxLimits};
pub use search::{Search, SearchDocument, SearchError, SearchHit, SearchIndex, SearchLimits};
pub use spreadsheet::{Cell, Spreadsheet, Workbook};
pub use sql::{Sql, SqlAccess, SqlDatabase, SqlLimits};
pub use standard::standard_toolbox;
pub use toolbox::{ToolBox, ToolLimits, ToolOutcome};
pub use web::{UrlAllowlist, WebLimits};
