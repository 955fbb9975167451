//! Env wrappers that add episode rules on top of any [`Env`].

use agentrl_core::{Env, Error, Message, Observation, Result, Step, Task};
use async_trait::async_trait;

/// Where a wrapped episode stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// No successful `reset` yet.
    Idle,
    /// An episode is in progress.
    Running,
    /// The episode ended (terminated or truncated).
    Done,
}

/// Ends an episode after `max_turns` steps: the step that reaches the limit comes back with
/// `truncated = true` unless the inner env terminated on it.
///
/// It also enforces the episode protocol: stepping before `reset` or after the episode ended is
/// an [`Error::Env`].
#[derive(Debug)]
pub struct TurnLimit<E: Env> {
    inner: E,
    max_turns: usize,
    steps: usize,
    phase: Phase,
}

impl<E: Env> TurnLimit<E> {
    /// Wraps `inner` so that each episode lasts at most `max_turns` steps.
    pub fn new(inner: E, max_turns: usize) -> Self {
        TurnLimit {
            inner,
            max_turns,
            steps: 0,
            phase: Phase::Idle,
        }
    }

    /// The step limit per episode.
    pub fn max_turns(&self) -> usize {
        self.max_turns
    }

    /// Steps taken in the current episode.
    pub fn steps(&self) -> usize {
        self.steps
    }

    /// The wrapped env.
    pub fn inner(&self) -> &E {
        &self.inner
    }

    /// Unwraps the inner env.
    pub fn into_inner(self) -> E {
        self.inner
    }
}

#[async_trait]
impl<E: Env> Env for TurnLimit<E> {
    fn id(&self) -> &str {
        self.inner.id()
    }

    async fn reset(&mut self, task: &Task) -> Result<Observation> {
        self.phase = Phase::Idle;
        self.steps = 0;
        let observation = self.inner.reset(task).await?;
        self.phase = Phase::Running;
        Ok(observation)
    }

    async fn step(&mut self, action: &Message) -> Result<Step> {
        match self.phase {
            Phase::Idle => {
                return Err(Error::env(self.inner.id(), "step called before reset"));
            }
            Phase::Done => {
                return Err(Error::env(
                    self.inner.id(),
                    format!(
                        "step called after the episode ended (after {} steps); call reset first",
                        self.steps
                    ),
                ));
            }
            Phase::Running => {}
        }
        let mut step = self.inner.step(action).await?;
        self.steps += 1;
        if !step.terminated && self.steps >= self.max_turns {
            step.truncated = true;
        }
        if step.done() {
            self.phase = Phase::Done;
        }
        Ok(step)
    }
}

#[cfg(test)]
mod tests {
    use agentrl_core::{Split, StepInfo};

    use super::*;

    /// Terminates on an assistant message saying "stop"; otherwise goes on forever.
    struct Echo;

    #[async_trait]
    impl Env for Echo {
        fn id(&self) -> &str {
            "echo"
        }
        async fn reset(&mut self, _task: &Task) -> Result<Observation> {
            Ok(Observation {
                messages: vec![Message::user("go")],
                tools: Vec::new(),
            })
        }
        async fn step(&mut self, action: &Message) -> Result<Step> {
            Ok(Step {
                messages: vec![Message::user("again")],
                reward: 0.0,
                terminated: action.text() == "stop",
                truncated: false,
                info: StepInfo::default(),
            })
        }
    }

    fn task() -> Task {
        Task {
            env_id: "echo".into(),
            id: "t".into(),
            split: Split::Train,
            data: serde_json::Value::Null,
        }
    }

    #[tokio::test]
    async fn truncates_on_the_limit_step() {
        let mut env = TurnLimit::new(Echo, 3);
        env.reset(&task()).await.unwrap();
        for _ in 0..2 {
            let step = env.step(&Message::assistant("more")).await.unwrap();
            assert!(!step.done());
        }
        let last = env.step(&Message::assistant("more")).await.unwrap();
        assert!(last.truncated && !last.terminated);
        assert_eq!(env.steps(), 3);
        let err = env.step(&Message::assistant("more")).await.unwrap_err();
        assert!(matches!(err, Error::Env { .. }), "{err}");
    }

    #[tokio::test]
    async fn termination_on_the_limit_step_is_not_truncation() {
        let mut env = TurnLimit::new(Echo, 1);
        env.reset(&task()).await.unwrap();
        let step = env.step(&Message::assistant("stop")).await.unwrap();
        assert!(step.terminated && !step.truncated);
    }

    #[tokio::test]
    async fn reset_starts_a_new_episode() {
        let mut env = TurnLimit::new(Echo, 2);
        env.reset(&task()).await.unwrap();
        env.step(&Message::assistant("stop")).await.unwrap();
        assert!(env.step(&Message::assistant("x")).await.is_err());
        env.reset(&task()).await.unwrap();
        assert_eq!(env.steps(), 0);
        assert!(!env.step(&Message::assistant("x")).await.unwrap().done());
    }

    #[tokio::test]
    async fn step_before_reset_is_an_error() {
        let mut env = TurnLimit::new(Echo, 2);
        let err = env.step(&Message::assistant("x")).await.unwrap_err();
        assert!(matches!(err, Error::Env { .. }), "{err}");
    }
}
