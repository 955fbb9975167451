//! Replays the `cargo fuzz` inputs of `reward_tree` on stable Rust: every committed seed
//! (`fuzz/corpus/TARGET`) and every crash found so far (`fuzz/regressions/TARGET`) goes through
//! the function its fuzz target calls, which must return without panicking.

#[path = "../../fuzz/replay.rs"]
mod replay;

use agentrl_reward::fuzzing;
use replay::replay;

#[test]
fn reward_tree() {
    replay("reward_tree", fuzzing::reward_tree);
}
