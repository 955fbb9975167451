//! End to end on a tiny model: SFT, the async pipeline, staleness bound, checkpoints, resume.

mod common;

use agentrl_policy::checkpoint::read_latest;
use agentrl_trainer::config::{AdvantageConfig, GaeConfig};
use agentrl_trainer::metrics::{MetricsWriter, read_metrics};
use agentrl_trainer::pipeline::{RlRun, train_rl};
use agentrl_trainer::run::Run;
use agentrl_trainer::weight_sync::{Engines, WeightSync};

async fn rl_run(max_staleness: u64) -> (tempfile::TempDir, Vec<serde_json::Value>) {
    let dir = tempfile::tempdir().unwrap();
    let run = Run::new(common::tiny_config(max_staleness), dir.path()).unwrap();
    let demos = run.write_demonstrations().await.unwrap();
    let learner = run.sft(&demos).unwrap();
    assert!(dir.path().join("checkpoints/sft.safetensors").exists());
    let (learner, summary) = run.rl(learner, 0).await.unwrap();
    assert_eq!(summary.steps, 3);
    if max_staleness == 0 {
        // Synchronous: groups start only under the weights they train. (Asynchronous runs may
        // drop a group that a newer one overtook; the bound on what is trained is checked on
        // the records.)
        assert_eq!(
            summary.dropped_stale, 0,
            "the producer's gate keeps samples fresh"
        );
    }
    let report = run.evaluate(&learner, "after_rl", 3).await.unwrap();
    assert_eq!(report.tasks, 6);
    // The evaluation is scored by the run's reward (outcome: 1 solved, 0 not), in the report
    // and in the saved episodes.
    assert!(report.reward_scored);
    let (evaluated, bad) =
        agentrl_core::read_jsonl(&dir.path().join("samples/eval_after_rl.jsonl")).unwrap();
    assert!(bad.is_empty());
    assert_eq!(evaluated.len(), 6);
    for episode in &evaluated {
        assert_eq!(episode.reward, f64::from(u8::from(episode.success)));
        assert!(episode.reward_parts.contains_key("outcome"), "{episode:?}");
    }
    let solved = evaluated.iter().filter(|e| e.success).count() as f64;
    let rewards: f64 = report
        .per_task
        .values()
        .map(|s| s.reward_mean * s.episodes as f64)
        .sum();
    assert!((rewards - solved).abs() < 1e-9, "{rewards} vs {solved}");
    let (sampled, bad) =
        agentrl_core::read_jsonl(&dir.path().join("samples/rl_step_000003.jsonl")).unwrap();
    assert!(bad.is_empty());
    assert_eq!(
        sampled.len(),
        2 * 3,
        "tasks_per_step x group_size trajectories"
    );
    run.plot().unwrap();
    assert!(dir.path().join("learning_curve.png").exists());
    let records = read_metrics(&dir.path().join("metrics.jsonl")).unwrap();
    (dir, records)
}

fn rl_steps(records: &[serde_json::Value]) -> Vec<&serde_json::Value> {
    records.iter().filter(|r| r["kind"] == "rl_step").collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn async_pipeline_respects_the_staleness_bound() {
    let (_dir, records) = rl_run(1).await;
    let steps = rl_steps(&records);
    assert_eq!(steps.len(), 3);
    for (i, r) in steps.iter().enumerate() {
        assert_eq!(r["step"], i + 1);
        assert_eq!(r["policy_version"], i + 1);
        assert!(r["staleness_max"].as_f64().unwrap() <= 1.0, "{r}");
        for key in [
            "reward_mean",
            "success_rate",
            "loss",
            "kl",
            "clip_fraction",
            "entropy",
            "tokens_per_second",
            "trainer_idle_seconds",
        ] {
            assert!(r[key].is_number(), "missing {key} in {r}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn synchronous_mode_trains_only_on_fresh_samples() {
    let (_dir, records) = rl_run(0).await;
    for r in rl_steps(&records) {
        assert_eq!(r["staleness_max"].as_f64(), Some(0.0), "{r}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn training_resumes_from_the_latest_checkpoint() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = common::tiny_config(1);
    cfg.rl.steps = 2;
    let run = Run::new(cfg.clone(), dir.path()).unwrap();
    let learner = run.learner(cfg.rl.lr, None).unwrap();
    run.rl(learner, 0).await.unwrap();
    let (latest, file) = read_latest(dir.path()).unwrap().unwrap();
    assert_eq!((latest.step, latest.version), (2, 2));
    // A second invocation with more steps continues from step 2.
    cfg.rl.steps = 4;
    let run = Run::new(cfg.clone(), dir.path()).unwrap();
    let (step, path) = run.latest_checkpoint().unwrap().unwrap();
    assert_eq!((step, path.clone()), (2, file));
    let learner = run.learner(cfg.rl.lr, Some(&path)).unwrap();
    let (_, summary) = run.rl(learner, step).await.unwrap();
    assert_eq!(summary.steps, 2);
    let (latest, _) = read_latest(dir.path()).unwrap().unwrap();
    assert_eq!(latest.step, 4);
    let steps: Vec<u64> = read_metrics(&dir.path().join("metrics.jsonl"))
        .unwrap()
        .iter()
        .filter(|r| r["kind"] == "rl_step")
        .map(|r| r["step"].as_u64().unwrap())
        .collect();
    assert_eq!(steps, vec![1, 2, 3, 4]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_corrupt_or_half_written_checkpoint_is_skipped_and_later_records_are_cut() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = common::tiny_config(0);
    cfg.rl.steps = 3;
    cfg.rl.checkpoint_every = 1;
    // Rewards that differ within groups, so every step updates the weights.
    cfg.reward = toml::from_str(
        "type = \"weighted_sum\"\n[[terms]]\nweight = 1.0\nreward = { type = \"outcome\" }\n\
         [[terms]]\nweight = 1.0\nreward = { type = \"length_penalty\", \
         max_generated_tokens = 0, per_token = 0.01 }\n",
    )
    .unwrap();
    let run = Run::new(cfg.clone(), dir.path()).unwrap();
    // From SFT weights: episodes of a random model all run to the token limit with the same
    // reward, and groups without signal train nothing.
    let demos = run.write_demonstrations().await.unwrap();
    let learner = run.sft(&demos).unwrap();
    run.rl(learner, 0).await.unwrap();
    let checkpoints = dir.path().join("checkpoints");
    // Step 3's optimiser state is damaged (one byte flipped), and a step-4 checkpoint was
    // being written when the run died.
    let damaged = checkpoints.join("step-000003/optimizer.safetensors");
    let mut bytes = std::fs::read(&damaged).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0xFF;
    std::fs::write(&damaged, bytes).unwrap();
    let partial = checkpoints.join(".step-000004.partial");
    std::fs::create_dir_all(&partial).unwrap();
    std::fs::write(partial.join("model.safetensors"), b"half").unwrap();
    // A step-4 record and samples the dead run wrote after its last good checkpoint.
    let metrics = dir.path().join("metrics.jsonl");
    let mut text = std::fs::read_to_string(&metrics).unwrap();
    text.push_str("{\"kind\":\"rl_step\",\"step\":4}\n");
    std::fs::write(&metrics, text).unwrap();
    std::fs::write(dir.path().join("samples/rl_step_000004.jsonl"), "").unwrap();

    cfg.rl.steps = 4;
    let run = Run::new(cfg.clone(), dir.path()).unwrap();
    let point = run.resume_point().unwrap().unwrap();
    assert_eq!(point.state.step, 2, "step 3 does not match its checksums");
    assert!(!partial.exists(), "the half-written folder is removed");
    assert!(point.file("optimizer.safetensors").is_some());
    let learner = run.resumed_learner(&point).unwrap();
    assert!(
        learner.optimizer_steps() > 0,
        "the optimiser state is restored"
    );
    let (_, summary) = run.rl_resumed(learner, point).await.unwrap();
    assert_eq!(summary.steps, 2);
    let steps: Vec<u64> = read_metrics(&metrics)
        .unwrap()
        .iter()
        .filter(|r| r["kind"] == "rl_step")
        .map(|r| r["step"].as_u64().unwrap())
        .collect();
    assert_eq!(steps, vec![1, 2, 3, 4], "every step once");
    assert!(
        std::fs::read_to_string(dir.path().join("samples/rl_step_000004.jsonl"))
            .unwrap()
            .contains("\"turns\""),
        "step 4's samples are the resumed run's"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn training_with_an_llm_judge_grades_every_rollout() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = common::tiny_config(1);
    cfg.rl.steps = 2;
    // The judge is a model of the run's shape; here the (untrained) initial weights.
    let run = Run::new(cfg.clone(), dir.path()).unwrap();
    let judge_weights = dir.path().join("judge.safetensors");
    run.learner(cfg.rl.lr, None)
        .unwrap()
        .save(&judge_weights)
        .unwrap();
    let reward = r#"
type = "weighted_sum"
[[terms]]
weight = 1.0
reward = { type = "outcome" }
[[terms]]
weight = 0.5
reward = { type = "llm_judge", rubric = "Rate the answer from 0 to 10.", scale_min = 0, scale_max = 10, fallback = 0.0, timeout_ms = 30000 }
"#;
    cfg.reward = toml::from_str(reward).unwrap();
    // Without weights for the judge the run refuses to start, saying what to set.
    let err = match Run::new(cfg.clone(), dir.path())
        .unwrap()
        .rl(run.learner(cfg.rl.lr, None).unwrap(), 0)
        .await
    {
        Err(e) => e.to_string(),
        Ok(_) => panic!("a judge without weights must be refused"),
    };
    assert!(err.contains("judge_checkpoint"), "{err}");
    cfg.judge_checkpoint = Some(judge_weights);
    let run = Run::new(cfg.clone(), dir.path()).unwrap();
    let (_, summary) = run
        .rl(run.learner(cfg.rl.lr, None).unwrap(), 0)
        .await
        .unwrap();
    assert_eq!(summary.steps, 2);
    let records = read_metrics(&dir.path().join("metrics.jsonl")).unwrap();
    for r in rl_steps(&records) {
        assert!(r["reward/judge"].is_number(), "{r}");
        assert!(r["reward/judge_fallback"].is_number(), "{r}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn episodes_cut_before_the_first_token_do_not_stall_the_pipeline() {
    // Every prompt is longer than the context: episodes end before the policy acts, so no
    // group has a policy version. They must count as fresh, not as stale forever.
    let mut cfg = common::tiny_config(1);
    cfg.model.max_seq_len = 16;
    cfg.rl.steps = 4;
    let dir = tempfile::tempdir().unwrap();
    let run = Run::new(cfg, dir.path()).unwrap();
    let learner = run.learner(run.config.rl.lr, None).unwrap();
    let rl = tokio::time::timeout(std::time::Duration::from_secs(300), run.rl(learner, 0));
    let (_learner, summary) = rl.await.expect("the pipeline stalled").unwrap();
    assert_eq!((summary.steps, summary.dropped_stale), (4, 0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ppo_with_a_critic_trains_one_rollout_per_task_and_resumes_its_critic() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = common::tiny_config(1);
    config.rl.advantage = AdvantageConfig::Gae(GaeConfig {
        lambda: 0.9,
        critic_lr: Some(1e-2),
        ..GaeConfig::default()
    });
    // No group is needed: the critic is the baseline.
    config.rl.group_size = 1;
    config.rl.tasks_per_step = 4;
    // A failure costs 1, so returns are never all zero, even if nothing succeeds yet.
    config.reward = agentrl_reward::RewardConfig::Outcome(agentrl_reward::OutcomeReward {
        success: 1.0,
        failure: -1.0,
    });
    let run = Run::new(config.clone(), dir.path()).unwrap();
    let demos = run.write_demonstrations().await.unwrap();
    let learner = run.sft(&demos).unwrap();
    let (_learner, summary) = run.rl(learner, 0).await.unwrap();
    assert_eq!(summary.steps, 3);
    let records = read_metrics(&dir.path().join("metrics.jsonl")).unwrap();
    let steps = rl_steps(&records);
    assert_eq!(steps.len(), 3);
    for r in &steps {
        for key in [
            "loss",
            "value_loss",
            "value_mean",
            "critic_grad_norm",
            "grad_norm",
        ] {
            assert!(r[key].as_f64().is_some_and(f64::is_finite), "{key}: {r}");
        }
        assert_eq!(
            r["trained_trajectories"], 4,
            "every rollout with policy tokens trains"
        );
    }
    // The critic starts at 0 and moves: later steps predict non-zero values.
    assert_eq!(steps[0]["value_mean"].as_f64(), Some(0.0));
    assert_ne!(steps[2]["value_mean"].as_f64(), Some(0.0));
    // It is saved with the checkpoints, and a resumed run continues with it (a fresh critic
    // would predict exactly 0 on its first step).
    for step in [2, 3] {
        for name in ["critic.safetensors", "critic-optimizer.safetensors"] {
            let file = dir
                .path()
                .join(format!("checkpoints/step-{step:06}/{name}"));
            assert!(file.is_file(), "{}", file.display());
        }
    }
    config.rl.steps = 4;
    let run = Run::new(config.clone(), dir.path()).unwrap();
    let point = run.resume_point().unwrap().unwrap();
    assert_eq!(point.state.step, 3);
    let learner = run.resumed_learner(&point).unwrap();
    run.rl_resumed(learner, point).await.unwrap();
    let records = read_metrics(&dir.path().join("metrics.jsonl")).unwrap();
    let resumed = rl_steps(&records)
        .into_iter()
        .find(|r| r["step"] == 4)
        .cloned()
        .unwrap();
    assert_ne!(resumed["value_mean"].as_f64(), Some(0.0), "{resumed}");
    // A group estimator still needs groups; GAE's settings are checked.
    let mut bad = common::tiny_config(1);
    bad.rl.group_size = 1;
    assert!(bad.validate().unwrap_err().contains("rl.group_size"));
    bad.rl.advantage = AdvantageConfig::Gae(GaeConfig {
        lambda: 1.5,
        ..GaeConfig::default()
    });
    assert!(bad.validate().unwrap_err().contains("rl.gae_lambda"));
}

/// A synchronous run's in-process policy reads the learner's own tensors, so publishing
/// copies nothing: it must train exactly as a run whose policy gets copies.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_synchronous_run_sharing_its_weights_trains_as_one_that_copies_them() {
    let mut cfg = common::tiny_config(0);
    cfg.pipeline.deterministic = true;
    // Rewards that differ within groups, so the steps update the weights.
    cfg.reward = toml::from_str(
        "type = \"weighted_sum\"\n[[terms]]\nweight = 1.0\nreward = { type = \"outcome\" }\n\
         [[terms]]\nweight = 1.0\nreward = { type = \"length_penalty\", \
         max_generated_tokens = 0, per_token = 0.01 }\n",
    )
    .unwrap();
    let init_dir = tempfile::tempdir().unwrap();
    let init = init_dir.path().join("init.safetensors");

    // The run's own path: shared tensors.
    let shared_dir = tempfile::tempdir().unwrap();
    let run = Run::new(cfg.clone(), shared_dir.path()).unwrap();
    // From SFT weights, whose episodes differ in reward, so the steps do train.
    let demos = run.write_demonstrations().await.unwrap();
    let learner = run.sft(&demos).unwrap();
    learner.save(&init).unwrap();
    let start = learner.weights();
    let (shared, summary) = run.rl(learner, 0).await.unwrap();
    assert_eq!(summary.steps, 3);
    assert!(
        start
            .iter()
            .zip(shared.weights().iter())
            .any(|((_, a), (_, b))| !a.equal(b)),
        "no step trained: the comparison below would prove nothing"
    );

    // The same run with copies published after every step.
    let copied_dir = tempfile::tempdir().unwrap();
    let run = Run::new(cfg.clone(), copied_dir.path()).unwrap();
    let learner = run.learner(cfg.rl.lr, Some(&init)).unwrap();
    let (policy, ctx) = run.rollout_policy(&learner, false).unwrap();
    let (reward, _) = agentrl_trainer::rescore::build_reward(&cfg, None).unwrap();
    let rl = RlRun {
        config: cfg.clone(),
        ctx,
        weights: WeightSync::Local(Engines::new(policy, Vec::new())),
        reward,
        run_dir: copied_dir.path().to_path_buf(),
        start_step: 0,
        resume: None,
    };
    let metrics = MetricsWriter::open(&copied_dir.path().join("metrics.jsonl")).unwrap();
    let (copied, _, summary) = train_rl(rl, learner, metrics).await.unwrap();
    assert_eq!(summary.steps, 3);

    let key = |dir: &std::path::Path| -> Vec<(f64, f64)> {
        read_metrics(&dir.join("metrics.jsonl"))
            .unwrap()
            .iter()
            .filter(|r| r["kind"] == "rl_step")
            .map(|r| {
                (
                    r["reward_mean"].as_f64().unwrap(),
                    r["loss"].as_f64().unwrap(),
                )
            })
            .collect()
    };
    assert_eq!(key(shared_dir.path()), key(copied_dir.path()));
    let (a, b) = (shared.weights(), copied.weights());
    assert_eq!(a.len(), b.len());
    for ((name, x), (_, y)) in a.iter().zip(b.iter()) {
        assert!(x.equal(y), "{name} differs");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_evaluation_whose_reward_fails_is_kept_unscored() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = common::tiny_config(0);
    // A command reward whose program does not exist: scoring any episode fails.
    config.reward = agentrl_reward::RewardConfig::Execution(agentrl_reward::ExecutionConfig {
        command: vec!["agentrl-test-no-such-program".into()],
        timeout_ms: 2_000,
        sandbox: false,
        files: Vec::new(),
    });
    let run = Run::new(config, dir.path()).unwrap();
    let demos = run.write_demonstrations().await.unwrap();
    let learner = run.sft(&demos).unwrap();
    let report = run.evaluate(&learner, "after_sft", 0).await.unwrap();
    assert_eq!(report.tasks, 6);
    assert!(!report.reward_scored);
    let (evaluated, bad) =
        agentrl_core::read_jsonl(&dir.path().join("samples/eval_after_sft.jsonl")).unwrap();
    assert!(bad.is_empty());
    assert_eq!(evaluated.len(), 6, "the episodes are saved all the same");
    assert!(
        evaluated
            .iter()
            .all(|e| e.reward == 0.0 && e.reward_parts.is_empty())
    );
    let records = read_metrics(&dir.path().join("metrics.jsonl")).unwrap();
    let eval = records.iter().find(|r| r["kind"] == "eval").unwrap();
    assert_eq!(eval["reward_scored"], false);
    let data = records.iter().find(|r| r["kind"] == "sft_data").unwrap();
    assert!(data["usable"].as_u64().unwrap() > 0, "{data}");
}
