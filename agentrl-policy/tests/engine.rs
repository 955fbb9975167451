//! The continuous-batching engine behind `TchPolicy`: generations through it are the ones a
//! single static batch gives (greedy and sampled, TinyGpt and Llama, f32 and bf16) while rows
//! join and leave mid-batch and prompts are prefilled in chunks; a session's keys and values are
//! reused across turns (exactly), only as far as the new prompt shares them, never across a
//! weight update (weights queued mid-generation are taken after it), within a byte budget, and
//! freed when the session ends or its caller leaves; identical prompts are computed once and
//! shared, and prompts that start alike share their common prefix; a step's prefill runs rows of
//! very different lengths in separate passes.
#![cfg(feature = "tch")]

use std::time::Duration;

use agentrl_core::{Generation, GenerationRequest, Policy, SamplingParams, SeededRng, TokenId};
use agentrl_policy::llama::Dtype;
use agentrl_policy::{
    EngineOptions, EngineStats, PolicyModel, TchPolicy, TinyGpt, snapshot_weights,
};
use tch::nn;

mod common;
use common::{random_gpt, random_llama};

/// A random TinyGpt with room for long generations, identical for a seed.
fn gpt(seed: i64) -> (nn::VarStore, TinyGpt) {
    random_gpt(seed, 512)
}

/// A random two-layer Llama with grouped-query attention and a 256-position context.
fn llama(seed: i64) -> (nn::VarStore, agentrl_policy::llama::Llama) {
    random_llama(
        seed,
        r#"{"model_type": "llama", "hidden_size": 32, "intermediate_size": 48,
        "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
        "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "vocab_size": 64,
        "max_position_embeddings": 256, "tie_word_embeddings": false}"#,
    )
}

/// Prompts of different lengths with different sampling: greedy and seeded sampling, short
/// and long generations, so rows finish at different steps.
fn workload(vocab: u32) -> Vec<GenerationRequest> {
    (0..7u32)
        .map(|i| {
            let prompt: Vec<TokenId> = (0..3 + 5 * i).map(|j| (i * 7 + j * 3) % vocab).collect();
            let params = if i % 2 == 0 {
                SamplingParams::greedy(4 + 6 * i as usize)
            } else {
                SamplingParams {
                    temperature: 1.0,
                    top_p: 0.9,
                    max_new_tokens: 30 - 3 * i as usize,
                    seed: Some(100 + u64::from(i)),
                    ..Default::default()
                }
            };
            GenerationRequest::new(prompt, params)
        })
        .collect()
}

/// What one static batch of a single row gives for each request (the reference).
fn reference(model: &dyn PolicyModel, requests: &[GenerationRequest]) -> Vec<Generation> {
    requests
        .iter()
        .map(|r| {
            let rng = SeededRng::new(r.params.seed.expect("seeded or greedy"));
            let mut rngs = [rng];
            let one = [r.prompt_ids.clone()];
            let g = model.generate(&one, std::slice::from_ref(&r.params), &mut rngs, 0, None);
            g.unwrap().remove(0)
        })
        .collect()
}

fn seeded(mut requests: Vec<GenerationRequest>) -> Vec<GenerationRequest> {
    for r in &mut requests {
        r.params.seed.get_or_insert(7);
    }
    requests
}

/// Asserts equal ids and logprobs within `tol`.
fn assert_same(got: &[Generation], want: &[Generation], tol: f32, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert_eq!(g.ids, w.ids, "{what}: request {i}");
        assert_eq!(g.finish, w.finish, "{what}: request {i}");
        for (a, b) in g.logprobs.iter().zip(&w.logprobs) {
            assert!(
                (a - b).abs() <= tol,
                "{what}: request {i}: logprob {a} vs {b}"
            );
        }
    }
}

/// Small batches and chunks: most requests wait for a slot and join a batch in progress, and
/// long prompts take several prefill steps.
fn cramped() -> EngineOptions {
    EngineOptions {
        max_batch: 2,
        prefill_chunk: 4,
        prefill_tokens: 12,
        ..EngineOptions::default()
    }
}

/// Neither sessions nor prompts cached: every prompt is prefilled in full.
fn no_caches() -> EngineOptions {
    EngineOptions {
        session_cache_bytes: 0,
        prompt_cache_bytes: 0,
        ..EngineOptions::default()
    }
}

/// Runs `requests` as concurrent calls on an engine with `options` over `gpt(seed)`, asserts
/// they equal the single-row reference (logprobs within 1e-5), and returns the engine's stats.
async fn concurrent_calls_match_the_reference(
    seed: i64,
    requests: &[GenerationRequest],
    options: EngineOptions,
) -> EngineStats {
    let (vs, m) = gpt(seed);
    let want = reference(&m, requests);
    let policy = TchPolicy::spawn_with_options(vs, m, options, 0, None).unwrap();
    let got = concurrently(&policy, requests).await;
    assert_same(&got, &want, 1e-5, "concurrent calls");
    policy.stats()
}

/// Runs every request as its own concurrent call.
async fn concurrently(policy: &TchPolicy, requests: &[GenerationRequest]) -> Vec<Generation> {
    let calls = requests.iter().map(|r| {
        let p = policy.clone();
        let r = r.clone();
        tokio::spawn(async move { p.generate(vec![r]).await.unwrap().remove(0) })
    });
    let mut out = Vec::new();
    for call in calls.collect::<Vec<_>>() {
        out.push(call.await.unwrap());
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tiny_gpt_generations_equal_single_static_batches() {
    let (vs, m) = gpt(1);
    let requests = seeded(workload(48));
    let want = reference(&m, &requests);
    for (name, options) in [
        ("default", EngineOptions::default()),
        ("cramped", cramped()),
    ] {
        let (mut copy_vs, copy) = gpt(1);
        copy_vs.copy(&vs).unwrap();
        let policy = TchPolicy::spawn_with_options(copy_vs, copy, options, 0, None).unwrap();
        // One call with every request, then one call per request, all at once.
        let together = policy.generate(requests.clone()).await.unwrap();
        assert_same(&together, &want, 1e-5, name);
        let apart = concurrently(&policy, &requests).await;
        assert_same(&apart, &want, 1e-5, name);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn llama_generations_equal_single_static_batches_in_f32() {
    let (vs, m) = llama(2);
    let requests = seeded(workload(64));
    let want = reference(&m, &requests);
    let policy = TchPolicy::spawn_with_options(vs, m, cramped(), 0, None).unwrap();
    let got = policy.generate(requests).await.unwrap();
    assert_same(&got, &want, 1e-5, "f32");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_vocabulary_read_weight_major_gives_the_same_generations() {
    // 40,000 ids: the engine computes its steps' logits as `W · hᵀ` and transposes them into
    // rows (split over two threads once a step holds 7 rows); the static reference multiplies
    // the plain way.
    let (vs, m) = random_llama(
        3,
        r#"{"model_type": "llama", "hidden_size": 32, "intermediate_size": 48,
        "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
        "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "vocab_size": 40000,
        "max_position_embeddings": 256, "tie_word_embeddings": true}"#,
    );
    let requests = seeded(workload(40_000));
    let want = reference(&m, &requests);
    let policy = TchPolicy::spawn_with_options(vs, m, EngineOptions::default(), 0, None).unwrap();
    let got = policy.generate(requests).await.unwrap();
    assert_same(&got, &want, 1e-5, "weight-major logits");
}

/// bf16 rounds differently in differently shaped batches, so a draw near a boundary (or a
/// greedy near-tie) may go another way than in a static batch. What must hold is that every
/// logprob the engine reports is the model's own, given the ids before it: checked against one
/// full forward pass over prompt and generation, within bf16's resolution.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn llama_bf16_logprobs_are_the_models_own_given_the_history() {
    let (vs, mut m) = llama(2);
    m.set_dtype(&vs, Dtype::Bf16);
    let (judge_vs, mut judge) = llama(2);
    judge.set_dtype(&judge_vs, Dtype::Bf16);
    let requests = seeded(workload(64));
    let policy = TchPolicy::spawn_with_options(vs, m, cramped(), 0, None).unwrap();
    let got = policy.generate(requests.clone()).await.unwrap();
    for (r, g) in requests.iter().zip(&got) {
        let all: Vec<i64> = r
            .prompt_ids
            .iter()
            .chain(&g.ids)
            .map(|&i| i64::from(i))
            .collect();
        let ids = tch::Tensor::from_slice(&all).view([1, -1]);
        let (logprobs, _) = tch::no_grad(|| judge.token_logprobs(&ids, 1.0));
        let full = Vec::<f32>::try_from(logprobs.view([-1])).unwrap();
        let generated = &full[r.prompt_ids.len() - 1..];
        for (k, (a, b)) in g.logprobs.iter().zip(generated).enumerate() {
            assert!(
                (a - b).abs() < 0.1,
                "token {k}: engine {a}, full forward {b}"
            );
        }
    }
}

/// A conversation of three turns: each prompt is the last one plus what was generated plus a
/// reply of `reply_len` ids.
async fn three_turns(policy: &TchPolicy, session: Option<&str>) -> Vec<Generation> {
    let mut prompt: Vec<TokenId> = (1..=20).map(|i| i % 48).collect();
    let mut out = Vec::new();
    for turn in 0..3u64 {
        let params = SamplingParams {
            max_new_tokens: 12,
            seed: Some(turn),
            ..Default::default()
        };
        let mut request = GenerationRequest::new(prompt.clone(), params);
        if let Some(s) = session {
            request = request.with_session(s);
        }
        let g = policy.generate(vec![request]).await.unwrap().remove(0);
        prompt.extend(&g.ids);
        prompt.extend((0..5).map(|i| (turn as u32 * 5 + i + 3) % 48));
        out.push(g);
    }
    out
}

fn spawn_gpt(seed: i64, options: EngineOptions) -> TchPolicy {
    let (vs, m) = gpt(seed);
    TchPolicy::spawn_with_options(vs, m, options, 0, None).unwrap()
}

#[tokio::test]
async fn sessions_reuse_their_keys_and_values_across_turns_exactly() {
    let without = spawn_gpt(3, no_caches());
    let want = three_turns(&without, None).await;
    assert_eq!(without.stats().reused_tokens, 0);

    let with = spawn_gpt(3, EngineOptions::default());
    let got = three_turns(&with, Some("episode-1")).await;
    assert_same(&got, &want, 1e-5, "reused");
    // Turn 2 reuses all but the last generated id of turn 1 and feeds that id plus the reply;
    // turn 3 likewise.
    let stats = with.stats();
    let turn2_reused = 20 + want[0].ids.len() - 1;
    let turn3_reused = turn2_reused + 1 + 5 + want[1].ids.len() - 1;
    assert_eq!(stats.reused_tokens as usize, turn2_reused + turn3_reused);
    assert_eq!(stats.prefill_tokens, 20 + 2 * 6);
    assert_eq!(stats.cached_sessions, 1);
    assert!(stats.session_cache_bytes > 0);
    // Ending the session frees its cache.
    with.end_session("episode-1");
    let _ = with
        .generate(vec![GenerationRequest::new(
            vec![1],
            SamplingParams::greedy(1),
        )])
        .await;
    assert_eq!(with.stats().cached_sessions, 0);
    assert_eq!(with.stats().session_cache_bytes, 0);
}

#[tokio::test]
async fn llama_sessions_reuse_their_keys_and_values_exactly() {
    let (vs, m) = llama(11);
    let without = TchPolicy::spawn_with_options(vs, m, EngineOptions::default(), 0, None).unwrap();
    let want = three_turns(&without, None).await;
    let (vs, m) = llama(11);
    let with = TchPolicy::spawn_with_options(vs, m, cramped(), 0, None).unwrap();
    let got = three_turns(&with, Some("episode")).await;
    assert_same(&got, &want, 1e-5, "llama, reused");
    assert!(with.stats().reused_tokens > 40, "{:?}", with.stats());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_prompt_does_not_pad_short_ones_in_its_prefill_step() {
    // One call, so every row joins in the same step: a 200-id prompt and twenty 2-id ones.
    // Padded into one pass they would cost 21 × 200 positions; split by length, two passes.
    let mut requests = vec![GenerationRequest::new(
        (0..200).map(|i| (i * 5 + 1) % 48).collect(),
        SamplingParams::greedy(3),
    )];
    for i in 0..20u32 {
        let params = SamplingParams {
            max_new_tokens: 3,
            seed: Some(u64::from(i)),
            ..Default::default()
        };
        requests.push(GenerationRequest::new(vec![i % 48, (i * 3) % 48], params));
    }
    let requests = seeded(requests);
    let (vs, m) = gpt(21);
    let want = reference(&m, &requests);
    let policy = TchPolicy::spawn_with_options(vs, m, no_caches(), 0, None).unwrap();
    let got = policy.generate(requests.clone()).await.unwrap();
    assert_same(&got, &want, 1e-5, "one call of mixed prompt lengths");
    let stats = policy.stats();
    assert_eq!(stats.prefill_tokens, 200 + 20 * 2, "{stats:?}");
    assert_eq!(stats.prefill_batches, 2, "{stats:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn identical_prompts_are_prefilled_once_and_shared() {
    // A GRPO group: eight episodes of one task start from the same prompt, sampled apart.
    let prompt: Vec<TokenId> = (0..40).map(|i| (i * 7 + 2) % 48).collect();
    let group: Vec<GenerationRequest> = (0..8u64)
        .map(|i| {
            let params = SamplingParams {
                max_new_tokens: 10,
                seed: Some(i),
                ..Default::default()
            };
            GenerationRequest::new(prompt.clone(), params).with_session(format!("episode-{i}"))
        })
        .collect();
    let stats = concurrent_calls_match_the_reference(12, &group, EngineOptions::default()).await;
    // The prompt is computed once; the seven others copy all of it but the last id.
    assert_eq!(stats.prefill_tokens, 40 + 7, "{stats:?}");
    assert_eq!(stats.shared_prompt_hits, 7, "{stats:?}");
    assert!(stats.prompt_cache_bytes > 0, "{stats:?}");
    // Without the prompt cache, every row computes it.
    let options = EngineOptions {
        prompt_cache_bytes: 0,
        ..EngineOptions::default()
    };
    let stats = concurrent_calls_match_the_reference(12, &group, options).await;
    assert_eq!(stats.prefill_tokens, 8 * 40);
}

#[tokio::test]
async fn prompts_that_start_alike_copy_their_common_prefix() {
    // Two tasks of one env: the same 30-id system prompt and tool specs, then each task's own.
    let system: Vec<TokenId> = (0..30).map(|i| (i * 11 + 5) % 48).collect();
    let task = |first: TokenId| -> Vec<TokenId> {
        let mut ids = system.clone();
        ids.extend((0..10).map(|i| (first + i * 3) % 48));
        ids
    };
    let (a, b) = (task(1), task(2));
    // Shares only 5 ids with `a`: too short to copy.
    let mut c: Vec<TokenId> = system[..5].to_vec();
    c.extend([47, 46, 45, 44, 43, 42]);
    let params = SamplingParams {
        max_new_tokens: 8,
        seed: Some(3),
        ..Default::default()
    };
    let requests: Vec<GenerationRequest> = [&a, &b, &c]
        .iter()
        .enumerate()
        .map(|(i, ids)| {
            GenerationRequest::new(ids.to_vec(), params.clone()).with_session(format!("ep-{i}"))
        })
        .collect();
    let (vs, m) = gpt(13);
    let want = reference(&m, &requests);
    let policy = TchPolicy::spawn_with_options(vs, m, EngineOptions::default(), 0, None).unwrap();
    let mut got = Vec::new();
    for request in &requests {
        got.push(
            policy
                .generate(vec![request.clone()])
                .await
                .unwrap()
                .remove(0),
        );
    }
    assert_same(&got, &want, 1e-5, "shared prefix");
    let stats = policy.stats();
    assert_eq!(stats.reused_tokens, 30, "{stats:?}");
    assert_eq!(
        stats.prefill_tokens as usize,
        a.len() + 10 + c.len(),
        "{stats:?}"
    );
    assert_eq!(stats.shared_prompt_hits, 1, "{stats:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_step_of_tasks_with_one_system_prompt_prefills_it_once() {
    // An RL step arriving at once: 3 tasks × 2 episodes, every prompt the same 30-id system
    // prompt and then 10 ids of its task. Rows wait for a prompt being prefilled that they share
    // more with than with anything cached, then copy it.
    let system: Vec<TokenId> = (0..30).map(|i| (i * 13 + 7) % 48).collect();
    let step: Vec<GenerationRequest> = (0..6u32)
        .map(|i| {
            let task = i / 2;
            let mut ids = system.clone();
            ids.extend((0..10).map(|j| (task + 1 + j * 5) % 48));
            let params = SamplingParams {
                max_new_tokens: 6,
                seed: Some(u64::from(i)),
                ..Default::default()
            };
            GenerationRequest::new(ids, params).with_session(format!("episode-{i}"))
        })
        .collect();
    let stats = concurrent_calls_match_the_reference(14, &step, EngineOptions::default()).await;
    // The first prompt in full; the first episode of each other task its 10 own ids; every
    // second episode only its last id.
    assert_eq!(stats.prefill_tokens, 40 + 2 * 10 + 3, "{stats:?}");
    assert_eq!(stats.reused_tokens, 2 * 30 + 3 * 39, "{stats:?}");
    assert_eq!(stats.shared_prompt_hits, 5, "{stats:?}");
}

#[tokio::test]
async fn a_prompt_that_leaves_the_cached_prefix_reuses_only_what_it_shares() {
    let policy = spawn_gpt(4, EngineOptions::default());
    let reference = spawn_gpt(4, EngineOptions::default());
    let first: Vec<TokenId> = (0..30).map(|i| (i * 5 + 1) % 48).collect();
    let params = SamplingParams::greedy(6);
    let turn = |ids: Vec<TokenId>| GenerationRequest::new(ids, params.clone()).with_session("s");
    policy.generate(vec![turn(first.clone())]).await.unwrap();
    // The next prompt rewrites history from id 10 on (as a template that re-renders earlier
    // turns would): only the first 10 positions are reused, and the result is exact.
    let mut edited = first.clone();
    edited[10] = (edited[10] + 1) % 48;
    edited.extend([3, 4, 5]);
    let got = policy.generate(vec![turn(edited.clone())]).await.unwrap();
    let want = reference
        .generate(vec![GenerationRequest::new(edited.clone(), params.clone())])
        .await
        .unwrap();
    assert_same(&got, &want, 1e-5, "edited history");
    assert_eq!(policy.stats().reused_tokens, 10);
    // A prompt that shares nothing is prefilled from scratch.
    let other: Vec<TokenId> = vec![47, 46, 45, 44];
    let got = policy.generate(vec![turn(other.clone())]).await.unwrap();
    let want = reference
        .generate(vec![GenerationRequest::new(other, params)])
        .await
        .unwrap();
    assert_same(&got, &want, 1e-5, "unrelated");
    assert_eq!(policy.stats().reused_tokens, 10);
}

#[tokio::test]
async fn new_weights_are_never_mixed_with_keys_cached_under_old_ones() {
    let policy = spawn_gpt(5, EngineOptions::default());
    let (other_vs, _other) = gpt(6);
    let prompt: Vec<TokenId> = (0..25).map(|i| (i * 3) % 48).collect();
    let params = SamplingParams::greedy(8);
    let first = policy
        .generate(vec![
            GenerationRequest::new(prompt.clone(), params.clone()).with_session("s"),
        ])
        .await
        .unwrap();
    policy
        .set_weights(snapshot_weights(&other_vs), 1)
        .await
        .unwrap();
    assert_eq!(policy.stats().cached_sessions, 0);
    let mut next = prompt.clone();
    next.extend(&first[0].ids);
    next.extend([1, 2, 3]);
    let got = policy
        .generate(vec![
            GenerationRequest::new(next.clone(), params.clone()).with_session("s"),
        ])
        .await
        .unwrap();
    assert_eq!(got[0].policy_version, 1);
    assert_eq!(policy.stats().reused_tokens, 0);
    let fresh = spawn_gpt(6, EngineOptions::default());
    let want = fresh
        .generate(vec![GenerationRequest::new(next, params)])
        .await
        .unwrap();
    assert_same(&got, &want, 1e-5, "after the update");
}

#[tokio::test]
async fn queued_weights_wait_for_the_running_generation_then_serve_the_next() {
    let policy = spawn_gpt(8, EngineOptions::default());
    let (other_vs, _other) = gpt(9);
    let prompt: Vec<TokenId> = (0..12).map(|i| (i * 7) % 48).collect();
    let params = SamplingParams::greedy(300);
    let request = || GenerationRequest::new(prompt.clone(), params.clone());
    let mut running = policy.generate_streaming(vec![request()]).unwrap();
    running.tokens.recv().await.expect("a first token");
    // Queued while the generation runs: the call returns at once, the generation ends on the
    // weights it started with, and only then are the new ones taken; a request made after
    // them waits for them.
    let queued = policy
        .queue_weights(snapshot_weights(&other_vs), 1)
        .unwrap();
    let next = policy.generate_streaming(vec![request()]).unwrap();
    let old = running.finish().await.unwrap();
    queued.taken().await.unwrap();
    assert_eq!(policy.version(), 1);
    let want_old = spawn_gpt(8, EngineOptions::default())
        .generate(vec![request()])
        .await
        .unwrap();
    assert_same(&old, &want_old, 1e-5, "the running generation");
    assert_eq!(old[0].policy_version, 0);
    let new = next.finish().await.unwrap();
    let want_new = spawn_gpt(9, EngineOptions::default())
        .generate(vec![request()])
        .await
        .unwrap();
    assert_same(&new, &want_new, 1e-5, "the next generation");
    assert_eq!(new[0].policy_version, 1);
    // Weights that do not fit are refused through the same handle.
    let bad = vec![(
        "no.such.weight".to_string(),
        tch::Tensor::zeros([2], tch::kind::FLOAT_CPU),
    )];
    assert!(policy.queue_weights(bad, 2).unwrap().taken().await.is_err());
    assert_eq!(policy.version(), 1);
}

#[tokio::test]
async fn the_session_cache_stays_within_its_byte_budget() {
    // One session keeps 39 positions (30 prompt ids, 10 generated but the last): 2 layers ×
    // (K + V) × 32 wide × 4 bytes = 512 bytes each, 19,968 bytes; the budget holds two.
    let budget = 45_000;
    let options = EngineOptions {
        session_cache_bytes: budget,
        // Else an evicted session's next turn would copy its first prompt from there.
        prompt_cache_bytes: 0,
        ..EngineOptions::default()
    };
    let policy = spawn_gpt(7, options);
    let reference = spawn_gpt(7, EngineOptions::default());
    let prompt = |s: u32| -> Vec<TokenId> { (0..30).map(|i| (i + s) % 48).collect() };
    let params = SamplingParams::greedy(10);
    for s in 0..5u32 {
        let r = GenerationRequest::new(prompt(s), params.clone()).with_session(format!("s{s}"));
        policy.generate(vec![r]).await.unwrap();
        let stats = policy.stats();
        assert!(stats.session_cache_bytes <= budget, "{stats:?}");
    }
    let stats = policy.stats();
    assert_eq!(stats.cached_sessions, 2, "{stats:?}");
    assert_eq!(stats.evictions, 3, "{stats:?}");
    // An evicted session's next turn is prefilled from scratch, and still exact.
    let mut next = prompt(0);
    next.extend([9, 9, 9]);
    let got = policy
        .generate(vec![
            GenerationRequest::new(next.clone(), params.clone()).with_session("s0"),
        ])
        .await
        .unwrap();
    let want = reference
        .generate(vec![GenerationRequest::new(next, params)])
        .await
        .unwrap();
    assert_same(&got, &want, 1e-5, "evicted");
    assert_eq!(policy.stats().reused_tokens, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn short_requests_join_and_leave_while_a_long_one_runs() {
    let policy = spawn_gpt(8, EngineOptions::default());
    let long = GenerationRequest::new(
        vec![1, 2, 3],
        SamplingParams {
            max_new_tokens: 400,
            seed: Some(1),
            ..Default::default()
        },
    );
    let mut stream = policy.generate_streaming(vec![long]).unwrap();
    stream.tokens.recv().await.expect("a first token");
    // Three short calls arrive while the long one runs, and finish long before it does.
    for i in 0..3 {
        let short = GenerationRequest::new(vec![5, 6, i], SamplingParams::greedy(3));
        let g = policy.generate(vec![short]).await.unwrap();
        assert_eq!(g[0].ids.len(), 3);
    }
    let mut seen = 1;
    while stream.tokens.try_recv().is_ok() {
        seen += 1;
    }
    assert!(
        seen < 400,
        "the short calls waited for the long one ({seen} tokens)"
    );
    let done = stream.finish().await.unwrap();
    assert_eq!(done[0].ids.len(), 400);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_caller_that_leaves_frees_its_row_and_cache() {
    let policy = spawn_gpt(9, EngineOptions::default());
    let long = GenerationRequest::new(
        vec![1, 2, 3],
        SamplingParams {
            max_new_tokens: 500,
            seed: Some(1),
            ..Default::default()
        },
    )
    .with_session("gone");
    let call = {
        let p = policy.clone();
        tokio::spawn(async move { p.generate(vec![long]).await })
    };
    tokio::time::sleep(Duration::from_millis(50)).await;
    call.abort();
    let _ = call.await;
    // The engine notices at its next step; later calls are served as usual.
    let g = policy
        .generate(vec![GenerationRequest::new(
            vec![4, 5],
            SamplingParams::greedy(2),
        )])
        .await
        .unwrap();
    assert_eq!(g[0].ids.len(), 2);
    let stats = policy.stats();
    assert_eq!(stats.cancelled, 1, "{stats:?}");
    assert_eq!(stats.cached_sessions, 0, "{stats:?}");
}

#[tokio::test]
async fn bad_requests_fail_their_own_call_only() {
    let policy = spawn_gpt(10, EngineOptions::default());
    let good = GenerationRequest::new(vec![1, 2], SamplingParams::greedy(3));
    let bad = GenerationRequest::new(vec![1, 480], SamplingParams::greedy(3));
    let (a, b) = tokio::join!(
        policy.generate(vec![good.clone()]),
        policy.generate(vec![good.clone(), bad])
    );
    assert_eq!(a.unwrap()[0].ids.len(), 3);
    let err = b.unwrap_err().to_string();
    assert!(err.contains("outside the vocabulary"), "{err}");
    let empty = GenerationRequest::new(vec![], SamplingParams::greedy(3));
    assert!(policy.generate(vec![empty]).await.is_err());
    // A prompt that fills the context gets no ids, at once.
    let full = GenerationRequest::new(vec![1; 512], SamplingParams::greedy(3));
    let g = policy.generate(vec![full]).await.unwrap();
    assert!(g[0].ids.is_empty());
}

#[test]
fn work_runs_on_the_model_thread_with_its_thread_count_and_a_panic_is_an_error() {
    let options = EngineOptions {
        threads: Some(1),
        ..EngineOptions::default()
    };
    let policy = spawn_gpt(11, options);
    let (name, threads) = policy
        .run_on_model_thread(Some(2), || {
            let name = std::thread::current().name().map(str::to_string);
            (name, tch::get_num_threads())
        })
        .unwrap();
    assert_eq!(name.as_deref(), Some("agentrl-policy"));
    assert_eq!(threads, 2);
    // The model thread's own count is back once the work is done.
    let own = policy
        .run_on_model_thread(None, tch::get_num_threads)
        .unwrap();
    assert_eq!(own, 1);
    let err = policy
        .run_on_model_thread(None, || panic!("a failing update"))
        .map(|_: ()| ())
        .unwrap_err()
        .to_string();
    assert!(err.contains("panicked"), "{err}");
    // The thread still serves.
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let g = rt
        .block_on(policy.generate(vec![GenerationRequest::new(
            vec![1, 2],
            SamplingParams::greedy(3),
        )]))
        .unwrap();
    assert_eq!(g[0].ids.len(), 3);
    assert_eq!(policy.run_on_model_thread(None, || 7).unwrap(), 7);
}
