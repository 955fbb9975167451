//! `cargo fuzz` target `reward_tree`: the `[reward]` tree of a run config.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| agentrl_reward::fuzzing::reward_tree(data));
