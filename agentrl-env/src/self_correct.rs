//! [`SelfCorrect`]: lets the agent retry after a wrong final answer.

use agentrl_core::{Env, Error, Message, Observation, Result, Step, Task};
use async_trait::async_trait;

/// Key of the `info.extra` counter set on the final step: 1 when the first answer was right.
pub const FIRST_TRY_SUCCESS: &str = "first_try_success";
/// Key of the `info.extra` counter set on the final step: 1 when a retry was right.
pub const CORRECTED_SUCCESS: &str = "corrected_success";
/// Key of the `info.extra` value set on every answer step: wrong answers so far.
pub const WRONG_ANSWERS: &str = "wrong_answers";

/// Gives the agent up to `max_retries` more tries after a wrong final answer, for any env
/// with a checkable final answer.
///
/// A terminated inner step whose `info.success` is `Some(false)` does not end the episode
/// while retries are left: the step comes back not terminated, with `success` cleared, a user
/// message saying the answer was wrong (with the checker's `info.extra["feedback"]` when the
/// env gives one), and the inner env reset on the same task so it accepts a new answer (each
/// try gets the inner env's own turn limit; the reset's observation is not repeated). The final
/// step carries [`FIRST_TRY_SUCCESS`] and [`CORRECTED_SUCCESS`] (0 or 1) in `info.extra`.
#[derive(Debug)]
pub struct SelfCorrect<E: Env> {
    inner: E,
    max_retries: usize,
    task: Option<Task>,
    wrong: usize,
}

impl<E: Env> SelfCorrect<E> {
    /// Wraps `inner`, allowing `max_retries` tries after the first wrong answer.
    pub fn new(inner: E, max_retries: usize) -> Self {
        SelfCorrect {
            inner,
            max_retries,
            task: None,
            wrong: 0,
        }
    }

    /// Wrong answers given so far in the current episode.
    pub fn wrong_answers(&self) -> usize {
        self.wrong
    }

    /// The wrapped env.
    pub fn inner(&self) -> &E {
        &self.inner
    }
}

/// The message telling the agent its answer was wrong.
fn retry_message(step: &Step, tries_left: usize) -> Message {
    let feedback = step
        .info
        .extra
        .get("feedback")
        .and_then(|f| f.as_str())
        .map(|f| format!(" ({f})"))
        .unwrap_or_default();
    let tries = if tries_left == 1 { "try" } else { "tries" };
    Message::user(format!(
        "Wrong answer{feedback}. Try again ({tries_left} {tries} left)."
    ))
}

#[async_trait]
impl<E: Env> Env for SelfCorrect<E> {
    fn id(&self) -> &str {
        self.inner.id()
    }

    async fn reset(&mut self, task: &Task) -> Result<Observation> {
        self.task = None;
        self.wrong = 0;
        let observation = self.inner.reset(task).await?;
        self.task = Some(task.clone());
        Ok(observation)
    }

    async fn step(&mut self, action: &Message) -> Result<Step> {
        let mut step = self.inner.step(action).await?;
        let wrong = step.terminated && step.info.success == Some(false);
        if wrong {
            self.wrong += 1;
            step.info
                .extra
                .insert(WRONG_ANSWERS.into(), self.wrong.into());
        }
        if wrong && self.wrong <= self.max_retries {
            let task = self
                .task
                .as_ref()
                .ok_or_else(|| Error::env(self.inner.id(), "step called before reset"))?;
            self.inner.reset(task).await?;
            let tries_left = self.max_retries + 1 - self.wrong;
            step.messages.push(retry_message(&step, tries_left));
            step.terminated = false;
            step.info.success = None;
            return Ok(step);
        }
        if step.done() {
            let success = step.info.success == Some(true);
            let first = u32::from(success && self.wrong == 0);
            let corrected = u32::from(success && self.wrong > 0);
            step.info
                .extra
                .insert(FIRST_TRY_SUCCESS.into(), first.into());
            step.info
                .extra
                .insert(CORRECTED_SUCCESS.into(), corrected.into());
        }
        Ok(step)
    }
}
