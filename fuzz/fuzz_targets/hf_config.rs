//! `cargo fuzz` target `hf_config`: a Hugging Face `config.json` (and `generation_config.json`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| agentrl_policy::fuzzing::hf_config(data));
