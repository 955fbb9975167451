//! Replays the `cargo fuzz` inputs of `protocol_bodies` on stable Rust: every committed seed
//! (`fuzz/corpus/TARGET`) and every crash found so far (`fuzz/regressions/TARGET`) goes through
//! the function its fuzz target calls, which must return without panicking.
#![cfg(feature = "protocol")]

#[path = "../../fuzz/replay.rs"]
mod replay;

use agentrl_env::protocol::fuzzing;
use replay::replay;

#[test]
fn protocol_bodies() {
    replay("protocol_bodies", fuzzing::protocol_bodies);
}
