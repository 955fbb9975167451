//! Entry point of the `trajectory_jsonl` `cargo fuzz` target (under `fuzz/` at the repository
//! root) and of the replay test `tests/fuzz_regressions.rs`, which feeds it the committed corpus
//! and every crash found so far on stable Rust. Not part of the stable API.

use std::path::Path;

use crate::trajectory::read_jsonl_from;

/// The trajectory JSONL reader on `data` as a whole file; every trajectory it reads is written
/// back to JSON (what `agentrl show`/`rescore` do with them next).
pub fn trajectory_jsonl(data: &[u8]) {
    let Ok((good, _bad)) = read_jsonl_from(data, Path::new("fuzz.jsonl")) else {
        return;
    };
    for trajectory in &good {
        let _ = serde_json::to_string(trajectory);
        let _ = (trajectory.num_tokens(), trajectory.num_generated());
        let _ = (trajectory.loss_mask(), trajectory.sampling_logprobs());
        let _ = (
            trajectory.min_policy_version(),
            trajectory.invalid_actions(),
        );
        let _ = trajectory.final_answer();
    }
}
