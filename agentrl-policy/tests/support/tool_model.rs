//! A run directory with tiny byte-level models for the serving tests — random weights, weights
//! trained (by plain behaviour cloning) to call the calculator on "Compute 6*7", and weights of
//! another shape — and `agentrl serve`'s routes on 127.0.0.1 in this process.
#![allow(dead_code)]

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use agentrl_core::{FinishReason, Message, Split, ToolCall, ToolSpec, Trajectory, Turn};
use agentrl_policy::checkpoint::save_var_store;
use agentrl_policy::serve::{ServeState, ServedModel, app};
use agentrl_policy::{ChatFormat, GptConfig, PolicyModel, TinyChatFormat, TinyGpt};
use serde_json::json;
use tch::nn::OptimizerConfig;
use tch::{Device, Kind, Tensor, nn};

/// Context length of the served tiny models.
pub const CONTEXT: usize = 256;

/// A run config whose `[model]` gives the tiny models' shape (the other tables are a run's, and
/// the server does not read them).
pub const RUN_CONFIG: &str = r#"
seed = 3
torch_threads = 1
[env]
id = "arith-calc"
[model]
d_model = 32
n_layers = 1
n_heads = 2
max_seq_len = 256
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
max_staleness = 1
max_batch = 64
[eval]
tasks = 6
max_new_tokens = 24
"#;

/// The run directory and its checkpoints.
pub struct ToolModels {
    _dir: tempfile::TempDir,
    /// Random weights.
    pub random: PathBuf,
    /// Weights trained to call the calculator on "Compute 6*7".
    pub tool: PathBuf,
    /// Weights of a narrower model (`d_model` 16).
    pub wrong_shape: PathBuf,
}

/// The calculator tool the trained model calls.
pub fn calculator() -> ToolSpec {
    ToolSpec::function(
        "calculator",
        "Evaluates an arithmetic expression",
        json!({"type": "object", "properties": {"expression": {"type": "string"}},
               "required": ["expression"]}),
    )
}

/// The demonstration: "Compute 6*7" answered with a calculator call.
fn tool_call_demo(fmt: &TinyChatFormat) -> Trajectory {
    let prompt = fmt.render_prompt(&[Message::user("Compute 6*7")], &[calculator()]);
    let call = ToolCall::new("c0", "calculator", &json!({"expression": "6*7"}));
    let generated = fmt.render_assistant(&Message::assistant_tool_calls(None, vec![call]));
    let logprobs = vec![0.0; generated.len()];
    Trajectory::new("toy", "t", Split::Train, 0)
        .with_turns(vec![Turn {
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
        .with_success(true)
}

/// `steps` behaviour-cloning steps on `demo`: mean cross-entropy of its policy tokens, AdamW
/// (0.9, 0.95, weight decay 0.01) at `lr`, gradients clipped to norm 1.
fn clone_behaviour(vs: &nn::VarStore, model: &TinyGpt, demo: &Trajectory, lr: f64, steps: usize) {
    let mut opt = nn::adamw(0.9, 0.95, 0.01).build(vs, lr).unwrap();
    let ids: Vec<i64> = demo.token_ids().iter().map(|&id| i64::from(id)).collect();
    let mask = demo.loss_mask()[1..].to_vec();
    let tokens = mask.iter().sum::<f32>().max(1.0) as f64;
    let ids = Tensor::from_slice(&ids).view([1, -1]);
    let mask = Tensor::from_slice(&mask).view([1, -1]);
    for _ in 0..steps {
        opt.zero_grad();
        let (logp, _entropy) = model.token_logprobs(&ids, 1.0);
        let loss = -(&logp * &mask).sum(Kind::Float) / tokens;
        loss.backward();
        opt.clip_grad_norm(1.0);
        opt.step();
    }
}

/// The tiny models, built once per test binary.
pub fn tool_models() -> &'static ToolModels {
    static MODELS: OnceLock<ToolModels> = OnceLock::new();
    MODELS.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("config.toml"), RUN_CONFIG).unwrap();
        let fmt = TinyChatFormat::new();
        let ckpt = dir.path().join("checkpoints");
        tch::manual_seed(11);
        let shape = GptConfig {
            vocab_size: fmt.vocab_size(),
            d_model: 32,
            n_layers: 1,
            n_heads: 2,
            max_seq_len: CONTEXT,
            ffn_mult: 2,
            rope_theta: 10_000.0,
        };
        let vs = nn::VarStore::new(Device::Cpu);
        let model = TinyGpt::new(&vs.root(), shape.clone()).unwrap();
        let random = ckpt.join("random.safetensors");
        save_var_store(&vs, &random).unwrap();
        clone_behaviour(&vs, &model, &tool_call_demo(&fmt), 1e-2, 150);
        let tool = ckpt.join("tool.safetensors");
        save_var_store(&vs, &tool).unwrap();
        let other = GptConfig {
            d_model: 16,
            ..shape
        };
        let other_vs = nn::VarStore::new(Device::Cpu);
        let _other = TinyGpt::new(&other_vs.root(), other).unwrap();
        let wrong_shape = ckpt.join("wrong.safetensors");
        save_var_store(&other_vs, &wrong_shape).unwrap();
        ToolModels {
            _dir: dir,
            random,
            tool,
            wrong_shape,
        }
    })
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
