//! Replays the `cargo fuzz` inputs of `run_toml` on stable Rust: every committed seed
//! (`fuzz/corpus/TARGET`) and every crash found so far (`fuzz/regressions/TARGET`) goes through
//! the function its fuzz target calls, which must return without panicking.

#[path = "../../fuzz/replay.rs"]
mod replay;

use agentrl_trainer::fuzzing;
use replay::replay;

#[test]
fn run_toml() {
    replay("run_toml", fuzzing::run_toml);
}
