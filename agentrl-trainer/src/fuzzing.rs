//! Entry point of the `run_toml` `cargo fuzz` target (under `fuzz/` at the repository root)
//! and of the replay test `tests/fuzz_regressions.rs`, which feeds it the committed corpus and
//! every crash found so far on stable Rust. Not part of the stable API.

use crate::config::RunConfig;
use crate::envs;

/// `data` as a run config file: [`RunConfig::from_toml_str`] (parse, validate, check the
/// demonstrator knobs), then the env sources the run would draw from.
pub fn run_toml(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let Ok(config) = RunConfig::from_toml_str(&text, "fuzz.toml") else {
        return;
    };
    let _ = envs::sources(&config.env);
    let _ = config.reward.build();
    let _ = config.rl.dynamic_sampling_limit();
}
