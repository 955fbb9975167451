//! Trainer benchmarks: advantages, a GRPO update of the demo model, SFT steps on one pass and
//! data-parallel over threads, one AdamW step over a
//! tenth of SmolLM2's weights (fp32 and bf16, in one pass or with tensor operations), and
//! concurrent rollouts through the policy's continuous-batching engine: single-turn-ish
//! `arith-calc`, and one RL step of multi-turn `maze` (16 tasks × 8 episodes, a 1,024-token
//! context) with and without the sessions' keys and values kept between turns; and a policy
//! update's vocabulary head at the tiny Llama's shape (log-probabilities, entropies and the
//! backward pass), through libtorch's log-softmax and through `agentrl-policy`'s column pass.

use std::sync::Arc;

use agentrl_core::{FinishReason, SamplingParams, Split, Task, Trajectory, Turn};
use agentrl_env::{ArithExpert, lookup, run_solver_episode};
use agentrl_policy::{ByteTokenizer, EngineOptions, GptConfig, TchPolicy, TinyChatFormat, TinyGpt};
use agentrl_trainer::advantage::{group_advantages, normalize_per_task};
use agentrl_trainer::demos::conversation_to_trajectory;
use agentrl_trainer::learner::{GrpoParams, Learner};
use agentrl_trainer::optim::AdamW;
use agentrl_trainer::rollout::{RolloutContext, run_many};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use ndarray::Array1;
use tch::{Device, Kind, Tensor, nn};

fn demo_model() -> GptConfig {
    GptConfig {
        vocab_size: ByteTokenizer::VOCAB_SIZE,
        d_model: 96,
        n_layers: 3,
        n_heads: 4,
        max_seq_len: 160,
        ffn_mult: 4,
        rope_theta: 10_000.0,
    }
}

fn expert_trajectories(rt: &tokio::runtime::Runtime, n: u64) -> Vec<Trajectory> {
    let factory = lookup("arith-calc").expect("registered env");
    let fmt = TinyChatFormat::new();
    rt.block_on(async {
        let mut out = Vec::new();
        for i in 0..n {
            let task = factory.task(Split::Train, i);
            let ep = run_solver_episode(factory.as_ref(), &mut ArithExpert, &task)
                .await
                .expect("expert episode");
            let mut t =
                conversation_to_trajectory(&fmt, &task, &ep.messages, &ep.tools, ep.success);
            t.group_id = i / 8;
            out.push(t);
        }
        out
    })
}

fn advantages(c: &mut Criterion) {
    let rewards: Array1<f64> = (0..1024).map(|i| ((i * 7919) % 13) as f64 / 13.0).collect();
    let groups: Vec<u64> = (0..1024).map(|i| i / 8).collect();
    let tasks: Vec<&str> = (0..1024)
        .map(|i| if i % 2 == 0 { "a" } else { "b" })
        .collect();
    let mut g = c.benchmark_group("advantage");
    g.throughput(Throughput::Elements(1024));
    g.bench_function("group_and_task_norm_1024", |b| {
        b.iter(|| {
            let mut a = group_advantages(&rewards, &groups);
            normalize_per_task(&mut a, &tasks);
            a
        })
    });
    g.finish();
}

fn grpo_update(c: &mut Criterion) {
    tch::set_num_threads(2);
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let batch = expert_trajectories(&rt, 128);
    let refs: Vec<&Trajectory> = batch.iter().collect();
    let adv: Vec<f64> = (0..128)
        .map(|i| if i % 2 == 0 { 1.0 } else { -1.0 })
        .collect();
    let mut learner = Learner::new(demo_model(), 1e-5, Device::Cpu).expect("learner");
    let params = GrpoParams {
        clip_eps: 0.2,
        kl_coef: 0.0,
        temperature: 1.0,
        grad_clip: 1.0,
        ..GrpoParams::default()
    };
    let mut g = c.benchmark_group("learner");
    g.sample_size(10);
    g.throughput(Throughput::Elements(128));
    g.bench_function("grpo_step_128_trajectories", |b| {
        b.iter(|| learner.grpo_step(&refs, &adv, params))
    });
    g.bench_function("sft_step_128_trajectories", |b| {
        b.iter(|| learner.sft_step(&refs, 1.0))
    });
    g.finish();
}

/// A demonstration shaped like one of the multi-task run's (`configs/multitask.toml`): `turns`
/// turns of `injected` observation ids, then `generated` policy ids.
fn shaped_demonstration(index: u64, turns: usize, injected: usize, generated: usize) -> Trajectory {
    let task = Task {
        env_id: format!("shape-{turns}"),
        id: format!("demo-{index}"),
        split: Split::Train,
        data: serde_json::Value::Null,
    };
    let ids = |n: usize, salt: u64| -> Vec<u32> {
        (0..n as u64)
            .map(|i| ((i * 31 + salt * 7) % 250 + 3) as u32)
            .collect()
    };
    let turns = (0..turns as u64)
        .map(|t| Turn {
            injected_ids: ids(injected, index + t),
            generated_ids: ids(generated, index * 3 + t),
            logprobs: vec![0.0; generated],
            policy_version: 0,
            policy_name: None,
            finish: FinishReason::Stop,
            reward: 0.0,
            stale: false,
            invalid_action: None,
        })
        .collect();
    Trajectory::for_task(&task, index).with_turns(turns)
}

/// SFT steps of 16 demonstrations mixed as in the multi-task run, two `arith-calc` ones for one
/// of each other env (their mean lengths: `arith-calc` ~76 tokens, 31 of them the policy's;
/// `sql-analysis` ~640 / 62; `text-adventure` ~455 / 188 over several turns; `os-shell`
/// ~433 / 89 over two turns), each length varied by up to ±20%, on the multi-task model (a
/// 1,024-token context): the demonstrations' lengths differ by 10×, so packing by length
/// decides how much is padding.
fn sft_mixture(c: &mut Criterion) {
    tch::set_num_threads(2);
    let shapes = [
        (1, 45, 31),
        (1, 578, 62),
        (1, 45, 31),
        (6, 45, 31),
        (2, 172, 44),
    ];
    let demos: Vec<Trajectory> = (0..128u64)
        .map(|i| {
            let (turns, injected, generated) = shapes[(i * 3 % 5) as usize];
            let scale = |n: usize| n * (80 + (i * 37 % 41) as usize) / 100;
            shaped_demonstration(i, turns, scale(injected), scale(generated).max(1))
        })
        .collect();
    let batches: Vec<Vec<&Trajectory>> = demos.chunks(16).map(|b| b.iter().collect()).collect();
    let config = GptConfig {
        max_seq_len: 1024,
        ..demo_model()
    };
    let mut g = c.benchmark_group("learner");
    g.sample_size(20);
    g.throughput(Throughput::Elements(16));
    for (name, data_parallel) in [
        ("sft_step_16_multitask_mixture", true),
        ("sft_step_16_multitask_mixture_one_thread", false),
    ] {
        let mut learner = Learner::new(config.clone(), 3e-3, Device::Cpu).expect("learner");
        learner.set_data_parallel(Some(data_parallel));
        let mut next = 0;
        g.bench_function(name, |b| {
            b.iter(|| {
                next = (next + 1) % batches.len();
                learner.sft_step(&batches[next], 1.0)
            })
        });
    }
    g.finish();
}

/// The demo's SFT step (32 `arith-calc` demonstrations on its 3-layer GPT) with two libtorch
/// threads on one pass, and dealt over the learner's thread and a replica's, one libtorch
/// thread each (the default for a model this small).
fn sft_data_parallel(c: &mut Criterion) {
    tch::set_num_threads(2);
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let batch = expert_trajectories(&rt, 32);
    let refs: Vec<&Trajectory> = batch.iter().collect();
    let mut g = c.benchmark_group("learner");
    g.sample_size(30);
    g.throughput(Throughput::Elements(32));
    for (name, data_parallel) in [
        ("sft_step_32_demo_two_threads_one_pass", false),
        ("sft_step_32_demo_data_parallel", true),
    ] {
        let mut learner = Learner::new(demo_model(), 3e-3, Device::Cpu).expect("learner");
        learner.set_data_parallel(Some(data_parallel));
        g.bench_function(name, |b| b.iter(|| learner.sft_step(&refs, 1.0)));
    }
    g.finish();
}

/// One AdamW step (weight decay, clipping) over 16 weights of 576 × 1,536 (14.2 M, a tenth of
/// SmolLM2-135M) in fp32 and in bf16 (fp32 masters, stochastic rounding), with the one-pass
/// CPU update and with tensor operations.
fn adamw_step(c: &mut Criterion) {
    tch::set_num_threads(2);
    let mut g = c.benchmark_group("adamw");
    g.sample_size(10);
    g.throughput(Throughput::Elements(16 * 576 * 1536));
    for (kind_name, kind) in [("f32", Kind::Float), ("bf16", Kind::BFloat16)] {
        for (path, fused) in [("one_pass", true), ("tensor_ops", false)] {
            tch::manual_seed(0);
            let mut vs = nn::VarStore::new(Device::Cpu);
            for i in 0..16 {
                let _ = vs
                    .root()
                    .randn(&format!("w{i:02}"), &[576, 1536], 0.0, 0.05);
            }
            vs.set_kind(kind);
            let loss: Tensor = vs
                .variables()
                .values()
                .map(|w| (w * w.randn_like()).sum(Kind::Float))
                .sum();
            loss.backward();
            let mut opt = AdamW::new(&vs, 1e-5, 0.01).with_fused(fused);
            g.bench_function(format!("smollm2_tenth_{kind_name}_{path}"), |b| {
                b.iter(|| opt.clip_and_step(1.0, "bench", 0.0))
            });
        }
    }
    g.finish();
}

/// A rollout context over `env` for the untrained demo-shaped model with a `context` window;
/// `reuse` keeps sessions' keys and values between turns.
fn untrained(env: &str, context: usize, reuse: bool) -> RolloutContext {
    tch::manual_seed(0);
    let vs = nn::VarStore::new(Device::Cpu);
    let config = GptConfig {
        max_seq_len: context,
        ..demo_model()
    };
    let model = TinyGpt::new(&vs.root(), config).expect("model");
    let mut options = EngineOptions::with_max_batch(256);
    if !reuse {
        options.session_cache_bytes = 0;
        options.prompt_cache_bytes = 0;
    }
    let policy = TchPolicy::spawn_with_options(vs, model, options, 0, None).expect("policy");
    RolloutContext {
        factory: lookup(env).expect("registered env"),
        policy: Arc::new(policy),
        format: Arc::new(TinyChatFormat::new()),
        max_seq_len: context,
        stop: Vec::new(),
    }
}

/// One RL step of multi-turn rollouts: 16 `maze` tasks × 8 episodes, played until the env or
/// the 1,024-token context ends them, each turn at most 40 tokens.
fn multi_turn_rollouts(c: &mut Criterion) {
    tch::set_num_threads(2);
    let rt = runtime();
    let params = turn_params();
    let mut g = c.benchmark_group("rollout");
    g.sample_size(10);
    g.throughput(Throughput::Elements(128));
    for (name, reuse) in [("kv_reuse", true), ("prefill_every_turn", false)] {
        let ctx = untrained("maze", 1024, reuse);
        let tasks: Vec<_> = (0..16u64)
            .flat_map(|t| (0..8).map(move |_| t))
            .map(|t| (ctx.factory.task(Split::Train, t), t))
            .collect();
        g.bench_function(format!("maze_16x8_episodes_1024_context_{name}"), |b| {
            b.iter(|| {
                rt.block_on(run_many(&ctx, tasks.clone(), &params))
                    .expect("rollouts")
            })
        });
    }
    g.finish();
}

fn rollouts(c: &mut Criterion) {
    tch::set_num_threads(1);
    let rt = runtime();
    let ctx = untrained("arith-calc", 160, true);
    let tasks: Vec<_> = (0..128u64)
        .map(|i| (ctx.factory.task(Split::Train, i), i / 8))
        .collect();
    let mut g = c.benchmark_group("rollout");
    g.sample_size(10);
    g.throughput(Throughput::Elements(128));
    g.bench_function("arith_calc_128_episodes_untrained_policy", |b| {
        b.iter(|| {
            rt.block_on(run_many(&ctx, tasks.clone(), &turn_params()))
                .expect("rollouts")
        })
    });
    g.finish();
}

/// The tokio runtime the rollouts run on (two workers, like the trainer on this machine).
fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
}

/// Sampling of every rollout turn: temperature 1, at most 40 tokens.
fn turn_params() -> SamplingParams {
    SamplingParams {
        max_new_tokens: 40,
        ..Default::default()
    }
}

/// The vocabulary head of a GRPO update at the `--vs-trl` tiny Llama's shape: 1,536 policy
/// tokens (32 episodes × 48), width 128, 49,152 ids; forward, and backward of a loss on the
/// log-probs. Freed memory stays mapped, as in `agentrl`.
fn update_head(c: &mut Criterion) {
    agentrl_trainer::allocator::keep_freed_memory();
    tch::set_num_threads(2);
    tch::manual_seed(0);
    let (positions, width, vocab) = (1536, 128, 49_152);
    let opts = (Kind::Float, Device::Cpu);
    let weight = (Tensor::randn([vocab, width], opts) * 0.02).set_requires_grad(true);
    let hidden = Tensor::randn([positions, width], opts).set_requires_grad(true);
    let targets = Tensor::randint(vocab, [positions], (Kind::Int64, Device::Cpu));
    let mut g = c.benchmark_group("update_head");
    g.sample_size(10);
    g.throughput(Throughput::Elements(positions as u64));
    for (name, fused) in [("libtorch_log_softmax", false), ("column_pass", true)] {
        g.bench_function(format!("tiny_llama_1536_tokens_{name}"), |b| {
            b.iter(|| {
                let (logp, _) = agentrl_policy::decode::head_logprobs_for_bench(
                    &hidden, &targets, &weight, fused,
                )
                .expect("an f32 head on the CPU");
                logp.sum(Kind::Float).backward();
                let _ = weight.grad().zero_();
                let _ = hidden.grad().zero_();
            })
        });
    }
    g.finish();
}

criterion_group!(
    benches,
    advantages,
    grpo_update,
    sft_mixture,
    sft_data_parallel,
    adamw_step,
    rollouts,
    multi_turn_rollouts,
    update_head
);
criterion_main!(benches);
