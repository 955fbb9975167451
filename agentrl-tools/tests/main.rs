//! The integration tests of `agentrl-tools`: every tool, the sandbox and the CLI.
//!
//! One binary for all of them, each file a module: building and linking one binary per file
//! (44 in agentrl-core, -env, -reward and -tools) took 52 s of `cargo xtask test`'s build on
//! 2 cores; one per crate, 9 s. These crates do not link libtorch, whose global random generator
//! would otherwise be shared between files. A new test file needs its `mod` line below
//! (`cargo xtask test` fails without it). One file's tests:
//! `cargo test -p agentrl-tools --test integration FILE::`.

#[cfg(feature = "web")]
mod browser;
mod calculator;
#[cfg(feature = "cli")]
mod cli;
#[cfg(feature = "sandbox")]
mod exec;
#[cfg(feature = "sandbox")]
mod files;
#[cfg(feature = "web")]
mod http;
#[cfg(feature = "sandbox")]
mod sandbox;
#[cfg(feature = "search")]
mod search;
#[cfg(feature = "sql")]
mod spreadsheet;
#[cfg(feature = "sql")]
mod sql;
mod toolbox;
