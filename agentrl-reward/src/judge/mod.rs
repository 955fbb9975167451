//! [`LlmJudge`]: a model grades the trajectory against a rubric.
//!
//! The model sits behind the small [`JudgeBackend`] trait (text in, text out), so this crate
//! stays free of any model runtime; `agentrl-trainer` adapts its policies to it. The judge
//! survives messy answers ([`parse_score`]), caches verdicts by a hash of the prompt, bounds
//! the calls in flight, and falls back to a configured value on nonsense, errors and
//! time-outs, counting every fallback.

pub mod parse;
pub mod prompt;

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use agentrl_core::{Error, Result, RewardBreakdown, RewardFn, Trajectory, stable_hash};
use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use tokio::sync::Semaphore;

use crate::build::{BuildReward, RewardContext, finite, invalid, positive_ms};

pub use crate::judge_backend::JudgeBackend;
pub use parse::{ScoreScale, parse_score};
pub use prompt::{judge_prompt, transcript};

/// How an [`LlmJudge`] asks, reads and falls back.
#[derive(Debug, Clone, PartialEq)]
pub struct JudgeSettings {
    /// What to grade and how; placed before the conversation.
    pub rubric: String,
    /// The grade range the judge is asked for.
    pub scale: ScoreScale,
    /// Score in `[0, 1]` used when the judge's answer has no usable grade, fails or times out.
    pub fallback: f64,
    /// How long one backend call may take.
    pub timeout: Duration,
    /// Backend calls in flight at once (at least 1).
    pub max_concurrency: usize,
    /// Verdicts kept in the cache (0 disables it); once full, new verdicts are not kept.
    pub cache_capacity: usize,
    /// The conversation is cut to its last this many characters.
    pub max_transcript_chars: usize,
}

impl Default for JudgeSettings {
    /// Grades 0–10, fallback 0, 30 s time-out, 4 calls at once, 10 000 cached verdicts,
    /// 4 000 characters of conversation, and a generic rubric.
    fn default() -> Self {
        JudgeSettings {
            rubric: "Grade how well the assistant solved the user's task.".to_string(),
            scale: ScoreScale::default(),
            fallback: 0.0,
            timeout: Duration::from_secs(30),
            max_concurrency: 4,
            cache_capacity: 10_000,
            max_transcript_chars: 4_000,
        }
    }
}

/// What came back from asking the backend.
enum Answer {
    /// A usable grade in `[0, 1]`.
    Grade(f64),
    /// An answer without a usable grade (cached like a grade: asking again would not help).
    Nonsense,
    /// The backend failed or timed out (not cached).
    Failed,
}

/// A model's grade of the trajectory, in `[0, 1]`.
///
/// Breakdown: `judge` (the grade, or the fallback) and `judge_fallback` (1.0 when the fallback
/// was used, else 0.0). The cache is keyed by a stable 64-bit hash of the full prompt.
pub struct LlmJudge {
    backend: Arc<dyn JudgeBackend>,
    settings: JudgeSettings,
    permits: Semaphore,
    cache: Mutex<HashMap<u64, Option<f64>>>,
    fallbacks: AtomicU64,
    failures: AtomicU64,
    backend_calls: AtomicU64,
    last_failure: Mutex<Option<String>>,
}

impl LlmJudge {
    /// Name of the reward's grade part in breakdowns.
    pub const NAME: &'static str = "judge";
    /// Name of the part that is 1.0 when the fallback was used.
    pub const FALLBACK_PART: &'static str = "judge_fallback";

    /// A judge asking `backend` with `settings` (a `max_concurrency` of 0 counts as 1).
    pub fn new(backend: Arc<dyn JudgeBackend>, settings: JudgeSettings) -> Self {
        let permits = settings.max_concurrency.clamp(1, Semaphore::MAX_PERMITS);
        LlmJudge {
            backend,
            permits: Semaphore::new(permits),
            settings,
            cache: Mutex::new(HashMap::new()),
            fallbacks: AtomicU64::new(0),
            failures: AtomicU64::new(0),
            backend_calls: AtomicU64::new(0),
            last_failure: Mutex::new(None),
        }
    }

    /// The settings.
    pub fn settings(&self) -> &JudgeSettings {
        &self.settings
    }

    /// Trajectories scored with the fallback so far (nonsense, errors and time-outs).
    pub fn fallbacks(&self) -> u64 {
        self.fallbacks.load(Ordering::Relaxed)
    }

    /// Backend calls that failed or timed out so far (each also counts as a fallback).
    pub fn failures(&self) -> u64 {
        self.failures.load(Ordering::Relaxed)
    }

    /// Why the most recent failed backend call failed, if any did.
    pub fn last_failure(&self) -> Option<String> {
        match self.last_failure.lock() {
            Ok(last) => last.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    /// Backend calls made so far (cache hits make none).
    pub fn backend_calls(&self) -> u64 {
        self.backend_calls.load(Ordering::Relaxed)
    }

    /// The prompt the judge sends for `trajectory`.
    pub fn prompt_for(&self, trajectory: &Trajectory) -> String {
        let s = &self.settings;
        judge_prompt(
            &s.rubric,
            &transcript(trajectory, s.max_transcript_chars),
            &s.scale,
        )
    }

    fn cached(&self, key: u64) -> Option<Option<f64>> {
        let cache = match self.cache.lock() {
            Ok(cache) => cache,
            Err(poisoned) => poisoned.into_inner(),
        };
        cache.get(&key).copied()
    }

    fn remember(&self, key: u64, verdict: Option<f64>) {
        let mut cache = match self.cache.lock() {
            Ok(cache) => cache,
            Err(poisoned) => poisoned.into_inner(),
        };
        if cache.len() < self.settings.cache_capacity {
            cache.insert(key, verdict);
        }
    }

    async fn ask(&self, prompt: &str) -> Result<Answer> {
        let key = stable_hash(prompt);
        if let Some(verdict) = self.cached(key) {
            return Ok(verdict.map_or(Answer::Nonsense, Answer::Grade));
        }
        let _permit = self.permits.acquire().await.map_err(|_| Error::Reward {
            name: Self::NAME.to_string(),
            message: "the concurrency limiter was closed".to_string(),
        })?;
        self.backend_calls.fetch_add(1, Ordering::Relaxed);
        let text = match tokio::time::timeout(self.settings.timeout, self.backend.complete(prompt))
            .await
        {
            Ok(Ok(text)) => text,
            Ok(Err(e)) => return Ok(self.failed(e.to_string())),
            Err(_) => {
                let after = self.settings.timeout;
                return Ok(self.failed(format!("no answer within {after:?}")));
            }
        };
        let verdict = parse_score(&text, &self.settings.scale);
        self.remember(key, verdict);
        Ok(verdict.map_or(Answer::Nonsense, Answer::Grade))
    }
}

impl LlmJudge {
    fn failed(&self, why: String) -> Answer {
        self.failures.fetch_add(1, Ordering::Relaxed);
        match self.last_failure.lock() {
            Ok(mut last) => *last = Some(why),
            Err(poisoned) => *poisoned.into_inner() = Some(why),
        }
        Answer::Failed
    }
}

impl std::fmt::Debug for LlmJudge {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LlmJudge")
            .field("settings", &self.settings)
            .field("fallbacks", &self.fallbacks())
            .field("backend_calls", &self.backend_calls())
            .finish()
    }
}

#[async_trait]
impl RewardFn for LlmJudge {
    fn name(&self) -> &str {
        Self::NAME
    }

    async fn score(&self, trajectory: &Trajectory) -> Result<RewardBreakdown> {
        let prompt = self.prompt_for(trajectory);
        let (value, fell_back) = match self.ask(&prompt).await? {
            Answer::Grade(grade) => (grade, false),
            Answer::Nonsense | Answer::Failed => {
                self.fallbacks.fetch_add(1, Ordering::Relaxed);
                (self.settings.fallback, true)
            }
        };
        let mut out = RewardBreakdown::single(Self::NAME, value);
        out.parts.insert(
            Self::FALLBACK_PART.to_string(),
            f64::from(u8::from(fell_back)),
        );
        Ok(out)
    }
}

/// An `llm_judge` as written in a config: `{ type = "llm_judge", rubric = "Grade it." }`, the
/// rest optional. Building it needs a judge backend in the [`RewardContext`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LlmJudgeConfig {
    /// What to grade and how.
    pub rubric: String,
    /// Worst grade the judge is asked for (default 0).
    #[serde(default)]
    pub scale_min: f64,
    /// Best grade the judge is asked for (default 10).
    #[serde(default = "default_scale_max")]
    pub scale_max: f64,
    /// Score in `[0, 1]` for answers without a usable grade, errors and time-outs (default 0).
    #[serde(default)]
    pub fallback: f64,
    /// Time limit of one judge call in milliseconds (default 30 000).
    #[serde(default = "default_timeout_ms")]
    pub timeout_ms: u64,
    /// Judge calls in flight at once (default 4).
    #[serde(default = "default_max_concurrency")]
    pub max_concurrency: usize,
    /// Verdicts cached by prompt (default 10 000; 0 disables the cache).
    #[serde(default = "default_cache_capacity")]
    pub cache_capacity: usize,
    /// Characters of the conversation shown to the judge, from its end (default 4 000).
    #[serde(default = "default_max_transcript_chars")]
    pub max_transcript_chars: usize,
}

/// Best grade when the config gives none.
fn default_scale_max() -> f64 {
    10.0
}

/// Time limit of one judge call when the config gives none: 30 s.
fn default_timeout_ms() -> u64 {
    30_000
}

/// Judge calls in flight when the config gives no number.
fn default_max_concurrency() -> usize {
    4
}

/// Verdicts cached when the config gives no number.
fn default_cache_capacity() -> usize {
    10_000
}

/// Characters of conversation shown when the config gives no number.
fn default_max_transcript_chars() -> usize {
    4_000
}

impl BuildReward for LlmJudgeConfig {
    fn build_at(&self, path: &str, context: &RewardContext) -> Result<Box<dyn RewardFn>> {
        let (scale_min, scale_max, fallback) = (self.scale_min, self.scale_max, self.fallback);
        if self.rubric.trim().is_empty() {
            return Err(invalid(format!(
                "{path}.rubric is blank; say what the judge should grade"
            )));
        }
        finite(path, "scale_min", scale_min)?;
        finite(path, "scale_max", scale_max)?;
        if scale_max <= scale_min {
            return Err(invalid(format!(
                "{path}.scale_max must be greater than {path}.scale_min ({scale_min}), got {scale_max}"
            )));
        }
        if !(0.0..=1.0).contains(&fallback) {
            return Err(invalid(format!(
                "{path}.fallback must be in [0, 1] (it stands in for a normalised grade), got {fallback}"
            )));
        }
        positive_ms(path, "timeout_ms", self.timeout_ms)?;
        let max_concurrency = self.max_concurrency;
        if max_concurrency == 0 || max_concurrency > Semaphore::MAX_PERMITS {
            return Err(invalid(format!(
                "{path}.max_concurrency must be at least 1, got {max_concurrency}"
            )));
        }
        if self.max_transcript_chars == 0 {
            return Err(invalid(format!(
                "{path}.max_transcript_chars must be at least 1"
            )));
        }
        let Some(backend) = context.judge.clone() else {
            return Err(invalid(format!(
                "{path} is an llm_judge but no judge backend was given: build the reward with \
                 RewardConfig::build_with and a RewardContext holding one (with the agentrl CLI, \
                 pass --judge-checkpoint to `agentrl reward`)"
            )));
        };
        let settings = JudgeSettings {
            rubric: self.rubric.clone(),
            scale: ScoreScale {
                min: scale_min,
                max: scale_max,
            },
            fallback,
            timeout: Duration::from_millis(self.timeout_ms),
            max_concurrency,
            cache_capacity: self.cache_capacity,
            max_transcript_chars: self.max_transcript_chars,
        };
        Ok(Box::new(LlmJudge::new(backend, settings)))
    }

    fn part_names(&self) -> Vec<&'static str> {
        vec![LlmJudge::NAME, LlmJudge::FALLBACK_PART]
    }

    fn needs_judge(&self) -> bool {
        true
    }
}
