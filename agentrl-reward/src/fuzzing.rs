//! Entry point of the `reward_tree` `cargo fuzz` target (under `fuzz/` at the repository root)
//! and of the replay test `tests/fuzz_regressions.rs`, which feeds it the committed corpus and
//! every crash found so far on stable Rust. Not part of the stable API.

use crate::config::RewardConfig;

/// `data` as a TOML document: its `[reward]` table (or the whole document when it has none)
/// deserialised into a [`RewardConfig`] as a run config does, then checked and built.
pub fn reward_tree(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let Ok(mut table) = toml::from_str::<toml::Table>(&text) else {
        return;
    };
    let value = match table.remove("reward") {
        Some(reward) => reward,
        None => toml::Value::Table(table),
    };
    let Ok(config) = value.try_into::<RewardConfig>() else {
        return;
    };
    let _ = config.needs_judge();
    let _ = config.part_names();
    let _ = config.build();
}
