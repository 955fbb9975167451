//! The integration tests of `agentrl-core`: the wire types' JSON and the fuzz regressions.
//!
//! One binary for all of them, each file a module: building and linking one binary per file
//! (44 in agentrl-core, -env, -reward and -tools) took 52 s of `cargo xtask test`'s build on
//! 2 cores; one per crate, 9 s. These crates do not link libtorch, whose global random generator
//! would otherwise be shared between files. A new test file needs its `mod` line below
//! (`cargo xtask test` fails without it). One file's tests:
//! `cargo test -p agentrl-core --test integration FILE::`.

mod fuzz_regressions;
mod openai_json;
