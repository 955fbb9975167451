//! Replays the `cargo fuzz` inputs of `trajectory_jsonl` on stable Rust: every committed seed
//! (`fuzz/corpus/TARGET`) and every crash found so far (`fuzz/regressions/TARGET`) goes through
//! the function its fuzz target calls, which must return without panicking.

#[path = "../../fuzz/replay.rs"]
mod replay;

use agentrl_core::fuzzing;
use replay::replay;

#[test]
fn trajectory_jsonl() {
    replay("trajectory_jsonl", fuzzing::trajectory_jsonl);
}
