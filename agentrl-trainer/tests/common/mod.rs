//! Shared helpers for the trainer tests: a tiny run config.

#![allow(dead_code)]

pub mod gguf;

use std::sync::Arc;

use agentrl_core::{FinishReason, Split, Trajectory, Turn};
use agentrl_trainer::config::RunConfig;
use agentrl_trainer::serve::{ServeState, ServedModel, app};

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

/// Serves `model` (`agentrl serve`'s routes, with `api_key` when given) on 127.0.0.1:0 in this
/// process; returns its root URL and state.
pub async fn serve_on_loopback(
    model: ServedModel,
    api_key: Option<&str>,
) -> (String, Arc<ServeState>) {
    let state = ServeState::with_api_key(model, api_key.map(str::to_string));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let router = app(state.clone());
    tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
    (format!("http://{addr}"), state)
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
        invalid_action: None,
    }])
}
