//! `cargo fuzz` target `tokenizer_config`: a `tokenizer_config.json` and the chat template it holds.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| agentrl_policy::fuzzing::tokenizer_config(data));
