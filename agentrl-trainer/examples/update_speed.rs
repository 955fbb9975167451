//! Times the learner's policy update alone on a GRPO-shaped batch: `GROUPS` groups × `SIZE`
//! episodes, each a `PROMPT`-token prompt shared by its group and `GENERATED` generated tokens
//! (random ids), on a Llama-family model (GGUF file or Hugging Face directory):
//!
//! ```text
//! cargo run --release -p agentrl-trainer --example update_speed -- MODEL 4 8 60 48 [f32|bf16]
//! ```
//!
//! Prints one JSON line per setting (whole rows; the prompt shared once per group; shared and
//! passes of at most 1,024 padded tokens), each the median of three updates after a warm-up,
//! and the time of an update on a two-token batch (the optimiser step and fixed costs).

use std::path::PathBuf;
use std::time::Instant;

use agentrl_core::{FinishReason, Split, Trajectory, Turn};
use agentrl_policy::llama::Dtype;
use agentrl_policy::load::load_llama;
use agentrl_trainer::learner::{GrpoParams, Learner};
use tch::Device;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = "usage: update_speed MODEL GROUPS SIZE PROMPT GENERATED [f32|bf16]";
    let number = |i: usize| -> usize {
        args.get(i)
            .and_then(|a| a.parse().ok())
            .unwrap_or_else(|| panic!("{usage}"))
    };
    let model = PathBuf::from(args.first().unwrap_or_else(|| panic!("{usage}")));
    let (groups, size, prompt, generated) = (number(1), number(2), number(3), number(4));
    let dtype = match args.get(5).map(String::as_str) {
        Some("bf16") => Dtype::Bf16,
        _ => Dtype::F32,
    };
    // As `agentrl` does: freed memory stays mapped (the update runs on this thread, which
    // then holds the process's one OpenMP team).
    agentrl_trainer::allocator::keep_freed_memory();
    tch::set_num_threads(2);
    let (vs, llama) = load_llama(&model, Device::Cpu, dtype).expect("the model loads");
    let mut learner = Learner::llama(vs, llama, None, 1e-6).expect("a learner");
    let vocab = 49_000u32;
    let mut state = 12345u64;
    let mut next_id = || {
        state = state.wrapping_mul(6364136223846793005).wrapping_add(1);
        ((state >> 33) as u32) % vocab
    };
    let mut batch = Vec::new();
    for _ in 0..groups {
        let ids: Vec<u32> = (0..prompt).map(|_| next_id()).collect();
        for _ in 0..size {
            let turn = Turn {
                injected_ids: ids.clone(),
                generated_ids: (0..generated).map(|_| next_id()).collect(),
                logprobs: vec![-10.0; generated],
                policy_version: 0,
                policy_name: None,
                finish: FinishReason::Length,
                reward: 0.0,
                stale: false,
                invalid_action: None,
            };
            batch.push(Trajectory::new("toy", "t", Split::Train, 0).with_turns(vec![turn]));
        }
    }
    let refs: Vec<&Trajectory> = batch.iter().collect();
    let advantages: Vec<f64> = (0..refs.len())
        .map(|i| if i % 2 == 0 { 1.0 } else { -1.0 })
        .collect();
    let time = |learner: &mut Learner, refs: &[&Trajectory], advantages: &[f64]| {
        let mut seconds = Vec::new();
        for _ in 0..4 {
            let t0 = Instant::now();
            learner.grpo_step(refs, advantages, GrpoParams::default());
            seconds.push(t0.elapsed().as_secs_f64());
        }
        let mut timed = seconds[1..].to_vec();
        timed.sort_by(f64::total_cmp);
        timed[1]
    };
    for (name, shared, tokens) in [
        ("whole", 0, 0),
        ("shared", 16, 0),
        ("shared_1024_tokens", 16, 1024),
    ] {
        learner.set_shared_prefix(shared);
        learner.set_micro_batch_tokens(tokens);
        let seconds = time(&mut learner, &refs, &advantages);
        println!("{{\"setting\": \"{name}\", \"update_seconds\": {seconds:.3}}}");
    }
    let tiny = &refs[..1];
    let tiny_batch: Vec<Trajectory> = tiny
        .iter()
        .map(|t| {
            let mut t = (*t).clone();
            t.turns[0].injected_ids.truncate(1);
            t.turns[0].generated_ids.truncate(1);
            t.turns[0].logprobs.truncate(1);
            t
        })
        .collect();
    let tiny_refs: Vec<&Trajectory> = tiny_batch.iter().collect();
    let seconds = time(&mut learner, &tiny_refs, &[1.0]);
    println!("{{\"setting\": \"two_tokens\", \"update_seconds\": {seconds:.3}}}");
}
