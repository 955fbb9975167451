//! `cargo fuzz` target `gguf`: a GGUF file's header, metadata and tensor table, and what a model load reads from them.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| agentrl_policy::fuzzing::gguf(data));
