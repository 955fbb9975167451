//! `agentrl_env::check` (Gymnasium's `check_env`): a built-in env passes, and an env that
//! ignores malformed actions, crashes on one and never lets its solver win fails with each
//! failure named.

use std::sync::Arc;

use agentrl_core::{Env, Message, Observation, Split, Step, StepInfo, Task};
use agentrl_env::check::MIN_SOLVER_SUCCESS;
use agentrl_env::{EnvFactory, Solver, check, lookup};
use async_trait::async_trait;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn maze_passes_with_its_solver_and_every_malformed_action_answered() {
    let report = check(lookup("maze").unwrap(), 20).await.unwrap();
    assert!(report.passed(), "{report}");
    assert_eq!(report.env_id, "maze");
    assert_eq!(report.tasks, 20);
    assert_eq!(report.solver_success, 1.0);
    assert!(report.solver_errors.is_empty());
    assert!(report.random_success < MIN_SOLVER_SUCCESS, "{report}");
    assert_eq!(report.malformed.len(), 4);
    assert!(
        report.malformed.iter().all(|m| m.outcome.is_ok()),
        "{report}"
    );
    report.ensure_passed().unwrap();

    let text = report.to_string();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 7, "{text}");
    assert_eq!(lines[0], "reference solver: success 1.000 on 20 test tasks");
    assert!(
        lines[1].starts_with("random policy:    success ")
            && lines[1].ends_with(" on 20 test tasks"),
        "{text}"
    );
    assert_eq!(
        text.matches("error observation, no crash").count(),
        4,
        "{text}"
    );
    assert!(
        lines[2].starts_with("malformed action (arguments are not JSON): error observation"),
        "{text}"
    );
    assert_eq!(lines[6], "maze: ok");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zero_tasks_means_one() {
    let report = check(lookup("arith-calc").unwrap(), 0).await.unwrap();
    assert_eq!(report.tasks, 1);
    assert!(report.passed(), "{report}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_careless_env_fails_with_every_failure_named() {
    let careless = Arc::new(Careless(lookup("arith-calc").unwrap()));
    let report = check(careless, 5).await.unwrap();
    assert!(!report.passed());
    assert_eq!(report.solver_success, 0.0);

    let failures = report.failures();
    assert_eq!(failures.len(), 5, "{failures:?}");
    assert_eq!(
        failures[0],
        format!("reference solver success 0.000 is below {MIN_SOLVER_SUCCESS}")
    );
    assert_eq!(
        failures[1],
        "arguments are not JSON: not flagged as an invalid action"
    );
    assert!(
        failures[4].starts_with("empty message: the env crashed"),
        "{failures:?}"
    );

    let text = report.to_string();
    assert_eq!(text.matches(": FAILED: ").count(), 4, "{text}");
    assert!(!text.contains(": ok"), "{text}");

    let err = report.ensure_passed().unwrap_err().to_string();
    assert!(
        err.contains("careless") && err.contains("check failed: "),
        "{err}"
    );
    assert!(err.contains(&failures.join("; ")), "{err}");
}

/// `arith-calc`'s tasks and solver over an env that ends every episode unsolved on any action,
/// flags nothing as invalid and panics on an empty message.
struct Careless(Arc<dyn EnvFactory>);

impl EnvFactory for Careless {
    fn id(&self) -> &str {
        "careless"
    }
    fn task(&self, split: Split, index: u64) -> Task {
        self.0.task(split, index)
    }
    fn make(&self) -> Box<dyn Env> {
        Box::new(CarelessEnv)
    }
    fn max_turns(&self) -> usize {
        self.0.max_turns()
    }
    fn solver(&self, seed: u64) -> Box<dyn Solver> {
        self.0.solver(seed)
    }
}

struct CarelessEnv;

#[async_trait]
impl Env for CarelessEnv {
    fn id(&self) -> &str {
        "careless"
    }
    async fn reset(&mut self, _task: &Task) -> agentrl_core::Result<Observation> {
        Ok(Observation {
            messages: vec![Message::user("Compute 1 + 1")],
            tools: Vec::new(),
        })
    }
    async fn step(&mut self, action: &Message) -> agentrl_core::Result<Step> {
        assert!(
            !action.text().is_empty() || !action.tool_calls.is_empty(),
            "an empty message"
        );
        Ok(Step {
            messages: vec![Message::user("noted")],
            reward: 0.0,
            terminated: true,
            truncated: false,
            info: StepInfo {
                success: Some(false),
                ..StepInfo::default()
            },
        })
    }
}
