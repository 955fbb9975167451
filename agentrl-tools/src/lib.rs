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
//! The calculator and the [`ToolBox`] are always there; the heavier tools sit behind Cargo
//! features, all on by default:
//!
//! | feature | tools and types | pulls in |
//! |---|---|---|
//! | `sandbox` | `files` (`read_file`, `write_file`, `list_dir`, confined to the session workspace), `exec` (`shell`, `python`), the bubblewrap `sandbox` and `standard_toolbox` | rustix |
//! | `sql` | `sql` (a session's SQLite database) and `spreadsheet` (named sheets backed by SQLite tables) | bundled SQLite |
//! | `search` | `search` (BM25 full-text search over a document collection) | tantivy |
//! | `web` | `http` and `browser`, which reach web services on an allowlist of base URLs | reqwest, scraper |
//! | `cli` (not default) | `cli`: the `agentrl tool list` / `agentrl tool call` commands; all of the above | clap |
//!
//! A crate that needs only some of them turns the defaults off:
//! `agentrl-tools = { version = "0.1", default-features = false, features = ["sandbox"] }`.

#![warn(missing_docs)]

pub mod arguments;
#[cfg(feature = "web")]
pub mod browser;
pub mod calculator;
#[cfg(feature = "cli")]
pub mod cli;
#[cfg(feature = "sandbox")]
pub mod exec;
#[cfg(feature = "sandbox")]
pub mod files;
#[cfg(feature = "web")]
pub mod http;
#[cfg(feature = "sandbox")]
pub mod sandbox;
#[cfg(feature = "search")]
pub mod search;
#[cfg(feature = "sql")]
pub mod spreadsheet;
#[cfg(feature = "sql")]
pub mod sql;
#[cfg(feature = "sandbox")]
pub mod standard;
pub mod toolbox;
#[cfg(feature = "web")]
pub mod web;

pub use arguments::parse_args;
#[cfg(feature = "web")]
pub use browser::Browser;
pub use calculator::{CalcError, Calculator, Number, evaluate};
#[cfg(feature = "sandbox")]
pub use exec::{Python, Shell};
#[cfg(feature = "sandbox")]
pub use files::{FileLimits, ListDir, ReadFile, WriteFile};
#[cfg(feature = "web")]
pub use http::HttpTool;
#[cfg(feature = "sandbox")]
pub use sandbox::{Sandbox, SandboxConfig, SandboxError, SandboxLimits};
#[cfg(feature = "search")]
pub use search::{Search, SearchDocument, SearchError, SearchHit, SearchIndex, SearchLimits};
#[cfg(feature = "sql")]
pub use spreadsheet::{Cell, Spreadsheet, Workbook};
#[cfg(feature = "sql")]
pub use sql::{Sql, SqlAccess, SqlDatabase, SqlLimits};
#[cfg(feature = "sandbox")]
pub use standard::standard_toolbox;
pub use toolbox::{ToolBox, ToolLimits, ToolOutcome};
#[cfg(feature = "web")]
pub use web::{UrlAllowlist, WebLimits};
