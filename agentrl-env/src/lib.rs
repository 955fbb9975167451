//! # agentrl-env
//!
//! Environments for training LLM agents with RL: each env comes as an [`EnvFactory`] that
//! makes deterministic train/test [`Task`](agentrl_core::Task)s, fresh sessions implementing
//! [`Env`](agentrl_core::Env) (already wrapped in a [`TurnLimit`]), a correct reference
//! [`Solver`] and an imperfect demonstrator for supervised warm starts, tuned by the env's own
//! [`DemonstratorKnobs`] ([`EnvFactory::demonstrator`]). Factories are found by id with
//! [`lookup`]: the built-in envs, plus any env another crate adds with [`register`] (a
//! [`Registry`] is such a table as a value). [`run_solver_episode`] plays a scripted agent
//! through an episode, e.g. to check an env or record demonstrations.
//!
//! The envs, and the Cargo feature that builds each (all on by default; only built envs are
//! registered):
//! - [`arith_calc`] (`arith-calc`): compute a short integer expression with a calculator tool.
//! - [`math_reasoning`] (`math-reasoning`): multi-step word problems, answered without tools.
//! - [`maze`] (`maze`): walk a text grid to the goal with a `move` tool.
//! - [`text_adventure`] (`text-adventure`): rooms, a key, items and a chest, text commands.
//! - [`strategy_game`] (`strategy-game`): Connect Four against a scripted opponent.
//! - [`negotiation`] (`negotiation`): two seats split items they value privately.
//! - [`dataset`] (`dataset`): tasks from a JSONL or Parquet file with a column mapping
//!   (Parquet with feature `dataset-parquet`).
//! - `knowledge_search` (`knowledge-search`, feature `search-envs`): answer one- and two-hop
//!   questions about a generated world by searching its articles with a BM25 `search` tool.
//! - `sql_analysis` (`sql-analysis`, feature `sql-envs`): answer a data question with a
//!   read-only `sql` tool.
//! - `spreadsheet_ops` (`spreadsheet-ops`, feature `sql-envs`): look up and update a sheet
//!   with a `spreadsheet` tool.
//! - `api_booking` (`api-booking`, feature `web-envs`): book and confirm a meeting room
//!   through a local REST API.
//! - `web_shop` (`web-shop`, feature `web-envs`): find and buy a described product on a local
//!   shop site with a text browser.
//! - `os_shell` (`os-shell`, feature `shell-envs`): questions and chores on a generated file
//!   tree, sandboxed shell.
//! - `code_fix` (`code-fix`, feature `shell-envs`): fix planted bugs in a Python module until
//!   its tests pass.
//!
//! The other features: `protocol` is the HTTP env protocol (`protocol`: env server, client
//! and controller; axum and reqwest). With no features the crate needs neither, nor the
//! heavy parts of `agentrl-tools`. `cli` (not default) adds `cli`, the env commands as library
//! functions, and the `agentrl-env` binary (`list`, `check`, `serve`, `controller`), which
//! needs no libtorch.
//!
//! [`SelfCorrect`] gives retries after a wrong final answer; [`TurnCapped`] ends any env's
//! episodes sooner (e.g. single-turn); [`EnvMix`] mixes several envs by weight for multi-task
//! runs.
//! [`check()`] checks an env the way Gymnasium's `check_env` does: reference solver,
//! random policy and malformed actions.
//!
//! ```
//! use agentrl_core::Split;
//! use agentrl_env::{lookup, run_solver_episode};
//!
//! let factory = lookup("arith-calc")?;
//! let task = factory.task(Split::Test, 0);
//! let mut expert = factory.solver(0);
//! let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
//! let episode = runtime.block_on(run_solver_episode(&*factory, &mut *expert, &task))?;
//! assert!(episode.success);
//! assert_eq!(episode.steps, 2); // one calculator call, then the answer
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

#![warn(missing_docs)]

pub mod answer;
#[cfg(feature = "web-envs")]
pub mod api_booking;
pub mod arith_calc;
pub mod check;
#[cfg(feature = "cli")]
pub mod cli;
#[cfg(feature = "shell-envs")]
pub mod code_fix;
pub mod dataset;
pub mod demonstrator;
pub mod factory;
#[cfg(feature = "search-envs")]
pub mod knowledge_search;
#[cfg(feature = "web-envs")]
mod local_server;
mod locking;
pub mod math_reasoning;
pub mod maze;
pub mod mix;
pub mod negotiation;
pub mod one_habit;
#[cfg(feature = "shell-envs")]
pub mod os_shell;
#[cfg(feature = "protocol")]
pub mod protocol;
pub mod registry;
pub mod self_correct;
mod session;
#[cfg(feature = "sql-envs")]
pub mod spreadsheet_ops;
#[cfg(feature = "sql-envs")]
pub mod sql_analysis;
pub mod strategy_game;
pub mod text_adventure;
mod tool_env;
#[cfg(feature = "web-envs")]
mod transcript;
pub mod turn_capped;
#[cfg(feature = "web-envs")]
pub mod web_shop;
#[cfg(feature = "shell-envs")]
mod workspace;
pub mod wrappers;

#[cfg(feature = "web-envs")]
pub use api_booking::{ApiBooking, ApiBookingEnv, BookingExpert};
pub use arith_calc::{ArithCalc, ArithCalcEnv, ArithDemonstrator, ArithExpert};
pub use check::{CheckReport, MalformedResult, check};
#[cfg(feature = "shell-envs")]
pub use code_fix::{CodeFix, CodeFixEnv, CodeFixExpert};
pub use dataset::{Dataset, DatasetEnv, DatasetExpert, DatasetOptions};
pub use demonstrator::DemonstratorKnobs;
pub use factory::{EnvFactory, Solver, SolverEpisode, run_solver_episode};
#[cfg(feature = "search-envs")]
pub use knowledge_search::{KnowledgeExpert, KnowledgeSearch, KnowledgeSearchEnv};
pub use math_reasoning::{MathExpert, MathReasoning, MathReasoningEnv};
pub use maze::{Maze, MazeEnv, MazeExpert};
pub use mix::EnvMix;
pub use negotiation::{Negotiation, NegotiationEnv, NegotiationExpert};
pub use one_habit::OneHabitDemonstrator;
#[cfg(feature = "shell-envs")]
pub use os_shell::{OsShell, OsShellEnv, ShellExpert};
pub use registry::{
    EnvConstructor, Registry, env_ids, env_option_docs, lookup, lookup_with_options, register,
};
pub use self_correct::SelfCorrect;
#[cfg(feature = "sql-envs")]
pub use spreadsheet_ops::{SpreadsheetExpert, SpreadsheetOps, SpreadsheetOpsEnv};
#[cfg(feature = "sql-envs")]
pub use sql_analysis::{SqlAnalysis, SqlAnalysisEnv, SqlExpert};
pub use strategy_game::{StrategyExpert, StrategyGame, StrategyGameEnv};
pub use text_adventure::{AdventureExpert, TextAdventure, TextAdventureEnv};
pub use turn_capped::TurnCapped;
#[cfg(feature = "web-envs")]
pub use web_shop::{ShopExpert, WebShop, WebShopEnv};
pub use wrappers::TurnLimit;
