//! Shared helpers for the trainer tests: a tiny run config, one-turn trajectories, and (from
//! `agentrl-policy`'s test support) tiny served models and the tiny GGUF vocabulary.

#![allow(dead_code)]

#[path = "../../../agentrl-policy/tests/support/tiny_vocab.rs"]
pub mod tiny_vocab;
#[path = "../../../agentrl-policy/tests/support/tool_model.rs"]
pub mod tool_model;

use agentrl_core::{FinishReason, Split, Trajectory, Turn};
use agentrl_trainer::config::RunConfig;

/// A run config small enough for tests (a few seconds on 2 cores in debug).
pub fn tiny_config(max_staleness: u64) -> RunConfig {
    let text = format!(
        r#"
seed = 3
torch_threads = 1
[env]
id = "arith-calc"
[model]
d_model = 32
n_layers = 1
n_heads = 2
max_seq_len = 160
ffn_mult = 2
[sft]
demos = 64
steps = 20
batch_size = 8
lr = 3e-3
[sft.demonstrator]
tool_prob_two_operands = 1.0
tool_prob_three_operands = 1.0
copy_error_prob = 0.0
[rl]
steps = 3
tasks_per_step = 2
group_size = 3
lr = 1e-3
max_new_tokens = 24
checkpoint_every = 2
[pipeline]
max_staleness = {max_staleness}
max_batch = 64
[eval]
tasks = 6
max_new_tokens = 24
"#
    );
    RunConfig::from_toml_str(&text, "tiny test config").expect("the test config is valid")
}

/// A completed, unrewarded train trajectory of env `toy` with one turn: `prompt` injected,
/// `generated` sampled with `logprobs`. Tests set other fields with struct-update syntax.
pub fn one_turn_trajectory(
    prompt: Vec<u32>,
    generated: Vec<u32>,
    logprobs: Vec<f32>,
) -> Trajectory {
    Trajectory::new("toy", "t", Split::Train, 0).with_turns(vec![Turn {
        injected_ids: prompt,
        generated_ids: generated,
        logprobs,
        policy_version: 0,
        policy_name: None,
        finish: FinishReason::Stop,
        reward: 0.0,
        stale: false,
        invalid_action: None,
    }])
}
