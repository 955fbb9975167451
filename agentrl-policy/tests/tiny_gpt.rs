//! The tch transformer: cached batched generation matches the full forward, padding does not
//! leak between rows, the policy thread batches concurrent callers, and stop ids and stop
//! strings end generation at the right token.

#![cfg(feature = "tch")]

use agentrl_core::{FinishReason, GenerationRequest, Policy, SamplingParams, SeededRng};
use std::sync::Arc;

use agentrl_policy::{Detokenizer, PolicyModel};
use agentrl_policy::{GptConfig, TchPolicy, TinyGpt, snapshot_weights};
use tch::{Device, Kind, Tensor, nn};

fn model(seed: i64) -> (nn::VarStore, TinyGpt) {
    model_with_vocab(seed, 40)
}

fn model_with_vocab(seed: i64, vocab_size: usize) -> (nn::VarStore, TinyGpt) {
    tch::manual_seed(seed);
    let vs = nn::VarStore::new(Device::Cpu);
    let cfg = GptConfig {
        vocab_size,
        d_model: 32,
        n_layers: 2,
        n_heads: 4,
        max_seq_len: 32,
        ffn_mult: 2,
        rope_theta: 10_000.0,
    };
    let m = TinyGpt::new(&vs.root(), cfg).unwrap();
    (vs, m)
}

fn sampled(max: usize, seed: u64) -> SamplingParams {
    SamplingParams {
        max_new_tokens: max,
        seed: Some(seed),
        ..Default::default()
    }
}

#[test]
fn cached_generation_logprobs_equal_the_full_forward() {
    let (_vs, m) = model(1);
    let prompt = vec![1u32, 5, 7, 9];
    let params = sampled(10, 42);
    let g = m
        .generate(
            std::slice::from_ref(&prompt),
            &[params],
            &mut [SeededRng::new(42)],
            3,
            None,
        )
        .unwrap()
        .remove(0);
    assert_eq!(g.ids.len(), 10);
    assert_eq!(g.policy_version, 3);
    let all: Vec<i64> = prompt
        .iter()
        .chain(g.ids.iter())
        .map(|&i| i as i64)
        .collect();
    let ids = Tensor::from_slice(&all).view([1, -1]);
    let (lp, _) = tch::no_grad(|| m.token_logprobs(&ids, 1.0));
    let lp: Vec<f32> = Vec::try_from(lp.view([-1]).to_kind(Kind::Float)).unwrap();
    let tail = &lp[prompt.len() - 1..];
    for (a, b) in tail.iter().zip(g.logprobs.iter()) {
        assert!((a - b).abs() < 1e-4, "{a} vs {b}");
    }
}

#[test]
fn left_padding_does_not_change_a_row() {
    let (_vs, m) = model(2);
    let short = vec![3u32, 4];
    let long = vec![1u32, 2, 3, 4, 5, 6, 7, 8, 9];
    let p = SamplingParams::greedy(6);
    let alone = m
        .generate(
            std::slice::from_ref(&short),
            std::slice::from_ref(&p),
            &mut [SeededRng::new(0)],
            0,
            None,
        )
        .unwrap();
    let batched = m
        .generate(
            &[long, short],
            &[p.clone(), p],
            &mut [SeededRng::new(0), SeededRng::new(0)],
            0,
            None,
        )
        .unwrap();
    assert_eq!(alone[0].ids, batched[1].ids);
    for (a, b) in alone[0].logprobs.iter().zip(batched[1].logprobs.iter()) {
        assert!((a - b).abs() < 1e-4);
    }
}

#[test]
fn stop_ids_context_limit_and_bad_ids() {
    let (_vs, m) = model(3);
    let greedy = SamplingParams::greedy(5);
    let first = m
        .generate(
            &[vec![1, 2]],
            std::slice::from_ref(&greedy),
            &mut [SeededRng::new(0)],
            0,
            None,
        )
        .unwrap();
    let stop = first[0].ids[0];
    let p = SamplingParams {
        stop_ids: vec![stop],
        ..greedy.clone()
    };
    let g = m
        .generate(&[vec![1, 2]], &[p], &mut [SeededRng::new(0)], 0, None)
        .unwrap();
    assert_eq!(g[0].ids, vec![stop]);
    assert_eq!(g[0].finish, FinishReason::Stop);
    // A prompt that fills the context generates nothing.
    let full = vec![1u32; 32];
    let g = m
        .generate(
            &[full],
            std::slice::from_ref(&greedy),
            &mut [SeededRng::new(0)],
            0,
            None,
        )
        .unwrap();
    assert!(g[0].ids.is_empty());
    assert_eq!(g[0].finish, FinishReason::Length);
    // Generation never runs past the context.
    let long = SamplingParams::greedy(100);
    let g = m
        .generate(
            &[vec![1u32; 30]],
            &[long],
            &mut [SeededRng::new(0)],
            0,
            None,
        )
        .unwrap();
    assert_eq!(g[0].ids.len(), 2);
    let err = m
        .generate(
            &[vec![1, 400]],
            &[greedy],
            &mut [SeededRng::new(0)],
            0,
            None,
        )
        .unwrap_err();
    assert!(err.to_string().contains("outside the vocabulary"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn policy_thread_batches_concurrent_callers_and_swaps_weights() {
    let (vs, m) = model(4);
    let policy = TchPolicy::spawn(vs, m, 64, 9).unwrap();
    let mut handles = Vec::new();
    for i in 0..16u32 {
        let p = policy.clone();
        handles.push(tokio::spawn(async move {
            let req = GenerationRequest::new(vec![1, i % 30 + 2], sampled(4, i as u64));
            p.generate(vec![req]).await
        }));
    }
    for h in handles {
        let g = h.await.unwrap().unwrap();
        assert_eq!(g[0].ids.len(), 4);
    }
    assert!(
        policy.batches_run() < 16,
        "16 concurrent calls ran as {} batches",
        policy.batches_run()
    );

    let greedy = GenerationRequest::new(vec![1, 2, 3], SamplingParams::greedy(6));
    let before = policy.generate(vec![greedy.clone()]).await.unwrap();
    let (other_vs, _other) = model(99);
    policy
        .set_weights(snapshot_weights(&other_vs), 7)
        .await
        .unwrap();
    assert_eq!(policy.version(), 7);
    let after = policy.generate(vec![greedy]).await.unwrap();
    assert_eq!(after[0].policy_version, 7);
    assert_ne!(before[0].logprobs, after[0].logprobs);
    let bad = vec![(
        "nope".to_string(),
        Tensor::zeros([1], (Kind::Float, Device::Cpu)),
    )];
    assert!(policy.set_weights(bad, 8).await.is_err());
    assert_eq!(policy.version(), 7);
}

/// A text view in which every id is several characters (`<12>`), so stop strings can end in
/// the middle of a token, as they do with real subword tokenizers.
fn bracketed(ids: &[u32]) -> String {
    ids.iter().map(|id| format!("<{id}>")).collect()
}

#[test]
fn stop_strings_end_generation_at_the_token_that_completes_them() {
    let (_vs, m) = model(5);
    let detokenizer: Detokenizer = Arc::new(bracketed);
    let greedy = SamplingParams::greedy(16);
    let full = m
        .generate(
            &[vec![1, 2]],
            std::slice::from_ref(&greedy),
            &mut [SeededRng::new(0)],
            0,
            None,
        )
        .unwrap()
        .remove(0);
    assert_eq!(full.ids.len(), 16);
    // A stop string spanning tokens 4 and 5 and ending inside token 5: "3><1" of "<3><17>".
    let k = 5;
    let (prev, next) = (full.ids[k - 1].to_string(), full.ids[k].to_string());
    let stop = format!("{}><{}", &prev[prev.len() - 1..], &next[..1]);
    // Where a plain scan of the text finds it first (it may occur before token 5).
    let first = (1..=full.ids.len())
        .find(|&n| bracketed(&full.ids[..n]).contains(&stop))
        .unwrap();
    assert!(first <= k + 1);
    let params = SamplingParams {
        stop: vec!["never-in-this-text".into(), stop.clone()],
        ..greedy.clone()
    };
    // Row 0 stops at the string; row 1 (no stop strings, same prompt) runs to its length.
    let out = m
        .generate(
            &[vec![1, 2], vec![1, 2]],
            &[params.clone(), greedy.clone()],
            &mut [SeededRng::new(0), SeededRng::new(0)],
            0,
            Some(&detokenizer),
        )
        .unwrap();
    assert_eq!(out[0].ids, full.ids[..first]);
    for (a, b) in out[0].logprobs.iter().zip(&full.logprobs[..first]) {
        assert!((a - b).abs() < 1e-4, "{a} vs {b}");
    }
    assert_eq!(out[0].finish, FinishReason::Stop);
    assert_eq!(out[0].matched_stop.as_deref(), Some(stop.as_str()));
    assert_eq!(out[1].ids, full.ids);
    assert_eq!(out[1].finish, FinishReason::Length);
    assert_eq!(out[1].matched_stop, None);

    // Without a text view, stop strings are refused with a reason, not ignored.
    let err = m
        .generate(&[vec![1, 2]], &[params], &mut [SeededRng::new(0)], 0, None)
        .unwrap_err();
    assert!(err.to_string().contains("detokenizer"), "{err}");
    // An empty stop string would match before any text: refused.
    let empty = SamplingParams {
        stop: vec![String::new()],
        ..greedy
    };
    let err = m
        .generate(
            &[vec![1, 2]],
            &[empty],
            &mut [SeededRng::new(0)],
            0,
            Some(&detokenizer),
        )
        .unwrap_err();
    assert!(err.to_string().contains("stop string 0 is empty"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_policy_thread_matches_stop_strings_only_with_a_detokenizer() {
    let stop_at = |text: &str| SamplingParams {
        stop: vec![text.to_string()],
        ..SamplingParams::greedy(12)
    };
    let (vs, m) = model(6);
    let plain = TchPolicy::spawn(vs, m, 8, 0).unwrap();
    let err = plain
        .generate(vec![GenerationRequest::new(vec![3, 4], stop_at("<"))])
        .await
        .unwrap_err();
    assert!(err.to_string().contains("detokenizer"), "{err}");

    let (vs, m) = model(7);
    let with_text = TchPolicy::spawn_with_detokenizer(vs, m, 8, 0, Arc::new(bracketed)).unwrap();
    let req = GenerationRequest::new(vec![3, 4], SamplingParams::greedy(12));
    let full = with_text.generate(vec![req]).await.unwrap().remove(0);
    let third = format!("<{}>", full.ids[2]);
    let g = with_text
        .generate(vec![GenerationRequest::new(vec![3, 4], stop_at(&third))])
        .await
        .unwrap()
        .remove(0);
    let first = (1..=full.ids.len())
        .find(|&n| bracketed(&full.ids[..n]).contains(&third))
        .unwrap();
    assert_eq!(g.ids, full.ids[..first]);
    assert_eq!(g.matched_stop, Some(third));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streamed_tokens_are_the_generations_tokens_in_order() {
    let (vs, m) = model(8);
    let policy = TchPolicy::spawn(vs, m, 8, 0).unwrap();
    let requests = vec![
        GenerationRequest::new(vec![1, 2], sampled(9, 1)),
        GenerationRequest::new(vec![3, 4, 5], sampled(5, 2)),
    ];
    let mut stream = policy.generate_streaming(requests.clone()).unwrap();
    let mut seen: Vec<Vec<(u32, f32)>> = vec![Vec::new(); 2];
    while let Some((i, id, lp)) = stream.tokens.recv().await {
        seen[i].push((id, lp));
    }
    let done = stream.finish().await.unwrap();
    for (g, tokens) in done.iter().zip(&seen) {
        let ids: Vec<u32> = tokens.iter().map(|t| t.0).collect();
        let lps: Vec<f32> = tokens.iter().map(|t| t.1).collect();
        assert_eq!((&g.ids, &g.logprobs), (&ids, &lps));
    }
    assert_eq!((seen[0].len(), seen[1].len()), (9, 5));
    // The same seeds without streaming give the same generations (the second time the prompts'
    // keys and values come from the prompt cache, so logprobs agree to float rounding).
    let again = policy.generate(requests).await.unwrap();
    for (a, b) in again.iter().zip(&done) {
        assert_eq!(a.ids, b.ids);
        for (x, y) in a.logprobs.iter().zip(&b.logprobs) {
            assert!((x - y).abs() < 1e-5, "{x} vs {y}");
        }
    }
}

#[test]
fn masked_and_prefixed_logprobs_match_the_full_forward() {
    // A small vocabulary goes through libtorch's log-softmax; a large one through the
    // vocabulary head's column pass and surrogate gradient (`vocab_head.rs`).
    for vocab in [40, 20_000] {
        masked_and_prefixed_logprobs_match_the_full_forward_with(vocab);
    }
}

fn masked_and_prefixed_logprobs_match_the_full_forward_with(vocab: usize) {
    let (vs, m) = model_with_vocab(11, vocab);
    let prefix = Tensor::from_slice(&[1i64, 5, 9, 12, 3]).view([1, 5]);
    let rest = Tensor::from_slice(&[20i64, 33, 2, 7, 8, 0, 11, 21, 30]).view([3, 3]);
    let mask = Tensor::from_slice(&[1f32, 1., 1., 0., 0., 1.]).view([3, 2]);
    let full = Tensor::cat(&[prefix.expand([3, 5], false), rest.shallow_clone()], 1);
    let (lp_all, ent_all) = m.token_logprobs(&full, 0.9);
    let (lp_all, ent_all) = (
        lp_all.narrow(1, 5, 2) * &mask,
        ent_all.narrow(1, 5, 2) * &mask,
    );
    let (lp, ent) = m.prefixed_token_logprobs(&prefix, &rest, &mask, 0.9, false);
    let diff = |a: &Tensor, b: &Tensor| (a - b).abs().max().double_value(&[]);
    assert!(diff(&lp_all, &lp) < 1e-5 && diff(&ent_all, &ent) < 1e-5);
    assert!(!ent.requires_grad());
    let (lp_masked, ent_masked) = m.masked_token_logprobs(&full, &mask_full(&mask), 0.9, false);
    let (lp_masked, ent_masked) = (lp_masked.narrow(1, 5, 2), ent_masked.narrow(1, 5, 2));
    assert!(diff(&lp_all, &lp_masked) < 1e-5 && diff(&ent_all, &ent_masked) < 1e-5);
    // The gradients of a loss on the log-probs agree too.
    let weights = Tensor::from_slice(&[1.0f32, -0.5]).view([1, 2]);
    (lp_all * &weights).sum(Kind::Float).backward();
    let want: Vec<Tensor> = vs
        .trainable_variables()
        .iter()
        .map(|v| v.grad().copy())
        .collect();
    for v in vs.trainable_variables() {
        let _ = v.grad().zero_();
    }
    (lp * &weights).sum(Kind::Float).backward();
    for (a, v) in want.iter().zip(vs.trainable_variables()) {
        let scale = a.abs().max().double_value(&[]).max(1.0);
        assert!(diff(a, &v.grad()) < 1e-5 * scale);
    }
}

/// `mask` `[B, 2]` over the last two scored positions of the 8-id rows of
/// [`masked_and_prefixed_logprobs_match_the_full_forward`], widened to all 7 scored positions.
fn mask_full(mask: &Tensor) -> Tensor {
    let rows = mask.size()[0];
    Tensor::cat(
        &[
            Tensor::zeros([rows, 5], (Kind::Float, Device::Cpu)),
            mask.shallow_clone(),
        ],
        1,
    )
}
