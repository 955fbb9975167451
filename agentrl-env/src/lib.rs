//! # agentrl-env
//!
//! Environments for training LLM agents with RL: each env comes as an [`EnvFactory`] that
//! makes deterministic train/test [`Task`](agentrl_core::Task)s, fresh sessions implementing
//! [`Env`](agentrl_core::Env) (already wrapped in a [`TurnLimit`]) and a correct reference
//! [`Solver`]. Factories are found by id with [`lookup`]; [`run_solver_episode`] plays a
//! scripted agent through an episode, e.g. to check an env or record demonstrations.
//!
//! The envs:
//! - [`arith_calc`] (`arith-calc`): compute a short integer expression with a calculator tool.
//! - [`knowledge_search`] (`knowledge-search`): answer one- and two-hop questions about a
//!   generated world by searching its articles with a BM25 `search` tool.
//! - [`math_reasoning`] (`math-reasoning`): multi-step word problems, answered without tools.
//! - [`maze`] (`maze`): walk a text grid to the goal with a `move` tool.
//! - [`text_adventure`] (`text-adventure`): rooms, a key, items and a chest, text commands.
//! - [`sql_analysis`] (`sql-analysis`): answer a data question with a read-only `sql` tool.
//! - [`spreadsheet_ops`] (`spreadsheet-ops`): look up and update a sheet with a `spreadsheet` tool.
//! - [`api_booking`] (`api-booking`): book and confirm a meeting room through a local REST API.
//! - [`web_shop`] (`web-shop`): find and buy a described product on a local shop site with a
//!   text browser.
//! - [`os_shell`] (`os-shell`): questions and chores on a generated file tree, sandboxed shell.
//! - [`code_fix`] (`code-fix`): fix planted bugs in a Python module until its tests pass.
//! - [`strategy_game`] (`strategy-game`): Connect Four against a scripted opponent.
//! - [`negotiation`] (`negotiation`): two seats split items they value privately.
//!
//! [`SelfCorrect`] gives retries after a wrong final answer; [`EnvMix`] mixes several envs by
//! weight for multi-task runs.
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
pub mod api_booking;
pub mod arith_calc;
pub mod check;
#[cfg(feature = "cli")]
pub mod cli;
pub mod code_fix;
pub mod knowledge_search;
mod local_server;
mod locking;
pub mod math_reasoning;
pub mod maze;
pub mod mix;
pub mod negotiation;
pub mod os_shell;
pub mod protocol;
pub mod registry;
pub mod self_correct;
mod session;
pub mod spreadsheet_ops;
pub mod sql_analysis;
pub mod strategy_game;
pub mod text_adventure;
mod tool_env;
mod transcript;
pub mod web_shop;
mod workspace;
pub mod wrappers;

pub use api_booking::{ApiBooking, ApiBookingEnv, BookingExpert};
pub use arith_calc::{ArithCalc, ArithCalcEnv, ArithDemonstrator, ArithExpert};
pub use check::{CheckReport, MalformedResult, check};
pub use code_fix::{CodeFix, CodeFixEnv, CodeFixExpert};
pub use knowledge_search::{KnowledgeExpert, KnowledgeSearch, KnowledgeSearchEnv};
pub use math_reasoning::{MathExpert, MathReasoning, MathReasoningEnv};
pub use maze::{Maze, MazeEnv, MazeExpert};
pub use mix::EnvMix;
pub use negotiation::{Negotiation, NegotiationEnv, NegotiationExpert};
pub use os_shell::{OsShell, OsShellEnv, ShellExpert};
pub use registry::{EnvFactory, Solver, SolverEpisode, env_ids, lookup, run_solver_episode};
pub use self_correct::SelfCorrect;
pub use spreadsheet_ops::{SpreadsheetExpert, SpreadsheetOps, SpreadsheetOpsEnv};
pub use sql_analysis::{SqlAnalysis, SqlAnalysisEnv, SqlExpert};
pub use strategy_game::{StrategyExpert, StrategyGame, StrategyGameEnv};
pub use text_adventure::{AdventureExpert, TextAdventure, TextAdventureEnv};
pub use web_shop::{ShopExpert, WebShop, WebShopEnv};
pub use wrappers::TurnLimit;
