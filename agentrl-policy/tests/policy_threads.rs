//! `EngineOptions::threads`: a policy thread with a libtorch thread count of its own generates
//! what one with the process-wide count does, and the caller's thread keeps its count. A test
//! binary of its own, since setting a count also changes the one that threads new to libtorch
//! start with.
#![cfg(feature = "tch")]

use agentrl_core::{GenerationRequest, Policy, SamplingParams, TokenId};
use agentrl_policy::{EngineOptions, TchPolicy, TinyGpt};
use tch::nn;

mod common;

/// A random TinyGpt, identical for a seed.
fn gpt(seed: i64) -> (nn::VarStore, TinyGpt) {
    common::random_gpt(seed, 256)
}

#[tokio::test]
async fn a_policy_thread_with_its_own_thread_count_generates_the_same_and_leaves_the_callers() {
    let callers = tch::get_num_threads();
    let requests: Vec<GenerationRequest> = (0..4u32)
        .map(|i| {
            let prompt: Vec<TokenId> = (0..5 + 7 * i).map(|j| (i * 5 + j * 3) % 48).collect();
            GenerationRequest::new(prompt, SamplingParams::greedy(12))
        })
        .collect();
    let (vs, m) = gpt(11);
    let default = TchPolicy::spawn_with_options(vs, m, EngineOptions::default(), 0, None).unwrap();
    let want = default.generate(requests.clone()).await.unwrap();
    let own = EngineOptions {
        threads: Some(1),
        ..EngineOptions::default()
    };
    let (vs, m) = gpt(11);
    let single = TchPolicy::spawn_with_options(vs, m, own, 0, None).unwrap();
    let got = single.generate(requests).await.unwrap();
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        assert_eq!(g.ids, w.ids, "request {i}");
        for (a, b) in g.logprobs.iter().zip(&w.logprobs) {
            assert!((a - b).abs() <= 1e-5, "request {i}: logprob {a} vs {b}");
        }
    }
    assert_eq!(tch::get_num_threads(), callers);
}
