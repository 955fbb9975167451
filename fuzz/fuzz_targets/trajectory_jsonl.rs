//! `cargo fuzz` target `trajectory_jsonl`: the trajectory JSONL reader.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| agentrl_core::fuzzing::trajectory_jsonl(data));
