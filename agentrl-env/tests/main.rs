//! The integration tests of `agentrl-env`: every env, the registry, the HTTP protocol and
//! controller, the Python SDK and the CLI.
//!
//! One binary for all of them, each file a module: building and linking one binary per file
//! (44 in agentrl-core, -env, -reward and -tools) took 52 s of `cargo xtask test`'s build on
//! 2 cores; one per crate, 9 s. These crates do not link libtorch, whose global random generator
//! would otherwise be shared between files. A new test file needs its `mod` line below
//! (`cargo xtask test` fails without it). One file's tests:
//! `cargo test -p agentrl-env --test integration FILE::`.

mod common;

#[cfg(feature = "web-envs")]
mod api_booking;
mod arith_env;
mod arith_solvers;
mod arith_tasks;
mod check;
#[cfg(feature = "cli")]
mod cli;
#[cfg(feature = "shell-envs")]
mod code_fix;
#[cfg(feature = "protocol")]
mod controller;
mod dataset;
mod demonstrators;
mod fuzz_regressions;
mod generated_envs;
#[cfg(feature = "search-envs")]
mod knowledge_search;
mod mix;
mod negotiation;
#[cfg(feature = "shell-envs")]
mod os_shell;
#[cfg(feature = "protocol")]
mod protocol;
#[cfg(feature = "protocol")]
mod python_sdk;
mod registry;
mod self_correct;
#[cfg(feature = "sql-envs")]
mod sql_envs;
mod strategy_game;
#[cfg(feature = "web-envs")]
mod web_shop;
