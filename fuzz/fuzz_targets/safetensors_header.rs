//! `cargo fuzz` target `safetensors_header`: a safetensors file's header as the weight loader reads it.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| agentrl_policy::fuzzing::safetensors_header(data));
