//! The learner's updates move the model the right way (per-trajectory and per-token
//! advantages), the PPO critic learns returns, and checkpoints round-trip.

use agentrl_core::Trajectory;
use agentrl_policy::GptConfig;
use agentrl_trainer::critic::Critic;
use agentrl_trainer::learner::{Advantages, GrpoParams, Learner, ModelSpec, UpdateStats, pack};
use agentrl_trainer::loss::LossAgg;
use tch::{Device, Kind, Tensor};

mod common;
use common::one_turn_trajectory as traj;

fn cfg() -> GptConfig {
    GptConfig {
        vocab_size: 20,
        d_model: 32,
        n_layers: 1,
        n_heads: 2,
        max_seq_len: 32,
        ffn_mult: 2,
        rope_theta: 10_000.0,
    }
}

/// Log-probabilities the learner's current weights give to the policy tokens of `t`.
fn policy_logprobs(learner: &Learner, t: &Trajectory) -> Vec<f32> {
    // A copy is built (drawing its initial weights from libtorch's global generator) before
    // the weights are copied in: not while another test seeds the generator.
    let (vs, model) = {
        let _guard = SEED_LOCK.lock().unwrap_or_else(|e| e.into_inner());
        learner.clone_model().unwrap()
    };
    let _keep = vs;
    let packed = pack(&[t], Device::Cpu);
    let (lp, _) = tch::no_grad(|| model.token_logprobs(&packed.ids, 1.0));
    let lp: Vec<f32> = Vec::try_from(lp.view([-1]).to_kind(Kind::Float)).unwrap();
    let mask: Vec<f32> = Vec::try_from(packed.mask.view([-1])).unwrap();
    lp.iter()
        .zip(mask)
        .filter(|(_, m)| *m == 1.0)
        .map(|(l, _)| *l)
        .collect()
}

/// Held while libtorch's global generator is seeded or drawn from.
static SEED_LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// A learner with seeded weights. libtorch's seed is global and tests run in parallel, so
/// seeding and creation happen under one lock.
fn seeded_learner(seed: i64, lr: f64) -> Learner {
    let _guard = SEED_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    tch::manual_seed(seed);
    Learner::new(cfg(), lr, Device::Cpu).unwrap()
}

#[test]
fn pack_aligns_ids_mask_and_logprobs() {
    let a = traj(vec![1, 2], vec![3, 4], vec![-0.5, -0.25]);
    let b = traj(vec![5], vec![6], vec![-1.0]);
    let p = pack(&[&a, &b], Device::Cpu);
    assert_eq!(p.ids.size(), vec![2, 4]);
    let mask: Vec<f32> = Vec::try_from(p.mask.view([-1])).unwrap();
    assert_eq!(mask, vec![0., 1., 1., 1., 0., 0.]);
    let old: Vec<f32> = Vec::try_from(p.old_logprobs.view([-1])).unwrap();
    assert_eq!(old, vec![0., -0.5, -0.25, -1.0, 0., 0.]);
    assert_eq!(p.tokens, 3);
}

#[test]
fn sft_lowers_the_loss_on_its_data() {
    let mut learner = seeded_learner(0, 1e-2);
    let t = traj(vec![1, 2, 3], vec![7, 8, 9, 10], vec![0.0; 4]);
    let first = learner.sft_step(&[&t], 1.0).loss;
    let mut last = first;
    for _ in 0..30 {
        last = learner.sft_step(&[&t], 1.0).loss;
    }
    assert!(last < first * 0.5, "loss {first} -> {last}");
}

#[test]
fn sft_loss_aggregation_weighs_tokens_or_demonstrations() {
    // A 6-token and a 1-token demonstration: the token mean is dominated by the long one, the
    // sequence mean weighs both alike.
    let long = traj(vec![1, 2], vec![7, 8, 9, 10, 11, 12], vec![0.0; 6]);
    let short = traj(vec![3], vec![4], vec![0.0]);
    let reference = seeded_learner(7, 1e-2);
    let nll = |t: &Trajectory| -> Vec<f64> {
        policy_logprobs(&reference, t)
            .iter()
            .map(|l| -f64::from(*l))
            .collect()
    };
    let (a, b) = (nll(&long), nll(&short));
    let token_mean = (a.iter().sum::<f64>() + b.iter().sum::<f64>()) / 7.0;
    let seq_mean = (a.iter().sum::<f64>() / 6.0 + b[0]) / 2.0;
    assert!(
        (token_mean - seq_mean).abs() > 1e-3,
        "the two must differ to tell them apart"
    );

    let loss = |agg: LossAgg| {
        let mut learner = seeded_learner(7, 1e-2);
        learner.sft_step_aggregated(&[&long, &short], 1.0, agg).loss
    };
    let by_tokens = loss(LossAgg::TokenMean);
    let by_demos = loss(LossAgg::SeqMeanTokenMean);
    assert!(
        (by_tokens - token_mean).abs() < 1e-5,
        "{by_tokens} vs {token_mean}"
    );
    assert!(
        (by_demos - seq_mean).abs() < 1e-5,
        "{by_demos} vs {seq_mean}"
    );
    // `sft_step` is the token mean.
    let mut plain = seeded_learner(7, 1e-2);
    assert_eq!(plain.sft_step(&[&long, &short], 1.0).loss, by_tokens);
}

#[test]
fn data_parallel_sft_takes_the_steps_of_one_thread_and_the_same_on_every_run() {
    // Twelve demonstrations of 3 to 14 tokens: with two libtorch threads a step is dealt into
    // two parts, one on a replica's thread.
    let batch: Vec<Trajectory> = (0..12u32)
        .map(|i| {
            let generated: Vec<u32> = (0..=i).map(|k| 3 + (i + k) % 15).collect();
            let logprobs = vec![0.0; generated.len()];
            traj(vec![1, 2], generated, logprobs)
        })
        .collect();
    let batch: Vec<&Trajectory> = batch.iter().collect();
    let train_on = |batch: &[&Trajectory], mode: Option<bool>| {
        let mut learner = seeded_learner(41, 1e-2);
        learner.set_data_parallel(mode);
        agentrl_policy::with_torch_threads(2, || {
            let losses: Vec<f64> = (0..3).map(|_| learner.sft_step(batch, 1.0).loss).collect();
            (all_weights(&learner), losses, learner.replicas())
        })
    };
    let train = |mode: Option<bool>| train_on(&batch, mode);
    let (alone, alone_losses, none) = train(Some(false));
    let (split, split_losses, one) = train(Some(true));
    let (again, again_losses, _) = train(Some(true));
    let (auto, _, auto_replicas) = train(None);
    assert_eq!((none, one, auto_replicas), (0, 1, 1));
    for (a, b) in alone_losses.iter().zip(&split_losses) {
        assert!((a - b).abs() < 1e-5 * a.abs().max(1.0), "loss {a} vs {b}");
    }
    // AdamW's steps are about lr = 1e-2 whatever the gradient's size, so a weight whose
    // gradient is near zero may move by a rounding's worth differently: within 1% of a step.
    let apart = furthest(&alone, &split);
    assert!(apart < 1e-4, "the weights differ by {apart}");
    // A step that lost a part would be far off: half the batch moves the weights by more.
    let (half, _, _) = train_on(&batch[..6], Some(false));
    let lost = furthest(&alone, &half);
    assert!(
        lost > 1e-3,
        "half the batch moved the weights only {lost} away"
    );
    assert_eq!(split_losses, again_losses);
    assert!(
        bit_identical(&split, &again),
        "two data-parallel runs differ"
    );
    assert!(bit_identical(&auto, &split));
}

#[test]
fn replicas_are_built_without_drawing_from_the_generator() {
    // A data-parallel update builds its replicas in the middle of a run: they must not move
    // libtorch's global generator, or what is drawn after would depend on the thread count.
    let _guard = SEED_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let spec = ModelSpec::Tiny(cfg());
    let draw = || Tensor::randn([8], (Kind::Float, Device::Cpu));
    tch::manual_seed(5);
    let undisturbed = draw();
    tch::manual_seed(5);
    let vs = tch::nn::VarStore::new(Device::Cpu);
    let _model = spec.build_to_fill(&vs).unwrap();
    assert!(
        draw().equal(&undisturbed),
        "building to fill drew from the generator"
    );
    tch::manual_seed(5);
    let _random = spec.build(&tch::nn::VarStore::new(Device::Cpu)).unwrap();
    assert!(!draw().equal(&undisturbed), "a random build draws");
}

#[test]
fn a_data_parallel_policy_step_takes_the_step_of_one_thread() {
    // Twelve episodes in micro-batches of four: three passes, two of them on the learner's
    // thread and one on a replica's when it has two libtorch threads.
    let batch: Vec<Trajectory> = (0..12u32)
        .map(|i| {
            let generated: Vec<u32> = (0..=i % 5).map(|k| 3 + (i + 2 * k) % 15).collect();
            let logprobs = vec![-1.5; generated.len()];
            traj(vec![1, 2 + i % 3], generated, logprobs)
        })
        .collect();
    let batch: Vec<&Trajectory> = batch.iter().collect();
    let advantages: Vec<f64> = (0..12).map(|i| f64::from(i % 4) - 1.5).collect();
    let params = GrpoParams {
        entropy_coef: 0.01,
        ..GrpoParams::default()
    };
    let train = |mode: Option<bool>, kl: bool| {
        let mut learner = seeded_learner(43, 1e-2);
        learner.set_micro_batch(4);
        learner.set_data_parallel(mode);
        let params = if kl {
            let _guard = SEED_LOCK.lock().unwrap_or_else(|e| e.into_inner());
            learner.freeze_reference().unwrap();
            GrpoParams {
                kl_coef: 0.1,
                ..params
            }
        } else {
            params
        };
        agentrl_policy::with_torch_threads(2, || {
            let stats: Vec<UpdateStats> = (0..3)
                .map(|_| learner.grpo_step(&batch, &advantages, params))
                .collect();
            (all_weights(&learner), stats, learner.replicas())
        })
    };
    let (alone, alone_stats, none) = train(Some(false), false);
    let (split, split_stats, one) = train(None, false);
    assert_eq!((none, one), (0, 1));
    for (a, b) in alone_stats.iter().zip(&split_stats) {
        let close = |x: f64, y: f64| (x - y).abs() < 1e-5 * x.abs().max(1.0);
        assert!(
            close(a.loss, b.loss)
                && close(a.entropy, b.entropy)
                && close(a.clip_fraction, b.clip_fraction)
                && close(a.grad_norm, b.grad_norm)
                && a.tokens == b.tokens,
            "{a:?} vs {b:?}"
        );
    }
    let apart = furthest(&alone, &split);
    assert!(apart < 1e-4, "the weights differ by {apart}");
    // With the KL to a reference as a loss term the passes stay on the learner's thread.
    let (_, kl_stats, with_reference) = train(None, true);
    assert_eq!(with_reference, 0);
    assert!(
        kl_stats
            .iter()
            .all(|s| s.kl.is_finite() && !s.skipped_non_finite)
    );
}

#[test]
fn grpo_raises_rewarded_and_lowers_penalised_sequences() {
    let mut learner = seeded_learner(1, 5e-3);
    {
        // The reference is a copy built like `policy_logprobs`'s.
        let _guard = SEED_LOCK.lock().unwrap_or_else(|e| e.into_inner());
        learner.freeze_reference().unwrap();
    }
    let good = traj(vec![1, 2], vec![5, 6, 7], vec![0.0; 3]);
    let bad = traj(vec![1, 2], vec![9, 9, 9], vec![0.0; 3]);
    // Rollout logprobs as the current policy would have produced them.
    let fill = |t: &Trajectory| {
        let mut t = t.clone();
        t.turns[0].logprobs = policy_logprobs(&learner, &t);
        t
    };
    let (good, bad) = (fill(&good), fill(&bad));
    let (g0, b0) = (
        good.turns[0].logprobs.clone(),
        bad.turns[0].logprobs.clone(),
    );
    let params = GrpoParams {
        clip_eps: 0.2,
        kl_coef: 0.01,
        temperature: 1.0,
        grad_clip: 1.0,
        ..GrpoParams::default()
    };
    let mut stats = Default::default();
    for _ in 0..5 {
        stats = learner.grpo_step(&[&good, &bad], &[1.0, -1.0], params);
    }
    let (g1, b1) = (
        policy_logprobs(&learner, &good),
        policy_logprobs(&learner, &bad),
    );
    // Both answers start from the same prompt: there the rewarded first token gains on the
    // penalised one, and the rewarded answer as a whole becomes likelier.
    let (margin0, margin1) = (g0[0] - b0[0], g1[0] - b1[0]);
    assert!(
        margin1 > margin0 + 0.05,
        "first-token margin {margin0} -> {margin1}"
    );
    let sum = |v: &[f32]| v.iter().sum::<f32>();
    assert!(sum(&g1) > sum(&g0), "good {} -> {}", sum(&g0), sum(&g1));
    assert!(
        stats.kl > 0.0,
        "the reference has drifted away: kl {}",
        stats.kl
    );
    assert!(stats.clip_fraction >= 0.0 && stats.clip_fraction <= 1.0);
}

#[test]
fn checkpoints_round_trip_and_bad_files_are_errors() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("w.safetensors");
    let a = seeded_learner(2, 1e-3);
    a.save(&path).unwrap();
    let mut b = seeded_learner(3, 1e-3);
    b.load(&path).unwrap();
    for ((na, ta), (nb, tb)) in a.weights().iter().zip(b.weights().iter()) {
        assert_eq!(na, nb);
        assert!(ta.equal(tb), "{na} differs after loading");
    }
    assert!(
        !dir.path().read_dir().unwrap().any(|e| e
            .unwrap()
            .file_name()
            .to_string_lossy()
            .contains("tmp"))
    );
    std::fs::write(&path, b"not a checkpoint").unwrap();
    let err = b.load(&path).unwrap_err().to_string();
    assert!(err.contains("w.safetensors"), "{err}");
    let _ = Tensor::zeros([1], (Kind::Float, Device::Cpu));
}

#[test]
fn per_token_advantages_equal_to_the_trajectory_one_give_the_same_step() {
    let a = traj(vec![1, 2], vec![3, 4, 5], vec![-2.0, -2.5, -3.0]);
    let b = traj(vec![6], vec![7], vec![-1.5]);
    let params = GrpoParams {
        clip_eps: 0.2,
        kl_coef: 0.0,
        temperature: 1.0,
        grad_clip: 100.0,
        ..GrpoParams::default()
    };
    let mut per_traj = seeded_learner(21, 1e-2);
    let mut per_token = seeded_learner(21, 1e-2);
    let s1 = per_traj.grpo_step(&[&a, &b], &[1.0, -0.5], params);
    // Every next-token position of a carries 1.0, of b -0.5 (env positions are masked anyway).
    let token_adv = vec![vec![1.0f32; 4], vec![-0.5f32; 1]];
    let s2 = per_token.policy_step(&[&a, &b], Advantages::PerToken(&token_adv), params);
    assert!(
        (s1.loss - s2.loss).abs() < 1e-6,
        "{} vs {}",
        s1.loss,
        s2.loss
    );
    assert!((s1.grad_norm - s2.grad_norm).abs() < 1e-6);
    assert_eq!(
        policy_logprobs(&per_traj, &a),
        policy_logprobs(&per_token, &a)
    );
    // Per-token advantages move single tokens: a positive one on the last token only raises it.
    let mut learner = seeded_learner(22, 1e-2);
    let before = policy_logprobs(&learner, &a);
    let only_last = vec![vec![0.0, 0.0, 0.0, 1.0]];
    learner.policy_step(&[&a], Advantages::PerToken(&only_last), params);
    let after = policy_logprobs(&learner, &a);
    assert!(after[2] > before[2], "{before:?} -> {after:?}");
}

#[test]
fn the_critic_starts_at_zero_and_learns_the_returns() {
    let a = traj(vec![1, 2], vec![3, 4, 5], vec![-2.0, -2.5, -3.0]);
    let b = traj(vec![6, 7, 8], vec![9], vec![-1.5]);
    let learner = seeded_learner(23, 1e-2);
    // A critic's head draws from libtorch's global generator: not while another test seeds it.
    let mut critic = {
        let _guard = SEED_LOCK.lock().unwrap_or_else(|e| e.into_inner());
        Critic::from_learner(&learner, 1e-2, 1).unwrap()
    };
    let values = critic.values(&[&a, &b]).unwrap();
    assert_eq!(values.len(), 2);
    assert_eq!(
        (values[0].len(), values[1].len()),
        (4, 3),
        "one per next-token position"
    );
    assert!(
        values.iter().flatten().all(|&v| v == 0.0),
        "a zero head starts at 0"
    );
    // Returns of 1 on a's policy positions and -1 on b's: the loss falls as values follow.
    let returns = vec![vec![0.0, 1.0, 1.0, 1.0], vec![0.0, 0.0, -1.0]];
    let mut first = None;
    let mut last = 0.0;
    for _ in 0..60 {
        let old = critic.values(&[&a, &b]).unwrap();
        let stats = critic.step(&[&a, &b], &returns, &old, 0.2, 1.0);
        assert!(stats.value_loss.is_finite());
        first.get_or_insert(stats.value_loss);
        last = stats.value_loss;
    }
    let first = first.unwrap();
    assert!(last < first * 0.1, "value loss {first} -> {last}");
    let values = critic.values(&[&a, &b]).unwrap();
    assert!(values[0][1..].iter().all(|&v| v > 0.5), "{values:?}");
    assert!(values[1][2] < -0.5, "{values:?}");
}

/// Every trainable weight of `learner`, flattened, to compare bit for bit.
fn all_weights(learner: &Learner) -> Vec<f32> {
    let mut named = learner
        .var_store()
        .variables()
        .into_iter()
        .collect::<Vec<_>>();
    named.sort_by(|a, b| a.0.cmp(&b.0));
    named
        .iter()
        .flat_map(|(_, t)| Vec::<f32>::try_from(t.to_kind(Kind::Float).view([-1])).unwrap())
        .collect()
}

/// Whether two weight lists are the same bit for bit.
fn bit_identical(a: &[f32], b: &[f32]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits())
}

/// The largest difference between two weight lists.
fn furthest(a: &[f32], b: &[f32]) -> f32 {
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0f32, f32::max)
}

#[test]
fn a_nan_in_the_policy_loss_skips_the_step_and_leaves_the_weights() {
    let a = traj(vec![1, 2], vec![3, 4], vec![-1.0, -1.0]);
    let b = traj(vec![1, 2], vec![5, 6], vec![-1.0, -1.0]);
    let mut learner = seeded_learner(31, 1e-2);
    let before = all_weights(&learner);
    for bad in [f64::NAN, f64::INFINITY] {
        let stats = learner.grpo_step(&[&a, &b], &[bad, -1.0], GrpoParams::default());
        assert!(stats.skipped_non_finite, "advantage {bad}: {stats:?}");
        let after = all_weights(&learner);
        assert!(
            bit_identical(&before, &after),
            "advantage {bad} reached the weights"
        );
    }
    // The next finite step trains as usual: the skipped one left no NaN in the optimiser.
    let stats = learner.grpo_step(&[&a, &b], &[1.0, -1.0], GrpoParams::default());
    assert!(
        !stats.skipped_non_finite && stats.grad_norm.is_finite(),
        "{stats:?}"
    );
    let trained = all_weights(&learner);
    assert!(trained.iter().all(|w| w.is_finite()));
    assert_ne!(before, trained, "a finite step changes the weights");
}

#[test]
fn a_batch_with_nothing_left_to_train_is_a_step_without_gradient_not_a_panic() {
    // Every turn stale (left out of the loss by the staleness bound): the micro-batch has no
    // trained token, so there is no loss graph to backpropagate.
    let mut stale = traj(vec![1, 2], vec![3, 4], vec![-1.0, -1.0]);
    for turn in &mut stale.turns {
        turn.stale = true;
    }
    let mut learner = seeded_learner(32, 1e-2);
    let stats = learner.grpo_step(&[&stale], &[1.0], GrpoParams::default());
    assert_eq!(stats.tokens, 0, "{stats:?}");
    assert_eq!(stats.loss, 0.0, "{stats:?}");
    // Beside a trajectory that does train, the stale one adds nothing and the step trains.
    let fresh = traj(vec![1, 2], vec![5, 6], vec![-1.0, -1.0]);
    let stats = learner.grpo_step(&[&stale, &fresh], &[1.0, 1.0], GrpoParams::default());
    assert_eq!(stats.tokens, 2, "{stats:?}");
    assert!(stats.grad_norm > 0.0, "{stats:?}");
}

#[test]
fn a_nan_return_skips_the_critic_step() {
    let a = traj(vec![1, 2], vec![3, 4], vec![-1.0, -1.0]);
    let learner = seeded_learner(37, 1e-2);
    // A critic's head draws from libtorch's global generator: not while another test seeds it.
    let mut critic = {
        let _guard = SEED_LOCK.lock().unwrap_or_else(|e| e.into_inner());
        Critic::from_learner(&learner, 1e-2, 1).unwrap()
    };
    let old = critic.values(&[&a]).unwrap();
    let stats = critic.step(&[&a], &[vec![0.0, f32::NAN, 1.0]], &old, 0.2, 1.0);
    assert!(stats.skipped_non_finite, "{stats:?}");
    assert_eq!(critic.values(&[&a]).unwrap(), old, "the values moved");
    let stats = critic.step(&[&a], &[vec![0.0, 1.0, 1.0]], &old, 0.2, 1.0);
    assert!(!stats.skipped_non_finite, "{stats:?}");
    assert_ne!(critic.values(&[&a]).unwrap(), old, "a finite step trains");
}

#[test]
fn a_rollout_model_sharing_the_weights_follows_the_learner_and_a_copy_does_not() {
    let mut learner = seeded_learner(7, 1e-2);
    // Building either model draws initial weights from libtorch's global generator.
    let ((shared_vs, shared), (copied_vs, copied)) = {
        let _guard = SEED_LOCK.lock().unwrap_or_else(|e| e.into_inner());
        (
            learner.shared_model(true).unwrap(),
            learner.shared_model(false).unwrap(),
        )
    };
    let learned = learner.var_store().variables();
    for (name, t) in shared_vs.variables() {
        assert_eq!(
            t.data_ptr(),
            learned[&name].data_ptr(),
            "{name} is not shared"
        );
    }
    for (name, t) in copied_vs.variables() {
        assert_ne!(
            t.data_ptr(),
            learned[&name].data_ptr(),
            "{name} is not a copy"
        );
        assert!(
            t.equal(&learned[&name]),
            "{name} differs from the learner's"
        );
    }
    let t = traj(vec![1, 2, 3], vec![7, 8, 9, 10], vec![0.0; 4]);
    let ids = pack(&[&t], Device::Cpu).ids;
    let logprobs = |model: &dyn agentrl_policy::PolicyModel| {
        tch::no_grad(|| model.token_logprobs(&ids, 1.0).0)
    };
    let before = logprobs(copied.as_ref());
    assert!(logprobs(shared.as_ref()).equal(&before));
    for _ in 0..3 {
        learner.sft_step(&[&t], 1.0);
    }
    let after = policy_logprobs(&learner, &t);
    let shared_after: Vec<f32> = {
        let lp = logprobs(shared.as_ref()).view([-1]);
        let mask: Vec<f32> = Vec::try_from(pack(&[&t], Device::Cpu).mask.view([-1])).unwrap();
        Vec::<f32>::try_from(lp)
            .unwrap()
            .into_iter()
            .zip(mask)
            .filter(|(_, m)| *m == 1.0)
            .map(|(l, _)| l)
            .collect()
    };
    assert_eq!(shared_after, after, "the sharing model missed the steps");
    assert!(logprobs(copied.as_ref()).equal(&before), "the copy moved");
    assert!(
        !logprobs(shared.as_ref()).equal(&before),
        "the steps changed nothing"
    );
}
