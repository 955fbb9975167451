//! RL whose rollouts run on `agentrl serve` processes (`[pipeline] rollout_servers`): the
//! learner pushes every new version to every server, turns record which server made them, the
//! staleness bound holds across processes, only the newest pushed weights stay on disk, a dead
//! server is dropped while the run goes on on the others, and a run left with no server stops
//! with a message that names them. A cross-policy rollout over two
//! servers records which policy produced each turn.

mod common;

use std::collections::BTreeSet;
use std::sync::Arc;

use agentrl_core::{Policy, SamplingParams, Split};
use agentrl_policy::llama::Dtype;
use agentrl_policy::serve::{ServeState, ServedModel};
use agentrl_policy::{ApiFlavor, CrossPolicy, HttpPolicy, HttpPolicyConfig, TinyChatFormat};
use agentrl_trainer::metrics::read_metrics;
use agentrl_trainer::rollout::{RolloutContext, run_many};
use agentrl_trainer::run::Run;
use common::tool_model::{CONTEXT, tool_models};
use tch::Device;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rollouts_on_two_servers_follow_the_learner() {
    let dir = tempfile::tempdir().unwrap();
    let config = common::tiny_config(1);
    let run = Run::new(config.clone(), dir.path()).unwrap();
    let demos = run.write_demonstrations().await.unwrap();
    let learner = run.sft(&demos).unwrap();
    // Two servers start from the SFT checkpoint (shape from the run's config.toml).
    let sft = dir.path().join("checkpoints/sft.safetensors");
    let mut urls = Vec::new();
    let mut states = Vec::new();
    for seed in 0..2 {
        let model = ServedModel::load(&sft, None, None, Device::Cpu, Dtype::F32, 64, seed).unwrap();
        let (url, state) = common::tool_model::serve_on_loopback(model, Some("sesame")).await;
        urls.push(url);
        states.push(state);
    }
    let mut config = config;
    config.pipeline.rollout_servers = urls.clone();
    config.pipeline.rollout_api_key = Some("sesame".into());
    let run = Run::new(config, dir.path()).unwrap();
    let (_learner, summary) = run.rl(learner, 0).await.unwrap();
    assert_eq!(summary.steps, 3);

    // Every server holds the last version, and both generated rollouts.
    for state in &states {
        assert_eq!(agentrl_core::Policy::version(&state.model.policy), 3);
    }
    let mut producers = BTreeSet::new();
    let samples: Vec<_> = std::fs::read_dir(dir.path().join("samples"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().contains("rl_step_"))
        .collect();
    assert!(!samples.is_empty());
    for file in samples {
        let (sampled, bad) = agentrl_core::read_jsonl(&file).unwrap();
        assert!(bad.is_empty());
        for t in &sampled {
            for turn in &t.turns {
                let name = turn.policy_name.clone().expect("remote turns are named");
                assert!(urls.contains(&name), "{name}");
                producers.insert(name);
            }
        }
    }
    assert_eq!(producers.len(), 2, "the router used both servers");
    let records = read_metrics(&dir.path().join("metrics.jsonl")).unwrap();
    let steps: Vec<_> = records.iter().filter(|r| r["kind"] == "rl_step").collect();
    assert_eq!(steps.len(), 3);
    for r in steps {
        assert!(r["staleness_max"].as_f64().unwrap() <= 1.0, "{r}");
    }
    // Only the newest pushed weights are kept.
    let pushed: Vec<String> = std::fs::read_dir(dir.path().join("rollout-weights"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(pushed, ["v000003.safetensors"]);

    // A server that is gone is dropped (after retries) and the run goes on on the live one.
    let dead = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}", listener.local_addr().unwrap())
    };
    let mut config = common::tiny_config(1);
    config.pipeline.rollout_servers = vec![urls[0].clone(), dead.clone()];
    config.pipeline.rollout_api_key = Some("sesame".into());
    let run = Run::new(config, dir.path()).unwrap();
    let learner = run.sft(&demos).unwrap();
    let (_, summary) = run.rl(learner, 0).await.unwrap();
    assert!(summary.steps > 0);
    // With no live server left, the run stops and names the dead one.
    let mut config = common::tiny_config(1);
    config.pipeline.rollout_servers = vec![dead.clone()];
    let run = Run::new(config, dir.path()).unwrap();
    let learner = run.sft(&demos).unwrap();
    let err = run.rl(learner, 0).await.err().unwrap().to_string();
    assert!(
        err.contains(&dead) && err.contains("no rollout server is left"),
        "{err}"
    );
    // A blank server address is named with its place in the config.
    let mut config = common::tiny_config(1);
    config.pipeline.rollout_servers = vec![urls[0].clone(), "  ".into()];
    let run = Run::new(config, dir.path()).unwrap();
    let learner = run.sft(&demos).unwrap();
    let err = run.rl(learner, 0).await.err().unwrap().to_string();
    assert!(err.contains("pipeline.rollout_servers[1]"), "{err}");
}

/// Serves the tiny checkpoint `path` (shape from the run's config.toml) on 127.0.0.1:0.
async fn start(path: &std::path::Path) -> (String, Arc<ServeState>) {
    let model = ServedModel::load(
        path,
        None,
        Some("tiny".into()),
        Device::Cpu,
        Dtype::F32,
        16,
        0,
    )
    .unwrap();
    common::tool_model::serve_on_loopback(model, None).await
}

fn http(base: &str, flavor: ApiFlavor) -> HttpPolicy {
    let mut c = HttpPolicyConfig::new(base, "tiny");
    c.flavor = flavor;
    HttpPolicy::new(c).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cross_policy_rollouts_record_which_server_produced_each_turn() {
    let f = tool_models();
    let (base_a, _a) = start(&f.random).await;
    let (base_b, _b) = start(&f.tool).await;
    let members: Vec<(String, Arc<dyn Policy>, f64)> = vec![
        (
            "random".into(),
            Arc::new(http(&base_a, ApiFlavor::OpenAiCompletions)),
            0.5,
        ),
        (
            "sft".into(),
            Arc::new(http(&base_b, ApiFlavor::SglangGenerate)),
            0.5,
        ),
    ];
    let ctx = RolloutContext {
        factory: agentrl_env::lookup("arith-calc").unwrap(),
        policy: Arc::new(CrossPolicy::new(members, 3).unwrap()),
        format: Arc::new(TinyChatFormat::new()),
        max_seq_len: CONTEXT,
        stop: Vec::new(),
    };
    let tasks = (0..16)
        .map(|i| (ctx.factory.task(Split::Train, i), i))
        .collect();
    let params = SamplingParams {
        max_new_tokens: 24,
        seed: None,
        ..SamplingParams::default()
    };
    let trajectories = run_many(&ctx, tasks, &params).await.unwrap();
    let names: Vec<&str> = trajectories
        .iter()
        .flat_map(|t| &t.turns)
        .map(|turn| turn.policy_name.as_deref().unwrap())
        .collect();
    assert!(names.len() >= 16);
    assert!(
        names.contains(&"random") && names.contains(&"sft"),
        "{names:?}"
    );
    assert!(names.iter().all(|n| *n == "random" || *n == "sft"));
    let line = serde_json::to_string(&trajectories[0]).unwrap();
    assert!(line.contains("\"policy_name\""), "{line}");
}
