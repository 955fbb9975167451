//! The LLM judge over scripted backends: grading, fallbacks, cache, concurrency and time-outs.
//! (The trainer's tests run it against a real tch policy.)

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use crate::common::{solved, trajectory, turn};
use agentrl_core::{Error, Outcome, Result, RewardFn, Trajectory};
use agentrl_reward::{JudgeBackend, JudgeSettings, LlmJudge, RewardConfig, RewardContext};
use async_trait::async_trait;

/// Answers with a fixed text after a delay, counting calls and the most calls in flight.
struct Scripted {
    answer: std::result::Result<String, String>,
    delay: Duration,
    calls: AtomicUsize,
    in_flight: AtomicUsize,
    max_in_flight: AtomicUsize,
}

impl Scripted {
    fn new(answer: &str) -> Arc<Self> {
        Self::with(Ok(answer.to_string()), Duration::ZERO)
    }

    fn with(answer: std::result::Result<String, String>, delay: Duration) -> Arc<Self> {
        Arc::new(Scripted {
            answer,
            delay,
            calls: AtomicUsize::new(0),
            in_flight: AtomicUsize::new(0),
            max_in_flight: AtomicUsize::new(0),
        })
    }
}

#[async_trait]
impl JudgeBackend for Scripted {
    async fn complete(&self, prompt: &str) -> Result<String> {
        assert!(prompt.contains("Conversation:"), "{prompt}");
        self.calls.fetch_add(1, Ordering::SeqCst);
        let now = self.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        self.max_in_flight.fetch_max(now, Ordering::SeqCst);
        tokio::time::sleep(self.delay).await;
        self.in_flight.fetch_sub(1, Ordering::SeqCst);
        self.answer.clone().map_err(Error::Policy)
    }
}

fn judge(backend: Arc<Scripted>, settings: JudgeSettings) -> LlmJudge {
    LlmJudge::new(backend, settings)
}

/// Distinct trajectories (different answers give different prompts).
fn answered(i: usize) -> Trajectory {
    trajectory(
        vec![turn(2, false)],
        Some(&format!("answer {i}")),
        Outcome::Completed,
        true,
    )
}

#[tokio::test]
async fn grades_are_parsed_and_normalised() {
    for (answer, want) in [
        ("Score: 7/10", 0.7),
        ("**8**", 0.8),
        ("Looks right. Score: 10", 1.0),
        ("I'd give it a 3.", 0.3),
    ] {
        let j = judge(Scripted::new(answer), JudgeSettings::default());
        assert_eq!(j.name(), "judge");
        let b = j.score(&solved()).await.unwrap();
        assert!((b.total - want).abs() < 1e-12, "{answer}: {b:?}");
        assert_eq!(b.parts["judge"], b.total);
        assert_eq!(b.parts["judge_fallback"], 0.0);
        assert_eq!(j.fallbacks(), 0);
    }
}

#[tokio::test]
async fn nonsense_gets_the_fallback_and_is_counted() {
    let settings = JudgeSettings {
        fallback: 0.25,
        ..JudgeSettings::default()
    };
    let backend = Scripted::new("<|end|>??? lorem ipsum");
    let j = judge(backend.clone(), settings);
    for i in 0..3 {
        let b = j.score(&answered(i)).await.unwrap();
        assert_eq!(b.total, 0.25);
        assert_eq!(b.parts["judge_fallback"], 1.0);
    }
    // Nonsense is cached like a grade, and still counted on every use.
    let b = j.score(&answered(0)).await.unwrap();
    assert_eq!(b.parts["judge_fallback"], 1.0);
    assert_eq!(j.fallbacks(), 4);
    assert_eq!(j.backend_calls(), 3);
    assert_eq!(j.failures(), 0);
}

#[tokio::test]
async fn verdicts_are_cached_by_prompt() {
    let backend = Scripted::new("Score: 6");
    let j = judge(backend.clone(), JudgeSettings::default());
    for _ in 0..3 {
        assert!((j.score(&solved()).await.unwrap().total - 0.6).abs() < 1e-12);
    }
    assert_eq!(backend.calls.load(Ordering::SeqCst), 1);
    j.score(&answered(1)).await.unwrap();
    assert_eq!(backend.calls.load(Ordering::SeqCst), 2);

    let uncached = Scripted::new("Score: 6");
    let j = judge(
        uncached.clone(),
        JudgeSettings {
            cache_capacity: 0,
            ..JudgeSettings::default()
        },
    );
    j.score(&solved()).await.unwrap();
    j.score(&solved()).await.unwrap();
    assert_eq!(uncached.calls.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn backend_errors_and_time_outs_fall_back_and_are_not_cached() {
    let failing = Scripted::with(Err("connection refused".into()), Duration::ZERO);
    let j = judge(failing.clone(), JudgeSettings::default());
    let b = j.score(&solved()).await.unwrap();
    assert_eq!(b.parts["judge_fallback"], 1.0);
    assert_eq!(b.total, 0.0);
    j.score(&solved()).await.unwrap();
    assert_eq!(failing.calls.load(Ordering::SeqCst), 2);
    assert_eq!((j.fallbacks(), j.failures()), (2, 2));
    let why = j.last_failure().unwrap();
    assert!(why.contains("connection refused"), "{why}");

    let slow = Scripted::with(Ok("Score: 9".into()), Duration::from_secs(10));
    let j = judge(
        slow,
        JudgeSettings {
            timeout: Duration::from_millis(50),
            fallback: 0.5,
            ..JudgeSettings::default()
        },
    );
    // The backend would answer 9 after 10 s: the fallback proves the 50 ms timeout cut it off.
    let b = j.score(&solved()).await.unwrap();
    assert_eq!((b.total, b.parts["judge_fallback"]), (0.5, 1.0));
    assert!(j.last_failure().unwrap().contains("no answer within"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrency_is_limited() {
    // Each call takes long enough that the first two always overlap.
    let backend = Scripted::with(Ok("Score: 5".into()), Duration::from_millis(200));
    let j = Arc::new(judge(
        backend.clone(),
        JudgeSettings {
            max_concurrency: 2,
            ..JudgeSettings::default()
        },
    ));
    let mut tasks = Vec::new();
    for i in 0..12 {
        let j = j.clone();
        tasks.push(tokio::spawn(
            async move { j.score(&answered(i)).await.unwrap() },
        ));
    }
    for t in tasks {
        assert!((t.await.unwrap().total - 0.5).abs() < 1e-12);
    }
    assert_eq!(backend.calls.load(Ordering::SeqCst), 12);
    assert_eq!(backend.max_in_flight.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn the_prompt_holds_the_rubric_and_the_end_of_the_conversation() {
    let j = judge(
        Scripted::new("1"),
        JudgeSettings {
            rubric: "Is the answer 2?".to_string(),
            max_transcript_chars: 40,
            ..JudgeSettings::default()
        },
    );
    let prompt = j.prompt_for(&solved());
    assert!(prompt.starts_with("Is the answer 2?"), "{prompt}");
    assert!(prompt.contains("assistant: 2"), "{prompt}");
    assert!(prompt.contains('…'), "{prompt}");
    assert!(!prompt.contains("What is 1+1?"), "{prompt}");
    assert!(prompt.contains("from 0 to 10"), "{prompt}");
}

#[tokio::test]
async fn configured_judges_need_a_backend() {
    let cfg: RewardConfig = serde_json::from_value(serde_json::json!({
        "type": "weighted_sum",
        "terms": [
            {"weight": 1.0, "reward": {"type": "outcome"}},
            {"weight": 0.5, "reward": {
                "type": "llm_judge", "rubric": "Grade it.", "scale_min": 1, "scale_max": 5,
                "fallback": 0.5
            }}
        ]
    }))
    .unwrap();
    assert!(cfg.needs_judge());
    match cfg.build() {
        Err(Error::Config(m)) => assert!(
            m.starts_with("reward.terms[1].reward is an llm_judge but no judge backend"),
            "{m}"
        ),
        other => panic!(
            "expected a config error, got {:?}",
            other.map(|f| f.name().to_string())
        ),
    }
    let f = cfg
        .build_with(&RewardContext::with_judge(Scripted::new("Score: 4")))
        .unwrap();
    let b = f.score(&solved()).await.unwrap();
    assert_eq!(b.parts["judge"], 0.75);
    assert!((b.total - (1.0 + 0.5 * 0.75)).abs() < 1e-12);
    assert_eq!(b.parts["judge_fallback"], 0.0);
}
