//! The tch transformer: cached batched generation matches the full forward, padding does not
//! leak between rows, and the policy thread batches concurrent callers.

use agentrl_core::{FinishReason, GenerationRequest, Policy, SamplingParams, SeededRng};
use agentrl_policy::PolicyModel;
use agentrl_policy::{GptConfig, TchPolicy, TinyGpt, snapshot_weights};
use tch::{Device, Kind, Tensor, nn};

fn model(seed: i64) -> (nn::VarStore, TinyGpt) {
    tch::manual_seed(seed);
    let vs = nn::VarStore::new(Device::Cpu);
    let cfg = GptConfig {
        vocab_size: 40,
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
        )
        .unwrap();
    let batched = m
        .generate(
            &[long, short],
            &[p.clone(), p],
            &mut [SeededRng::new(0), SeededRng::new(0)],
            0,
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
        )
        .unwrap();
    let stop = first[0].ids[0];
    let p = SamplingParams {
        stop_ids: vec![stop],
        ..greedy.clone()
    };
    let g = m
        .generate(&[vec![1, 2]], &[p], &mut [SeededRng::new(0)], 0)
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
        )
        .unwrap();
    assert!(g[0].ids.is_empty());
    assert_eq!(g[0].finish, FinishReason::Length);
    // Generation never runs past the context.
    let long = SamplingParams::greedy(100);
    let g = m
        .generate(&[vec![1u32; 30]], &[long], &mut [SeededRng::new(0)], 0)
        .unwrap();
    assert_eq!(g[0].ids.len(), 2);
    let err = m
        .generate(&[vec![1, 400]], &[greedy], &mut [SeededRng::new(0)], 0)
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
