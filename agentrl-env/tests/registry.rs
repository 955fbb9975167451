//! A third-party env registers itself in the process-wide registry (no edit of `agentrl-env`):
//! `lookup` finds it, `env_ids` lists it, and a second registration of its id is refused.

use std::sync::Arc;

use agentrl_core::{Env, Error, Message, Observation, Result, Split, Step, StepInfo, Task};
use agentrl_env::{EnvFactory, Solver, TurnLimit, env_ids, lookup, register, run_solver_episode};
use async_trait::async_trait;

const ECHO_ID: &str = "test-echo";

/// Say the task's word back.
#[derive(Default)]
struct Echo;

struct EchoEnv {
    word: String,
}

#[async_trait]
impl Env for EchoEnv {
    fn id(&self) -> &str {
        ECHO_ID
    }

    async fn reset(&mut self, task: &Task) -> Result<Observation> {
        self.word = task.data["word"].as_str().unwrap_or_default().to_string();
        Ok(Observation {
            messages: vec![Message::user(format!("Say {}", self.word))],
            tools: vec![],
        })
    }

    async fn step(&mut self, action: &Message) -> Result<Step> {
        let success = action.text().trim() == self.word;
        Ok(Step {
            messages: vec![],
            reward: f64::from(u8::from(success)),
            terminated: true,
            truncated: false,
            info: StepInfo {
                success: Some(success),
                ..StepInfo::default()
            },
        })
    }
}

struct EchoExpert;

impl Solver for EchoExpert {
    fn act(&mut self, task: &Task, _history: &[Message]) -> Message {
        Message::assistant(task.data["word"].as_str().unwrap_or_default())
    }
}

impl EnvFactory for Echo {
    fn id(&self) -> &str {
        ECHO_ID
    }

    fn description(&self) -> &str {
        "say the word back"
    }

    fn task(&self, split: Split, index: u64) -> Task {
        Task {
            env_id: ECHO_ID.into(),
            id: format!("{split}:{index}"),
            split,
            data: serde_json::json!({ "word": format!("w{index}") }),
        }
    }

    fn make(&self) -> Box<dyn Env> {
        Box::new(TurnLimit::new(
            EchoEnv {
                word: String::new(),
            },
            1,
        ))
    }

    fn max_turns(&self) -> usize {
        1
    }

    fn solver(&self, _seed: u64) -> Box<dyn Solver> {
        Box::new(EchoExpert)
    }
}

#[tokio::test]
async fn a_registered_env_is_looked_up_and_listed() {
    assert!(!env_ids().contains(&ECHO_ID));
    assert!(lookup(ECHO_ID).is_err());

    register(ECHO_ID, || Arc::new(Echo)).unwrap();

    assert!(env_ids().contains(&ECHO_ID), "{:?}", env_ids());
    assert!(env_ids().contains(&"arith-calc"), "built-in envs stay");
    let factory = lookup(ECHO_ID).unwrap();
    assert_eq!(factory.id(), ECHO_ID);
    assert_eq!(factory.description(), "say the word back");
    let task = factory.task(Split::Test, 4);
    let mut solver = factory.solver(0);
    let episode = run_solver_episode(&*factory, &mut *solver, &task)
        .await
        .unwrap();
    assert!(episode.success);

    let err = register(ECHO_ID, || Arc::new(Echo)).unwrap_err();
    assert!(matches!(err, Error::Config(_)));
    assert!(err.to_string().contains(ECHO_ID), "{err}");
    let err = register("arith-calc", || Arc::new(Echo)).unwrap_err();
    assert!(err.to_string().contains("`arith-calc`"), "{err}");
}
