//! Times one RL step's rollouts with the in-process policy: `TASKS` tasks × `GROUP` episodes of
//! an env, played concurrently by an untrained demo-sized tiny GPT (so every turn runs to
//! `max_new_tokens` and episodes run until the env or the context ends them).
//!
//! ```text
//! cargo run --release -p agentrl-trainer --example rollout_speed -- maze 16 8 1024
//! ```
//!
//! Prints one JSON line: seconds, episodes, turns, generated tokens, tokens per second, the
//! engine's prefilled and reused ids, and prefilled ids per id of the finished episodes. A fifth
//! argument `no-reuse` turns the session cache off (every turn prefills its whole prompt, as
//! before the engine kept sessions; anything else keeps it), and a sixth names a Llama-family
//! model (GGUF file or Hugging Face directory) to play instead of the tiny GPT:
//!
//! ```text
//! cargo run --release -p agentrl-trainer --example rollout_speed -- arith-calc 4 2 2048 reuse SmolLM2.gguf
//! ```
//!
//! `--policy-threads N` (anywhere) gives the model thread N libtorch threads, as `[pipeline]
//! policy_threads` does in a run (default: the process's 2); `--bf16` (anywhere) loads the
//! Llama-family model's weights in bf16.

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use agentrl_core::{SamplingParams, Split};
use agentrl_env::lookup;
use agentrl_policy::llama::Dtype;
use agentrl_policy::load::load_llama_chat;
use agentrl_policy::{
    ByteTokenizer, ChatFormat, Detokenizer, EngineOptions, GptConfig, TchPolicy, TinyChatFormat,
    TinyGpt,
};
use agentrl_trainer::rollout::{RolloutContext, run_many};
use tch::{Device, nn};

fn arg<T: std::str::FromStr>(args: &[String], i: usize, default: T) -> T {
    args.get(i).and_then(|s| s.parse().ok()).unwrap_or(default)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args: Vec<String> = std::env::args().collect();
    let policy_threads = match args.iter().position(|a| a == "--policy-threads") {
        Some(at) => {
            let n = args
                .get(at + 1)
                .and_then(|n| n.parse::<i32>().ok())
                .filter(|&n| n >= 1)
                .ok_or("--policy-threads takes a whole number >= 1")?;
            args.drain(at..at + 2);
            Some(n)
        }
        None => None,
    };
    let dtype = match args.iter().position(|a| a == "--bf16") {
        Some(at) => {
            args.remove(at);
            Dtype::Bf16
        }
        None => Dtype::F32,
    };
    let env_id = args.get(1).cloned().unwrap_or_else(|| "maze".into());
    let tasks: u64 = arg(&args, 2, 16);
    let group: u64 = arg(&args, 3, 8);
    let max_seq_len: usize = arg(&args, 4, 1024);
    let reuse = args.get(5).map(String::as_str) != Some("no-reuse");
    // As `agentrl` does: freed memory stays mapped, and the model is built on a thread that
    // ends with the building, so the process holds one OpenMP team (the model thread's).
    agentrl_trainer::allocator::keep_freed_memory();
    tch::set_num_threads(2);
    tch::manual_seed(0);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let mut options = EngineOptions::with_max_batch(256);
    options.threads = policy_threads;
    if !reuse {
        options.session_cache_bytes = 0;
        options.prompt_cache_bytes = 0;
    }
    let (policy, format): (TchPolicy, Arc<dyn ChatFormat>) = match args.get(6) {
        Some(path) => {
            let path = Path::new(path);
            let loaded = std::thread::scope(|scope| {
                scope
                    .spawn(|| load_llama_chat(path, Device::Cpu, dtype))
                    .join()
            });
            let (vs, model, format) = loaded.map_err(|_| "loading the model panicked")??;
            let format = Arc::new(format);
            let text = format.clone();
            let detokenizer: Detokenizer = Arc::new(move |ids| text.decode(ids));
            let policy = TchPolicy::spawn_with_options(vs, model, options, 0, Some(detokenizer))?;
            (policy, format)
        }
        None => {
            let vs = nn::VarStore::new(Device::Cpu);
            let config = GptConfig {
                vocab_size: ByteTokenizer::VOCAB_SIZE,
                d_model: 96,
                n_layers: 3,
                n_heads: 4,
                max_seq_len,
                ffn_mult: 4,
                rope_theta: 10_000.0,
            };
            let model =
                std::thread::scope(|scope| scope.spawn(|| TinyGpt::new(&vs.root(), config)).join());
            let model = model.map_err(|_| "building the model panicked")??;
            let policy = TchPolicy::spawn_with_options(vs, model, options, 0, None)?;
            (policy, Arc::new(TinyChatFormat::new()))
        }
    };
    let ctx = RolloutContext {
        factory: lookup(&env_id)?,
        policy: Arc::new(policy.clone()),
        format,
        max_seq_len,
        stop: Vec::new(),
    };
    let jobs: Vec<_> = (0..tasks)
        .flat_map(|t| (0..group).map(move |_| t))
        .map(|t| (ctx.factory.task(Split::Train, t), t))
        .collect();
    let params = SamplingParams {
        max_new_tokens: 40,
        seed: None,
        ..Default::default()
    };
    let start = Instant::now();
    let trajectories = rt.block_on(run_many(&ctx, jobs, &params))?;
    let seconds = start.elapsed().as_secs_f64();
    let turns: usize = trajectories.iter().map(|t| t.turns.len()).sum();
    let generated: usize = trajectories
        .iter()
        .flat_map(|t| &t.turns)
        .map(|t| t.generated_ids.len())
        .sum();
    // An episode's length: its first prompt plus every turn's generated and injected ids.
    let episode_ids: usize = trajectories
        .iter()
        .flat_map(|t| &t.turns)
        .map(|t| t.injected_ids.len() + t.generated_ids.len())
        .sum();
    let stats = policy.stats();
    let line = serde_json::json!({
        "env": env_id, "reuse": reuse, "policy_threads": policy_threads, "seconds": seconds, "episodes": trajectories.len(),
        "turns": turns, "generated_tokens": generated,
        "tokens_per_second": generated as f64 / seconds,
        "prefill_tokens": stats.prefill_tokens, "reused_tokens": stats.reused_tokens,
        "prefill_batches": stats.prefill_batches, "decode_steps": stats.decode_steps,
        "prefill_seconds": stats.prefill_seconds, "decode_seconds": stats.decode_seconds,
        "episode_ids": episode_ids,
        "prefilled_per_episode_id": stats.prefill_tokens as f64 / episode_ids.max(1) as f64,
    });
    println!("{line}");
    Ok(())
}
