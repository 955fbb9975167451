//! Cross-policy sampling in RL runs (`[rl.cross_policy]`): turns come from the current policy
//! and from a stale snapshot refreshed every `stale_every` steps (and from extra policies over
//! HTTP), each turn carries the version and the logprobs of the weights that made it, and the
//! config keys are checked.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use agentrl_core::Trajectory;
use agentrl_policy::llama::Dtype;
use agentrl_policy::serve::ServedModel;
use agentrl_trainer::config::{CrossPolicyConfig, ExtraPolicyConfig, RunConfig};
use agentrl_trainer::learner::pack;
use agentrl_trainer::run::Run;
use tch::{Device, Kind};

fn cross(p: f64, stale_every: u64) -> Option<CrossPolicyConfig> {
    Some(CrossPolicyConfig {
        p,
        stale_every,
        extra: Vec::new(),
    })
}

/// The trajectories of every `samples/rl_step_*.jsonl`, by step (1-based).
fn samples(dir: &Path) -> BTreeMap<u64, Vec<Trajectory>> {
    let mut out = BTreeMap::new();
    for entry in std::fs::read_dir(dir.join("samples")).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_stem().unwrap().to_string_lossy().into_owned();
        let Some(step) = name.strip_prefix("rl_step_") else {
            continue;
        };
        let (trajectories, bad) = agentrl_core::read_jsonl(&path).unwrap();
        assert!(bad.is_empty(), "{bad:?}");
        out.insert(step.parse().unwrap(), trajectories);
    }
    out
}

/// Each turn's generated ids' logprobs (temperature 1) under the weights in `weights`, per
/// trajectory and turn.
fn rescore(run: &Run, weights: &Path, batch: &[&Trajectory]) -> Vec<Vec<Vec<f32>>> {
    let learner = run.learner(1e-3, Some(weights)).unwrap();
    let (vs, model) = learner.clone_model().unwrap();
    let _keep = vs;
    batch
        .iter()
        .map(|t| {
            let packed = pack(&[t], Device::Cpu);
            let (lp, _) = tch::no_grad(|| model.token_logprobs(&packed.ids, 1.0));
            // `lp[j]` is the logprob of token `j + 1`.
            let lp: Vec<f32> = Vec::try_from(lp.view([-1]).to_kind(Kind::Float)).unwrap();
            let mut at = 0;
            t.turns
                .iter()
                .map(|turn| {
                    at += turn.injected_ids.len();
                    let out = (at..at + turn.generated_ids.len())
                        .map(|j| lp[j - 1])
                        .collect();
                    at += turn.generated_ids.len();
                    out
                })
                .collect()
        })
        .collect()
}

fn max_diff(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len());
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max)
}

/// Where the weights of `version` are: `v0.safetensors` (saved before RL) or the checkpoint
/// of step `version` (`checkpoint_every = 1`).
fn weights_of(dir: &Path, version: u64) -> PathBuf {
    if version == 0 {
        dir.join("v0.safetensors")
    } else {
        dir.join(format!("checkpoints/step-{version:06}/model.safetensors"))
    }
}

const TOLERANCE: f32 = 2e-3;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn turns_come_from_the_current_policy_and_its_stale_snapshot() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = common::tiny_config(1);
    cfg.rl.steps = 4;
    cfg.rl.checkpoint_every = 1;
    cfg.rl.cross_policy = cross(0.5, 2);
    // A reward that differs within every group, so that every step changes the weights.
    cfg.rl.lr = 5e-3;
    cfg.reward = toml::from_str(
        "type = \"weighted_sum\"\n[[terms]]\nweight = 1.0\nreward = { type = \"outcome\" }\n\
         [[terms]]\nweight = 1.0\nreward = { type = \"length_penalty\", \
         max_generated_tokens = 0, per_token = 0.01 }\n",
    )
    .unwrap();
    cfg.validate().unwrap();
    let run = Run::new(cfg.clone(), dir.path()).unwrap();
    let demos = run.write_demonstrations().await.unwrap();
    let learner = run.sft(&demos).unwrap();
    learner.save(&dir.path().join("v0.safetensors")).unwrap();
    let (_learner, summary) = run.rl(learner, 0).await.unwrap();
    assert_eq!(summary.steps, 4);
    eprintln!("dropped for staleness: {}", summary.dropped_stale);

    let by_step = samples(dir.path());
    assert_eq!(by_step.keys().copied().collect::<Vec<_>>(), [1, 2, 3, 4]);
    let (stale_every, max_staleness) = (2, cfg.pipeline.max_staleness);
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    // Turns by the version that made them, to re-score with those weights.
    let mut by_version: BTreeMap<u64, Vec<(&Trajectory, usize)>> = BTreeMap::new();
    for (&step, batch) in &by_step {
        let trained_at = step - 1;
        for t in batch {
            for (i, turn) in t.turns.iter().enumerate() {
                let name = turn
                    .policy_name
                    .clone()
                    .expect("cross-policy turns are named");
                let v = turn.policy_version;
                assert!(v <= trained_at, "step {step}: a turn of version {v}");
                match name.as_str() {
                    // The bound is per turn: a current turn beyond it stays in its episode,
                    // left out of the loss.
                    "current" => assert_eq!(
                        turn.stale,
                        trained_at - v > max_staleness,
                        "step {step}: {v}"
                    ),
                    "snapshot" => {
                        assert!(!turn.stale, "snapshot turns are exempt from the bound");
                        assert_eq!(v % stale_every, 0, "snapshots are taken every 2 versions");
                        assert!(
                            trained_at - v < stale_every + max_staleness,
                            "step {step}: snapshot version {v}"
                        );
                    }
                    other => panic!("unexpected policy {other}"),
                }
                assert_eq!(turn.logprobs.len(), turn.generated_ids.len());
                *counts.entry(name).or_default() += 1;
                by_version.entry(v).or_default().push((t, i));
            }
        }
    }
    assert!(
        counts.get("current").is_some_and(|&n| n > 0)
            && counts.get("snapshot").is_some_and(|&n| n > 0),
        "{counts:?}"
    );

    // Every turn's logprobs are those of the weights (version) that made it. A snapshot turn
    // made by weights older than its step's is also checked against the newer weights, which
    // must not fit it (the check can tell the two apart).
    let mut told_apart = 0;
    for (&v, turns) in &by_version {
        let trajectories: Vec<&Trajectory> = turns.iter().map(|(t, _)| *t).collect();
        let own = rescore(&run, &weights_of(dir.path(), v), &trajectories);
        let newer = rescore(&run, &weights_of(dir.path(), v + 1), &trajectories);
        for (k, (t, i)) in turns.iter().enumerate() {
            let turn = &t.turns[*i];
            let d = max_diff(&turn.logprobs, &own[k][*i]);
            assert!(
                d < TOLERANCE,
                "a {:?} turn of version {v} is off its weights by {d}",
                turn.policy_name
            );
            if turn.policy_name.as_deref() == Some("snapshot")
                && max_diff(&turn.logprobs, &newer[k][*i]) > TOLERANCE
            {
                told_apart += 1;
            }
        }
    }
    eprintln!("turns {counts:?}; snapshot turns told apart from newer weights: {told_apart}");
    assert!(told_apart > 0, "the re-scoring cannot tell versions apart");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_stale_turns_every_turn_is_the_current_policys() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = common::tiny_config(1);
    cfg.rl.steps = 2;
    cfg.rl.cross_policy = cross(0.0, 1);
    let run = Run::new(cfg.clone(), dir.path()).unwrap();
    let learner = run.learner(cfg.rl.lr, None).unwrap();
    let (_, summary) = run.rl(learner, 0).await.unwrap();
    assert_eq!(summary.steps, 2);
    let by_step = samples(dir.path());
    let turns: Vec<_> = by_step.values().flatten().flat_map(|t| &t.turns).collect();
    assert!(!turns.is_empty());
    for turn in turns {
        assert_eq!(turn.policy_name.as_deref(), Some("current"));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_extra_policy_over_http_joins_the_pool_with_its_own_logprobs() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = common::tiny_config(1);
    cfg.rl.steps = 2;
    cfg.rl.checkpoint_every = 1;
    let run = Run::new(cfg.clone(), dir.path()).unwrap();
    // The peer serves the initial weights and never changes.
    let learner = run.learner(cfg.rl.lr, None).unwrap();
    let peer_weights = dir.path().join("v0.safetensors");
    learner.save(&peer_weights).unwrap();
    let served = ServedModel::load(
        &peer_weights,
        None,
        Some("peer-model".into()),
        Device::Cpu,
        Dtype::F32,
        64,
        1,
    )
    .unwrap();
    let (url, _state) = common::tool_model::serve_on_loopback(served, None).await;
    cfg.rl.cross_policy = Some(CrossPolicyConfig {
        p: 0.25,
        stale_every: 2,
        extra: vec![ExtraPolicyConfig {
            name: "peer".into(),
            url,
            model: "peer-model".into(),
            weight: 1.0,
            api_key: None,
        }],
    });
    cfg.validate().unwrap();
    let run = Run::new(cfg.clone(), dir.path()).unwrap();
    let (_, summary) = run.rl(learner, 0).await.unwrap();
    assert_eq!(summary.steps, 2);
    let by_step = samples(dir.path());
    let mut peer = Vec::new();
    for batch in by_step.values() {
        for t in batch {
            for (i, turn) in t.turns.iter().enumerate() {
                let name = turn.policy_name.as_deref().unwrap();
                assert!(["current", "snapshot", "peer"].contains(&name), "{name}");
                if name == "peer" {
                    assert_eq!(turn.policy_version, 0, "the peer keeps its weights");
                    peer.push((t, i));
                }
            }
        }
    }
    assert!(!peer.is_empty(), "the peer made no turn");
    let trajectories: Vec<&Trajectory> = peer.iter().map(|(t, _)| *t).collect();
    let scored = rescore(&run, &peer_weights, &trajectories);
    for (k, (t, i)) in peer.iter().enumerate() {
        let d = max_diff(&t.turns[*i].logprobs, &scored[k][*i]);
        assert!(
            d < TOLERANCE,
            "a peer turn is off the peer's weights by {d}"
        );
    }
}

/// The tiny test config's TOML with `extra` appended.
fn parse_with(extra: &str) -> Result<RunConfig, String> {
    let base = toml::to_string(&common::tiny_config(1)).unwrap();
    RunConfig::from_toml_str(&format!("{base}\n{extra}"), "cross test").map_err(|e| e.to_string())
}

#[test]
fn cross_policy_keys_are_parsed_and_checked() {
    let cfg = parse_with("[rl.cross_policy]\n").unwrap();
    assert_eq!(cfg.rl.cross_policy, cross(0.25, 4), "defaults");
    assert_eq!(
        parse_with("").unwrap().rl.cross_policy,
        None,
        "off by default"
    );
    let cfg = parse_with(
        "[rl.cross_policy]\np = 0.5\nstale_every = 2\n[[rl.cross_policy.extra]]\nname = \"peer\"\n\
         url = \"http://127.0.0.1:8000\"\nmodel = \"m\"\nweight = 0.5\n",
    )
    .unwrap();
    let cross_cfg = cfg.rl.cross_policy.clone().unwrap();
    assert_eq!((cross_cfg.p, cross_cfg.stale_every), (0.5, 2));
    assert_eq!(cross_cfg.extra[0].name, "peer");
    // The config round-trips through its TOML form (the run directory's config.toml).
    let again = RunConfig::from_toml_str(&toml::to_string(&cfg).unwrap(), "again").unwrap();
    assert_eq!(again.rl.cross_policy, cfg.rl.cross_policy);

    for (text, key) in [
        ("p = 1.5", "rl.cross_policy.p"),
        ("p = -0.1", "rl.cross_policy.p"),
        ("p = nan", "rl.cross_policy.p"),
        ("stale_every = 0", "rl.cross_policy.stale_every"),
        ("q = 1", "unknown field `q`"),
    ] {
        let err = parse_with(&format!("[rl.cross_policy]\n{text}\n")).unwrap_err();
        assert!(err.contains(key), "{text}: {err}");
    }
    for (extra, key) in [
        (
            "name = \"snapshot\"\nurl = \"http://a\"\nmodel = \"m\"\nweight = 1",
            "extra[0].name",
        ),
        (
            "name = \"x\"\nurl = \" \"\nmodel = \"m\"\nweight = 1",
            "extra[0].url",
        ),
        (
            "name = \"x\"\nurl = \"http://a\"\nmodel = \"m\"\nweight = -1",
            "extra[0].weight",
        ),
        (
            "name = \"x\"\nurl = \"http://a\"\nweight = 1",
            "missing field `model`",
        ),
    ] {
        let text = format!("[rl.cross_policy]\n[[rl.cross_policy.extra]]\n{extra}\n");
        let err = parse_with(&text).unwrap_err();
        assert!(err.contains(key), "{extra}: {err}");
    }
    // Rollout servers cannot host the in-process snapshot.
    let mut cfg = parse_with("[rl.cross_policy]\n").unwrap();
    cfg.pipeline.rollout_servers = vec!["http://127.0.0.1:8000".into()];
    let err = cfg.validate().unwrap_err();
    assert!(
        err.contains("rl.cross_policy") && err.contains("rollout_servers"),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_with_rollout_servers_refuses_cross_policy_sampling() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = common::tiny_config(1);
    cfg.rl.cross_policy = cross(0.5, 2);
    cfg.pipeline.rollout_servers = vec!["http://127.0.0.1:9".into()];
    let run = Run::new(cfg.clone(), dir.path()).unwrap();
    let learner = run.learner(cfg.rl.lr, None).unwrap();
    let err = run.rl(learner, 0).await.err().unwrap().to_string();
    assert!(err.contains("not supported"), "{err}");
}
