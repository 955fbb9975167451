//! The `[rl]` options of the GRPO-family pipeline: dynamic sampling (groups without a reward
//! signal are dropped and refilled), overlong handling (mask / soft penalty) and force-cancel of
//! episodes in flight when new weights are published.

mod common;

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use agentrl_core::{
    Env, FinishReason, Generation, GenerationRequest, Message, Observation, Outcome, Policy,
    Result, RewardBreakdown, RewardFn, SamplingParams, Split, Step, StepInfo, Task, Trajectory,
};
use agentrl_env::{EnvFactory, Solver};
use agentrl_policy::{ChatFormat, TinyChatFormat};
use agentrl_trainer::config::{AdvantageConfig, GaeConfig, InFlight, OverlongMode, RunConfig};
use agentrl_trainer::metrics::{MetricsWriter, read_metrics};
use agentrl_trainer::pipeline::{RlRun, RlSummary, train_rl};
use agentrl_trainer::rollout::{
    EpisodeEnd, Restarts, RolloutContext, run_episode_watched, run_group,
    run_group_on_current_weights,
};
use agentrl_trainer::run::Run;
use agentrl_trainer::weight_sync::{Engines, WeightSync};
use async_trait::async_trait;
use tokio::sync::watch;

// ---------------------------------------------------------------------------------------------
// Config

/// The tiny test config with the keys of `extra` (TOML) set in `[rl]`.
fn config_with(extra: &str) -> std::result::Result<RunConfig, String> {
    let text = toml::to_string(&common::tiny_config(1)).unwrap();
    let mut doc: toml::Table = toml::from_str(&text).unwrap();
    let extra: toml::Table = toml::from_str(extra).unwrap();
    let rl = doc
        .get_mut("rl")
        .and_then(toml::Value::as_table_mut)
        .unwrap();
    rl.extend(extra);
    let text = toml::to_string(&doc).unwrap();
    RunConfig::from_toml_str(&text, "test").map_err(|e| e.to_string())
}

#[test]
fn the_options_default_to_todays_behaviour() {
    let rl = common::tiny_config(1).rl;
    assert!(!rl.dynamic_sampling);
    assert_eq!(rl.dynamic_sampling_max_groups, None);
    assert_eq!(rl.dynamic_sampling_limit(), 3 * rl.tasks_per_step);
    assert_eq!(rl.overlong, OverlongMode::None);
    assert_eq!(rl.overlong_buffer, 64);
    assert_eq!(rl.overlong_penalty, 1.0);
    assert_eq!(rl.in_flight, InFlight::Continue);
}

#[test]
fn the_options_parse_and_round_trip() {
    let cfg = config_with(
        "dynamic_sampling = true\ndynamic_sampling_max_groups = 5\noverlong = \"penalty\"\n\
         overlong_buffer = 32\noverlong_penalty = 0.5\nin_flight = \"cancel\"",
    )
    .unwrap();
    assert!(cfg.rl.dynamic_sampling);
    assert_eq!(cfg.rl.dynamic_sampling_limit(), 5);
    assert_eq!(cfg.rl.overlong, OverlongMode::Penalty);
    assert_eq!((cfg.rl.overlong_buffer, cfg.rl.overlong_penalty), (32, 0.5));
    assert_eq!(cfg.rl.in_flight, InFlight::Cancel);
    let again = RunConfig::from_toml_str(&toml::to_string(&cfg).unwrap(), "again").unwrap();
    assert_eq!(again.rl, cfg.rl);
    let mask = config_with("overlong = \"mask\"").unwrap();
    assert_eq!(mask.rl.overlong, OverlongMode::Mask);
}

#[test]
fn bad_options_name_the_key() {
    let cases = [
        (
            "overlong = \"clip\"",
            vec!["overlong", "none", "mask", "penalty"],
        ),
        (
            "in_flight = \"abort\"",
            vec!["in_flight", "continue", "cancel"],
        ),
        (
            "dynamic_sampling_max_groups = 4",
            vec!["rl.dynamic_sampling_max_groups"],
        ),
        (
            "dynamic_sampling = true\ndynamic_sampling_max_groups = 1",
            vec!["rl.dynamic_sampling_max_groups must be at least rl.tasks_per_step"],
        ),
        (
            "dynamic_sampling = true\nadvantage = \"reinforce_pp\"",
            vec!["rl.dynamic_sampling", "grpo"],
        ),
        ("overlong_buffer = 8", vec!["rl.overlong_buffer", "penalty"]),
        (
            "overlong = \"mask\"\noverlong_penalty = 2.0",
            vec!["rl.overlong_penalty"],
        ),
        (
            "overlong = \"penalty\"\noverlong_buffer = 0",
            vec!["rl.overlong_buffer must be in [1, model.max_seq_len = 160]"],
        ),
        (
            "overlong = \"penalty\"\noverlong_buffer = 161",
            vec!["rl.overlong_buffer must be in"],
        ),
        (
            "overlong = \"penalty\"\noverlong_penalty = -1.0",
            vec!["rl.overlong_penalty must be >= 0"],
        ),
    ];
    for (extra, needles) in cases {
        let err = match config_with(extra) {
            Err(e) => e,
            Ok(_) => panic!("`{extra}` must be refused"),
        };
        for needle in needles {
            assert!(err.contains(needle), "`{extra}`: {err} lacks {needle:?}");
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Pipeline runs with a chosen reward

/// Rewards only odd groups, with a value that differs between the rollouts of a group (a hash
/// of the generated ids); even groups all get 0, so they carry no signal. With `constant`,
/// every group gets 0.
struct OddGroupsReward {
    constant: bool,
}

#[async_trait]
impl RewardFn for OddGroupsReward {
    fn name(&self) -> &str {
        "odd_groups"
    }

    async fn score(&self, t: &Trajectory) -> Result<RewardBreakdown> {
        if self.constant || t.group_id.is_multiple_of(2) {
            return Ok(RewardBreakdown::single("odd_groups", 0.0));
        }
        let mut h = std::collections::hash_map::DefaultHasher::new();
        t.token_ids().hash(&mut h);
        Ok(RewardBreakdown::single(
            "odd_groups",
            (h.finish() % 1000) as f64 / 1000.0,
        ))
    }
}

/// Trains `cfg` from fresh weights with `reward` (on `factory`'s env instead of the config's
/// when given); returns the summary and the rl_step records.
async fn train_with(
    cfg: RunConfig,
    reward: Arc<dyn RewardFn>,
    dir: &std::path::Path,
    factory: Option<Arc<dyn EnvFactory>>,
) -> (RlSummary, Vec<serde_json::Value>) {
    let run = Run::new(cfg.clone(), dir).unwrap();
    let learner = run.learner(cfg.rl.lr, None).unwrap();
    let (policy, mut ctx) = run.rollout_policy(&learner, false).unwrap();
    if let Some(factory) = factory {
        ctx.factory = factory;
    }
    let rl = RlRun {
        config: cfg,
        ctx,
        weights: WeightSync::Local(Engines::new(policy, Vec::new())),
        reward,
        run_dir: dir.to_path_buf(),
        start_step: 0,
        resume: None,
    };
    let metrics = MetricsWriter::open(&dir.join("metrics.jsonl")).unwrap();
    // A guard against a hang (a pipeline waiting for groups nobody produces), not a timing.
    let trained = tokio::time::timeout(
        std::time::Duration::from_secs(300),
        train_rl(rl, learner, metrics),
    );
    let (_learner, _metrics, summary) = trained.await.expect("the pipeline stalled").unwrap();
    let records: Vec<serde_json::Value> = read_metrics(&dir.join("metrics.jsonl"))
        .unwrap()
        .into_iter()
        .filter(|r| r["kind"] == "rl_step")
        .collect();

    (summary, records)
}

fn samples(dir: &std::path::Path, step: usize) -> Vec<Trajectory> {
    let file = dir.join(format!("samples/rl_step_{step:06}.jsonl"));
    let (trajectories, bad) = agentrl_core::read_jsonl(&file).unwrap();
    assert!(bad.is_empty());
    trajectories
}

fn count(r: &serde_json::Value, key: &str) -> u64 {
    r[key]
        .as_u64()
        .unwrap_or_else(|| panic!("no count {key} in {r}"))
}

#[test]
fn engines_are_checked_against_what_needs_one_model_thread() {
    let with = |pipeline: &str| {
        let text = toml::to_string(&common::tiny_config(0)).unwrap();
        let mut doc: toml::Table = toml::from_str(&text).unwrap();
        let extra: toml::Table = toml::from_str(pipeline).unwrap();
        let table = doc
            .entry("pipeline")
            .or_insert_with(|| toml::Value::Table(toml::Table::new()));
        if let Some(table) = table.as_table_mut() {
            table.extend(extra);
        }
        RunConfig::from_toml_str(&toml::to_string(&doc).unwrap(), "test").map_err(|e| e.to_string())
    };
    assert_eq!(with("engines = 2").unwrap().pipeline.engines, 2);
    assert_eq!(with("").unwrap().pipeline.engines, 1);
    let zero = with("engines = 0").unwrap_err();
    assert!(
        zero.contains("pipeline.engines must be at least 1"),
        "{zero}"
    );
    let deterministic = with("engines = 2\ndeterministic = true").unwrap_err();
    assert!(
        deterministic.contains("pipeline.engines = 2") && deterministic.contains("deterministic"),
        "{deterministic}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_engines_generate_and_train_in_both_pipelines() {
    for max_staleness in [0, 1] {
        let dir = tempfile::tempdir().unwrap();
        let mut cfg = common::tiny_config(max_staleness);
        cfg.rl.steps = 2;
        cfg.pipeline.engines = 2;
        cfg.validate().unwrap();
        let run = Run::new(cfg.clone(), dir.path()).unwrap();
        let learner = run.learner(cfg.rl.lr, None).unwrap();
        // A guard against a hang, not a timing.
        let trained = tokio::time::timeout(std::time::Duration::from_secs(300), run.rl(learner, 0));
        let (_learner, summary) = trained.await.expect("the pipeline stalled").unwrap();
        assert_eq!(summary.steps, 2, "staleness {max_staleness}");
        let steps: Vec<serde_json::Value> = read_metrics(&dir.path().join("metrics.jsonl"))
            .unwrap()
            .into_iter()
            .filter(|r| r["kind"] == "rl_step")
            .collect();
        assert_eq!(steps.len(), 2, "staleness {max_staleness}");
        for step in &steps {
            let played =
                count(&step["outcomes"], "completed") + count(&step["outcomes"], "truncated");
            assert_eq!(
                played as usize,
                cfg.rl.tasks_per_step * cfg.rl.group_size,
                "{step}"
            );
            assert!(
                step["generated_tokens_mean"].as_f64().unwrap_or(0.0) > 0.0,
                "{step}"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dynamic_sampling_drops_groups_without_signal_and_refills_the_batch() {
    // Synchronous mode: the producer's quota alone is exactly `tasks_per_step` groups a step,
    // so without refills the learner would wait forever for the groups it dropped.
    let mut cfg = common::tiny_config(0);
    cfg.rl.dynamic_sampling = true;
    cfg.rl.steps = 3;
    cfg.rl.checkpoint_every = 1;
    let (tasks, size) = (cfg.rl.tasks_per_step, cfg.rl.group_size);
    let dir = tempfile::tempdir().unwrap();
    let reward = Arc::new(OddGroupsReward { constant: false });
    let (summary, steps) = train_with(cfg, reward, dir.path(), None).await;
    assert_eq!(summary.steps, 3);
    assert_eq!(steps.len(), 3);
    for (i, r) in steps.iter().enumerate() {
        let drawn = count(r, "groups_drawn");
        let dropped = count(r, "dynamic_dropped_groups");
        assert_eq!(
            drawn - dropped,
            tasks as u64,
            "a full batch of groups with signal: {r}"
        );
        assert!(drawn <= 3 * tasks as u64, "{r}");
        assert!(
            count(r, "trained_trajectories") <= (tasks * size) as u64,
            "{r}"
        );
        assert!(r["drawn_reward_mean"].is_number(), "{r}");
        // The batch holds the odd groups only, each with rewards that differ.
        let batch = samples(dir.path(), i + 1);
        assert_eq!(batch.len(), tasks * size);
        let mut groups: BTreeMap<u64, Vec<f64>> = BTreeMap::new();
        for t in &batch {
            groups.entry(t.group_id).or_default().push(t.reward);
        }
        assert_eq!(groups.len(), tasks);
        for (id, rewards) in &groups {
            assert_eq!(id % 2, 1, "group {id} has no signal but was trained on");
            assert!(rewards.iter().any(|&r| r != rewards[0]), "{rewards:?}");
        }
    }
    // Even groups are drawn as often as odd ones: some were dropped.
    assert!(summary.dynamic_dropped_groups > 0);
    assert_eq!(
        summary.dynamic_dropped_groups as u64,
        steps
            .iter()
            .map(|r| count(r, "dynamic_dropped_groups"))
            .sum::<u64>()
    );
    assert_eq!(summary.dropped_stale, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dynamic_sampling_stops_drawing_at_its_bound() {
    // No group ever has a signal: every step draws its bound, trains on nothing, and the run
    // still ends (the quota a step gave back does not pile up).
    let mut cfg = common::tiny_config(1);
    cfg.rl.dynamic_sampling = true;
    cfg.rl.dynamic_sampling_max_groups = Some(3);
    cfg.rl.steps = 3;
    let dir = tempfile::tempdir().unwrap();
    let reward = Arc::new(OddGroupsReward { constant: true });
    let (summary, steps) = train_with(cfg, reward, dir.path(), None).await;
    assert_eq!(summary.steps, 3);
    for r in &steps {
        assert_eq!(count(r, "groups_drawn"), 3, "{r}");
        assert_eq!(count(r, "dynamic_dropped_groups"), 3, "{r}");
        assert_eq!(count(r, "trained_trajectories"), 0, "{r}");
    }
    assert_eq!(summary.dynamic_dropped_groups, 9);
    assert_eq!(summary.trajectories, 0);
    // The learning curve still covers the groups drawn.
    for r in &steps {
        assert_eq!(r["drawn_reward_mean"].as_f64(), Some(0.0), "{r}");
        assert!(r["drawn_success_rate"].is_number(), "{r}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn overlong_mask_trains_no_truncated_episode() {
    // Every other episode of the counting env ends truncated (as by a turn limit).
    let truncating = || -> Option<Arc<dyn EnvFactory>> {
        Some(Arc::new(CountingFactory {
            turns: 2,
            truncate_every_other: true,
            ledger: Arc::default(),
        }))
    };
    let mut cfg = common::tiny_config(1);
    cfg.model.max_seq_len = 120;
    cfg.rl.overlong = OverlongMode::Mask;
    cfg.rl.steps = 2;
    cfg.rl.checkpoint_every = 1;
    let dir = tempfile::tempdir().unwrap();
    let reward = Arc::new(OddGroupsReward { constant: false });
    let (_summary, steps) = train_with(cfg.clone(), reward, dir.path(), truncating()).await;
    let mut masked_total = 0;
    for (i, r) in steps.iter().enumerate() {
        let batch = samples(dir.path(), i + 1);
        let truncated = batch
            .iter()
            .filter(|t| t.outcome == Outcome::Truncated)
            .count();
        let signal = batch
            .iter()
            .filter(|t| t.outcome != Outcome::Truncated && t.group_id % 2 == 1)
            .count();
        assert_eq!(count(r, "overlong_masked"), truncated as u64, "{r}");
        assert!(
            count(r, "trained_trajectories") <= signal as u64,
            "only untruncated episodes of groups with a signal train: {r}"
        );
        masked_total += truncated;
    }
    assert!(masked_total > 0, "half the episodes are truncated");
    // PPO: the policy step leaves the truncated episodes out (the critic still learns them).
    let mut ppo = cfg.clone();
    ppo.rl.advantage = AdvantageConfig::Gae(GaeConfig::default());
    ppo.rl.group_size = 1;
    ppo.rl.tasks_per_step = 6;
    let dir = tempfile::tempdir().unwrap();
    let reward = Arc::new(OddGroupsReward { constant: false });
    let (_summary, steps) = train_with(ppo, reward, dir.path(), truncating()).await;
    for (i, r) in steps.iter().enumerate() {
        let batch = samples(dir.path(), i + 1);
        let truncated = batch
            .iter()
            .filter(|t| t.outcome == Outcome::Truncated)
            .count();
        let untruncated = batch
            .iter()
            .filter(|t| t.outcome != Outcome::Truncated && t.num_generated() > 0)
            .count();
        assert_eq!(count(r, "overlong_masked"), truncated as u64, "{r}");
        assert_eq!(count(r, "trained_trajectories"), untruncated as u64, "{r}");
    }
    // The same run with the soft penalty: every trajectory carries the (non-positive) part; a
    // buffer of 100 of the 120 tokens penalises every episode past 20 tokens.
    cfg.rl.overlong = OverlongMode::Penalty;
    cfg.rl.overlong_buffer = 100;
    cfg.rl.steps = 1;
    let dir = tempfile::tempdir().unwrap();
    let reward = Arc::new(OddGroupsReward { constant: false });
    let (_summary, steps) = train_with(cfg, reward, dir.path(), None).await;
    assert!(steps[0]["reward/overlong_penalty"].as_f64().unwrap() < 0.0);
    for t in samples(dir.path(), 1) {
        let p = t.reward_parts["overlong_penalty"];
        let expected = agentrl_trainer::pipeline::overlong_penalty(t.num_tokens(), 120, 100, 1.0);
        assert_eq!(p, expected);
        assert!((t.reward - (t.reward_parts["odd_groups"] + p)).abs() < 1e-12);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn force_cancel_runs_and_trains_single_version_trajectories() {
    // Three-turn episodes, rolled out for the next step while the learner trains (staleness
    // 1): whether one is caught by a weight update depends on timing, so this checks what
    // must hold either way; the tests below cancel deterministically.
    let mut cfg = common::tiny_config(1);
    cfg.rl.in_flight = InFlight::Cancel;
    cfg.rl.steps = 4;
    cfg.rl.checkpoint_every = 1;
    let dir = tempfile::tempdir().unwrap();
    let reward = Arc::new(OddGroupsReward { constant: false });
    let factory = Arc::new(CountingFactory {
        turns: 3,
        truncate_every_other: false,
        ledger: Arc::default(),
    });
    let (summary, steps) = train_with(cfg, reward, dir.path(), Some(factory)).await;
    assert_eq!(summary.steps, 4);
    for (i, r) in steps.iter().enumerate() {
        let cancelled = count(r, "episodes_cancelled");
        let restarted = count(r, "episodes_restarted");
        // A cancelled attempt replays its whole group.
        assert!(restarted >= cancelled, "{r}");
        assert_eq!(restarted % 3, 0, "{r}");
        for t in samples(dir.path(), i + 1) {
            let versions: BTreeSet<u64> = t.turns.iter().map(|u| u.policy_version).collect();
            assert!(versions.len() <= 1, "mixed versions {versions:?}");
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Force-cancel at the rollout level, with a scripted policy and env

/// Sessions and env sessions made and ended, shared by the test env and policy.
#[derive(Default)]
struct Ledger {
    envs_made: AtomicUsize,
    envs_dropped: AtomicUsize,
    sessions: Mutex<HashSet<String>>,
    ended: Mutex<HashSet<String>>,
}

/// An env whose episodes last `turns` steps whatever the agent says.
struct CountingFactory {
    turns: usize,
    /// Every other env session made ends truncated instead of terminated.
    truncate_every_other: bool,
    ledger: Arc<Ledger>,
}

struct CountingEnv {
    turns: usize,
    truncate: bool,
    taken: usize,
    ledger: Arc<Ledger>,
}

impl Drop for CountingEnv {
    fn drop(&mut self) {
        self.ledger.envs_dropped.fetch_add(1, Ordering::SeqCst);
    }
}

struct Silent;

impl Solver for Silent {
    fn act(&mut self, _task: &Task, _history: &[Message]) -> Message {
        Message::assistant("ok")
    }
}

impl EnvFactory for CountingFactory {
    fn id(&self) -> &str {
        "counting"
    }

    fn task(&self, split: Split, index: u64) -> Task {
        Task {
            env_id: "counting".into(),
            id: format!("{index}"),
            split,
            data: serde_json::Value::Null,
        }
    }

    fn make(&self) -> Box<dyn Env> {
        let made = self.ledger.envs_made.fetch_add(1, Ordering::SeqCst);
        Box::new(CountingEnv {
            turns: self.turns,
            truncate: self.truncate_every_other && made % 2 == 1,
            taken: 0,
            ledger: self.ledger.clone(),
        })
    }

    fn max_turns(&self) -> usize {
        self.turns
    }

    fn solver(&self, _seed: u64) -> Box<dyn Solver> {
        Box::new(Silent)
    }
}

#[async_trait]
impl Env for CountingEnv {
    fn id(&self) -> &str {
        "counting"
    }

    async fn reset(&mut self, _task: &Task) -> Result<Observation> {
        self.taken = 0;
        Ok(Observation {
            messages: vec![Message::user("count")],
            tools: Vec::new(),
        })
    }

    async fn step(&mut self, _action: &Message) -> Result<Step> {
        self.taken += 1;
        let done = self.taken >= self.turns;
        Ok(Step {
            messages: if done {
                Vec::new()
            } else {
                vec![Message::user("again")]
            },
            reward: 0.0,
            terminated: done && !self.truncate,
            truncated: done && self.truncate,
            info: StepInfo {
                success: (done && !self.truncate).then_some(true),
                ..StepInfo::default()
            },
        })
    }
}

/// Answers "ok" at the current version; the `bump_at`-th call (1-based) is answered at the
/// current version and then publishes the next one (as the learner does between turns).
struct BumpingPolicy {
    version: AtomicU64,
    calls: AtomicUsize,
    bump_at: usize,
    versions: watch::Sender<u64>,
    ledger: Arc<Ledger>,
}

#[async_trait]
impl Policy for BumpingPolicy {
    async fn generate(&self, requests: Vec<GenerationRequest>) -> Result<Vec<Generation>> {
        let ids = TinyChatFormat::new().render_assistant(&Message::assistant("ok"));
        let version = self.version.load(Ordering::SeqCst);
        let mut out = Vec::new();
        for r in requests {
            if let Some(s) = &r.session {
                self.ledger.sessions.lock().unwrap().insert(s.clone());
            }
            out.push(Generation {
                logprobs: vec![-1.0; ids.len()],
                ids: ids.clone(),
                finish: FinishReason::Stop,
                matched_stop: None,
                policy_version: version,
                policy_name: None,
            });
        }
        if self.calls.fetch_add(1, Ordering::SeqCst) + 1 == self.bump_at {
            self.version.store(version + 1, Ordering::SeqCst);
            let _ = self.versions.send(version + 1);
        }
        Ok(out)
    }

    fn version(&self) -> u64 {
        self.version.load(Ordering::SeqCst)
    }

    fn end_session(&self, session: &str) {
        self.ledger
            .ended
            .lock()
            .unwrap()
            .insert(session.to_string());
    }
}

fn scripted(turns: usize, bump_at: usize) -> (RolloutContext, Arc<Ledger>, watch::Receiver<u64>) {
    let ledger = Arc::new(Ledger::default());
    let (tx, rx) = watch::channel(0);
    let policy = BumpingPolicy {
        version: AtomicU64::new(0),
        calls: AtomicUsize::new(0),
        bump_at,
        versions: tx,
        ledger: ledger.clone(),
    };
    let ctx = RolloutContext {
        factory: Arc::new(CountingFactory {
            turns,
            truncate_every_other: false,
            ledger: ledger.clone(),
        }),
        policy: Arc::new(policy),
        format: Arc::new(TinyChatFormat::new()),
        max_seq_len: 4096,
        stop: Vec::new(),
    };
    (ctx, ledger, rx)
}

fn params() -> SamplingParams {
    SamplingParams {
        max_new_tokens: 8,
        ..SamplingParams::default()
    }
}

fn versions_of(t: &Trajectory) -> Vec<u64> {
    t.turns.iter().map(|u| u.policy_version).collect()
}

fn assert_all_ended(ledger: &Ledger) {
    let sessions = ledger.sessions.lock().unwrap().clone();
    assert!(!sessions.is_empty());
    assert_eq!(
        sessions,
        *ledger.ended.lock().unwrap(),
        "every policy session ends"
    );
    assert_eq!(
        ledger.envs_made.load(Ordering::SeqCst),
        ledger.envs_dropped.load(Ordering::SeqCst),
        "every env session is dropped"
    );
}

#[tokio::test]
async fn an_episode_is_cancelled_when_the_weights_move_between_its_turns() {
    // The first turn is generated at version 0, then version 1 is published.
    let (ctx, ledger, versions) = scripted(3, 1);
    let task = ctx.factory.task(Split::Train, 0);
    let end = run_episode_watched(&ctx, &task, &params(), 7, Some(&versions))
        .await
        .unwrap();
    assert_eq!(end, EpisodeEnd::Cancelled);
    assert_eq!(ctx.policy.version(), 1);
    // Started under version 1 it plays out.
    let end = run_episode_watched(&ctx, &task, &params(), 7, Some(&versions))
        .await
        .unwrap();
    let EpisodeEnd::Finished(t) = end else {
        panic!("a fresh episode must finish");
    };
    assert_eq!(versions_of(&t), vec![1, 1, 1]);
    assert!(t.success);
    assert_all_ended(&ledger);
}

#[tokio::test]
async fn without_force_cancel_the_turns_mix_versions() {
    // The same schedule with `in_flight = "continue"`: the trajectory mixes versions 0 and 1.
    let (ctx, ledger, _versions) = scripted(3, 1);
    let task = ctx.factory.task(Split::Train, 0);
    let group = run_group(&ctx, &task, 1, &params(), 7).await.unwrap();
    assert_eq!(versions_of(&group[0]), vec![0, 1, 1]);
    assert_all_ended(&ledger);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_group_is_played_again_under_the_new_weights() {
    let (ctx, ledger, versions) = scripted(3, 1);
    let task = ctx.factory.task(Split::Train, 4);
    let (group, restarts) = run_group_on_current_weights(&ctx, &task, 3, &params(), 9, &versions)
        .await
        .unwrap();
    assert_eq!(group.len(), 3);
    for t in &group {
        assert_eq!(t.group_id, 9);
        assert_eq!(
            versions_of(t),
            vec![1, 1, 1],
            "replayed under the new weights"
        );
    }
    // The episode whose first turn was at version 0 was cancelled (others that began before
    // the bump may have been too), and the whole group was played again once.
    assert!(restarts.cancelled >= 1, "{restarts:?}");
    assert_eq!(
        restarts,
        Restarts {
            cancelled: restarts.cancelled,
            restarted: 3
        }
    );
    assert_all_ended(&ledger);
    // Single-turn episodes never span a weight update: nothing to cancel.
    let (ctx, _ledger, versions) = scripted(1, 1);
    let (group, restarts) = run_group_on_current_weights(&ctx, &task, 2, &params(), 9, &versions)
        .await
        .unwrap();
    assert_eq!(group.len(), 2);
    assert_eq!(restarts, Restarts::default());
}
