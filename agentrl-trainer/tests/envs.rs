//! The `[env]` section: one env in process, an env on an env server (registered or known only
//! to the server), a weighted mixture; clear errors; and a short RL run on a mixture whose second
//! env runs on a real env server on 127.0.0.1.

mod common;

use agentrl_core::Split;
use agentrl_env::lookup;
use agentrl_env::protocol::{ServerConfig, serve};
use agentrl_trainer::config::{EnvConfig, RunConfig};
use agentrl_trainer::envs::{check_envs, env_factory};
use agentrl_trainer::metrics::read_metrics;
use agentrl_trainer::run::Run;

fn env_section(toml_text: &str) -> EnvConfig {
    #[derive(serde::Deserialize)]
    struct File {
        env: EnvConfig,
    }
    toml::from_str::<File>(toml_text).unwrap().env
}

fn error_of(toml_text: &str) -> String {
    match env_factory(&env_section(toml_text)) {
        Ok(f) => panic!("expected an error, got env `{}`", f.id()),
        Err(e) => e.to_string(),
    }
}

#[test]
fn one_env_or_a_weighted_mixture() {
    let one = env_factory(&env_section("[env]\nid = \"maze\"\n")).unwrap();
    assert_eq!(one.id(), "maze");
    let mix = env_factory(&env_section(
        "[[env.mix]]\nid = \"arith-calc\"\nweight = 3\n[[env.mix]]\nid = \"maze\"\n",
    ))
    .unwrap();
    assert_eq!(mix.id(), "mix(arith-calc+maze)");
    let arith = (0..400)
        .filter(|&i| mix.task(Split::Train, i).env_id == "arith-calc")
        .count();
    assert!(
        (260..=340).contains(&arith),
        "{arith} of 400 arith-calc tasks"
    );
}

#[tokio::test]
async fn max_turns_makes_a_registered_env_single_turn_in_process_and_in_a_mixture() {
    let one = env_factory(&env_section("[env]\nid = \"maze\"\nmax_turns = 1\n")).unwrap();
    assert_eq!((one.id(), one.max_turns()), ("maze", 1));
    let task = one.task(Split::Test, 0);
    let mut env = one.make();
    let obs = env.reset(&task).await.unwrap();
    let mut solver = one.solver(0);
    let step = env.step(&solver.act(&task, &obs.messages)).await.unwrap();
    assert!(step.truncated || step.terminated, "{step:?}");
    assert!(
        step.truncated,
        "a one-step maze episode is cut by the limit: {step:?}"
    );
    let mix = env_factory(&env_section(
        "[[env.mix]]\nid = \"maze\"\nmax_turns = 2\n[[env.mix]]\nid = \"arith-calc\"\n",
    ))
    .unwrap();
    let maze_task = (0..100)
        .map(|i| mix.task(Split::Train, i))
        .find(|t| t.env_id == "maze")
        .unwrap();
    let mut env = mix.make();
    let obs = env.reset(&maze_task).await.unwrap();
    let mut solver = lookup("maze").unwrap().solver(0);
    let mut messages = obs.messages;
    let mut steps = 0;
    loop {
        let action = solver.act(&maze_task, &messages);
        messages.push(action.clone());
        let step = env.step(&action).await.unwrap();
        steps += 1;
        messages.extend(step.messages.iter().cloned());
        if step.done() {
            break;
        }
    }
    assert!(steps <= 2, "{steps} steps");
}

#[test]
fn bad_env_sections_say_what_to_change() {
    let both = "[env]\nid = \"maze\"\n[[env.mix]]\nid = \"arith-calc\"\n";
    assert!(error_of(both).contains("not both"));
    assert!(error_of("[env]\n").contains("name the env"));
    assert!(error_of("[env]\nid = \"nope\"\n").contains("known env ids"));
    let token = "[env]\nid = \"maze\"\ntoken = \"t\"\n";
    assert!(error_of(token).contains("only applies with a server"));
    let timeout = "[env]\nid = \"maze\"\ntimeout_secs = 5\n";
    assert!(error_of(timeout).contains("timeout_secs only applies with a server"));
    let zero = "[env]\nid = \"maze\"\nserver = \"127.0.0.1:1\"\ntimeout_secs = 0\n";
    assert!(error_of(zero).contains("positive number of seconds"));
    let raise = "[env]\nid = \"maze\"\nmax_turns = 1000\n";
    assert!(error_of(raise).contains("cannot raise it"));
    let weight = "[[env.mix]]\nid = \"maze\"\nweight = 0\n";
    assert!(error_of(weight).contains("weight 0"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn servers_are_checked_before_the_run() {
    let (addr, handle) = serve(
        "127.0.0.1:0".parse().unwrap(),
        vec![lookup("maze").unwrap()],
        ServerConfig::default(),
    )
    .await
    .unwrap();
    let remote = env_section(&format!(
        "[env]\nid = \"maze\"\nserver = \"http://{addr}\"\n"
    ));
    assert_eq!(env_factory(&remote).unwrap().id(), "maze");
    check_envs(&remote, env_factory(&remote).unwrap().as_ref())
        .await
        .unwrap();
    // A name only a server could know: the factory is made, and the check says what is served.
    let served = env_section(&format!(
        "[env]\nid = \"guess-number\"\nserver = \"http://{addr}\"\nmax_turns = 6\n"
    ));
    let factory = env_factory(&served).unwrap();
    assert_eq!((factory.id(), factory.max_turns()), ("guess-number", 6));
    assert!(!factory.has_solver());
    let err = check_envs(&served, factory.as_ref())
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("guess-number") && err.contains("maze"),
        "{err}"
    );
    handle.shutdown().await.unwrap();
    let dead = env_section(&format!(
        "[env]\nid = \"maze\"\nserver = \"http://{addr}\"\n"
    ));
    let err = check_envs(&dead, env_factory(&dead).unwrap().as_ref())
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains(&addr.to_string()), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mixture_with_a_remote_env_trains_and_reports_both_envs() {
    let (addr, handle) = serve(
        "127.0.0.1:0".parse().unwrap(),
        vec![lookup("math-reasoning").unwrap()],
        ServerConfig::default(),
    )
    .await
    .unwrap();
    let mut config: RunConfig = common::tiny_config(1);
    config.env = env_section(&format!(
        "[[env.mix]]\nid = \"arith-calc\"\n[[env.mix]]\nid = \"math-reasoning\"\nserver = \"http://{addr}\"\n"
    ));
    config.rl.tasks_per_step = 4;
    let dir = tempfile::tempdir().unwrap();
    let run = Run::new(config, dir.path()).unwrap();
    let demos = run.write_demonstrations().await.unwrap();
    // The demonstrations of math-reasoning were played on the server.
    let (recorded, _) = agentrl_core::read_jsonl(&demos).unwrap();
    for env in ["arith-calc", "math-reasoning"] {
        let n = recorded.iter().filter(|t| t.env_id == env).count();
        assert!(n > 10, "{n} demonstrations of {env}");
    }
    let learner = run.sft(&demos).unwrap();
    let (learner, summary) = run.rl(learner, 0).await.unwrap();
    assert_eq!(summary.steps, 3);
    let (sampled, _) =
        agentrl_core::read_jsonl(&dir.path().join("samples/rl_step_000003.jsonl")).unwrap();
    assert!(
        sampled
            .iter()
            .all(|t| t.env_id == "arith-calc" || t.env_id == "math-reasoning")
    );
    let records = read_metrics(&dir.path().join("metrics.jsonl")).unwrap();
    let steps: Vec<_> = records.iter().filter(|r| r["kind"] == "rl_step").collect();
    assert_eq!(steps.len(), 3);
    // Every step's metrics are also written per env, and they add up to the step's.
    for step in &steps {
        let per_task = step["per_task"].as_object().expect("per_task object");
        assert!(!per_task.is_empty());
        let episodes: f64 = per_task
            .values()
            .map(|t| t["episodes"].as_f64().unwrap())
            .sum();
        let successes: f64 = per_task
            .values()
            .map(|t| t["episodes"].as_f64().unwrap() * t["success_rate"].as_f64().unwrap())
            .sum();
        let rewards: f64 = per_task
            .values()
            .map(|t| t["episodes"].as_f64().unwrap() * t["reward_mean"].as_f64().unwrap())
            .sum();
        assert_eq!(episodes, 4.0 * run.config.rl.group_size as f64);
        let close = |a: f64, b: f64| (a - b).abs() < 1e-9;
        assert!(close(
            successes / episodes,
            step["success_rate"].as_f64().unwrap()
        ));
        assert!(close(
            rewards / episodes,
            step["reward_mean"].as_f64().unwrap()
        ));
        for (env, task) in per_task {
            assert!(env == "arith-calc" || env == "math-reasoning", "{env}");
            for key in [
                "turns_mean",
                "generated_tokens_mean",
                "invalid_actions_per_episode",
                "truncated_rate",
                "advantage_mean_before_norm",
                "advantage_std_before_norm",
                "advantage_mean",
                "advantage_std",
            ] {
                assert!(task[key].is_number(), "{env}: {key} missing in {task}");
            }
        }
    }
    // Evaluation plays `eval.tasks` held-out tasks of each env and reports each.
    let report = run.evaluate(&learner, "after_rl", 3).await.unwrap();
    assert_eq!(
        report.per_task.keys().collect::<Vec<_>>(),
        ["arith-calc", "math-reasoning"]
    );
    for stats in report.per_task.values() {
        assert_eq!(stats.episodes, run.config.eval.tasks);
        assert!(
            stats.success_low <= stats.success_rate && stats.success_rate <= stats.success_high
        );
    }
    assert_eq!(report.tasks, 2 * run.config.eval.tasks);
    let png = run.plot().unwrap();
    assert!(std::fs::metadata(png).unwrap().len() > 1000);
    handle.shutdown().await.unwrap();
}
