//! # agentrl-trainer
//!
//! The closed loop: rollout workers that play many env sessions concurrently against a batched
//! policy ([`rollout`]), behaviour cloning from demonstrations ([`demos`], [`learner`]), GRPO with
//! group advantages and task normalisation ([`advantage`]), the fully asynchronous rollout → train
//! pipeline with a staleness bound ([`pipeline`]), AgentRL's cross-policy sampling with a stale
//! snapshot of the policy ([`cross_policy`]), checkpoints, metrics, evaluation, plots
//! ([`run`]), per-task statistics of episodes ([`task_stats`]), evaluating an OpenAI-compatible
//! endpoint or the reference solvers on the same tasks ([`agent_eval`]), rendering a saved
//! episode ([`show`]), a table over finished runs ([`compare`]), a web dashboard of runs, curves
//! and episodes ([`dashboard`]) with the run status it reads ([`run_status`]), TensorBoard event
//! files of a run's metrics ([`tensorboard`]), progress output ([`progress`]), offline
//! re-scoring of saved trajectories ([`rescore`]) and judge backends over policies for
//! LLM-judged rewards ([`judge`]). The run configuration is one TOML file
//! ([`config`]); the `agentrl` binary's training subcommands are library functions in
//! [`commands`], so its `main.rs` only parses arguments. The trainer knows no env by name: it
//! asks the run's [`EnvFactory`](agentrl_env::EnvFactory) for tasks, sessions and
//! demonstrators. The default feature `full` compiles in every env, tool, dataset format and
//! pretrained-model format; without it only the six light envs and the tiny GPT are there and
//! the build skips tantivy, SQLite, Parquet, tokenizers and minijinja (what `cargo xtask demo`
//! builds).
//!
//! ```no_run
//! use agentrl_trainer::{config::RunConfig, run::demo};
//!
//! # async fn go() -> agentrl_core::Result<()> {
//! let config = RunConfig::load("configs/demo.toml".as_ref())?;
//! let summary = demo(config, "runs/demo".as_ref()).await?;
//! println!("{} -> {}", summary.eval_success_before_rl, summary.eval_success_after_rl);
//! # Ok(()) }
//! ```

#![warn(missing_docs)]

pub mod advantage;
pub mod agent_eval;
pub mod allocator;
pub mod batch;
pub mod commands;
pub mod compare;
pub mod config;
pub mod critic;
pub mod cross_policy;
pub mod dashboard;
pub mod demos;
pub mod envs;
pub mod eval;
#[doc(hidden)]
pub mod fuzzing;
pub mod judge;
pub mod learner;
pub mod loss;
pub mod metrics;
pub mod model_spec;
pub mod optim;
pub mod pipeline;
pub mod plot;
pub mod progress;
mod replicas;
pub mod rescore;
pub mod resume;
pub mod rollout;
pub mod run;
pub mod run_status;
pub mod show;
pub mod task_stats;
pub mod tensorboard;
pub mod weight_sync;
