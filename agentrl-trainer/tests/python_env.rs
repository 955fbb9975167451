//! Training on an env written in Python: the SDK's example `guess-number` env served by
//! `python3 -m agentrl_env.serve` on 127.0.0.1, named in the run's `[env]` by id and server.
//! There is no reference solver for it on the Rust side, so RL starts from fresh weights.

mod common;
#[path = "../../agentrl-env/tests/support/python_server.rs"]
mod python_server;

use agentrl_core::Outcome;
use agentrl_trainer::config::EnvConfig;
use agentrl_trainer::run::Run;
use python_server::PyServer;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rl_runs_on_a_python_env_over_http() {
    let server = PyServer::start_env("guess_number:GuessNumber", &[]);
    let mut config = common::tiny_config(1);
    // Room for the env's prompt and tool list in the byte-level chat format.
    config.model.max_seq_len = 768;
    config.env = EnvConfig {
        id: "guess-number".into(),
        server: Some(server.base()),
        max_turns: Some(6),
        ..EnvConfig::default()
    };
    let dir = tempfile::tempdir().unwrap();
    let run = Run::new(config, dir.path()).unwrap();
    assert_eq!(run.factory.id(), "guess-number");
    let err = run.write_demonstrations().await.unwrap_err().to_string();
    assert!(err.contains("no reference solver"), "{err}");

    let learner = run.learner(run.config.rl.lr, None).unwrap();
    let (learner, summary) = run.rl(learner, 0).await.unwrap();
    assert_eq!(summary.steps, 3);
    let (sampled, bad) =
        agentrl_core::read_jsonl(&dir.path().join("samples/rl_step_000003.jsonl")).unwrap();
    assert!(bad.is_empty());
    assert_eq!(sampled.len(), 2 * 3);
    for t in &sampled {
        assert_eq!(t.env_id, "guess-number");
        assert_ne!(t.outcome, Outcome::EnvError, "{t:?}");
        assert!(!t.turns.is_empty(), "the policy acted: {t:?}");
    }
    let report = run.evaluate(&learner, "after_rl", 3).await.unwrap();
    assert_eq!(report.tasks, 6);
}
