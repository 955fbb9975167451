//! `cargo fuzz` target `run_toml`: a whole run config TOML (links libtorch; needs `--features trainer`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| agentrl_trainer::fuzzing::run_toml(data));
