//! The LLM judge against a real policy: a tiny random-weight TinyGpt behind a TchPolicy, in
//! process. A random model answers nonsense, so the fallback path runs for real.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use agentrl_core::{Message, Result, RewardFn, ToolCall, Trajectory};
use agentrl_policy::{ByteTokenizer, GptConfig, TchPolicy, TinyChatFormat, TinyGpt};
use agentrl_reward::{JudgeBackend, JudgeSettings, LlmJudge, parse_score};
use agentrl_trainer::judge::PolicyJudge;
use async_trait::async_trait;
use tch::{Device, nn};

mod common;

const CONTEXT: usize = 256;

/// `tch::manual_seed` is process-global: tests running in parallel must not interleave
/// seeding and initialisation, or the weights (and so the answers) would change run to run.
static INIT: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn policy_judge(seed: i64) -> PolicyJudge {
    let _guard = INIT.lock().unwrap_or_else(|p| p.into_inner());
    tch::manual_seed(seed);
    let vs = nn::VarStore::new(Device::Cpu);
    let cfg = GptConfig {
        vocab_size: ByteTokenizer::VOCAB_SIZE,
        d_model: 32,
        n_layers: 1,
        n_heads: 2,
        max_seq_len: CONTEXT,
        ffn_mult: 2,
        rope_theta: 10_000.0,
    };
    let model = TinyGpt::new(&vs.root(), cfg).unwrap();
    let policy = TchPolicy::spawn(vs, model, 64, seed as u64).unwrap();
    PolicyJudge::new(Arc::new(policy), Arc::new(TinyChatFormat::new()), 16)
        .with_context_len(CONTEXT)
}

/// Counts the calls that reach the real backend.
struct Counting {
    inner: PolicyJudge,
    calls: AtomicUsize,
}

#[async_trait]
impl JudgeBackend for Counting {
    async fn complete(&self, prompt: &str) -> Result<String> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        self.inner.complete(prompt).await
    }
}

fn trajectory(answer: &str) -> Trajectory {
    let call = ToolCall::new(
        "c0",
        "calculator",
        &serde_json::json!({"expression": "6*7"}),
    );
    Trajectory {
        env_id: "arith-calc".into(),
        task_id: format!("task-{answer}"),
        group_id: 1,
        messages: vec![
            Message::user("Compute 6*7"),
            Message::assistant_tool_calls(None, vec![call]),
            Message::tool("c0", "42"),
            Message::assistant(answer),
        ],
        success: answer == "42",
        tool_calls: 1,
        ..common::one_turn_trajectory(vec![1, 2], vec![3, 4], vec![-0.1, -0.2])
    }
}

fn settings() -> JudgeSettings {
    JudgeSettings {
        rubric: "Is the answer right?".into(),
        fallback: 0.125,
        max_transcript_chars: 80,
        timeout: Duration::from_secs(60),
        ..JudgeSettings::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_real_policy_answers_and_its_nonsense_gets_the_fallback() {
    let backend = Arc::new(Counting {
        inner: policy_judge(7),
        calls: AtomicUsize::new(0),
    });
    let judge = LlmJudge::new(backend.clone(), settings());
    let answers = ["42", "41", "forty-two", "I think 42"];
    let mut expected_fallbacks = 0;
    for answer in answers {
        let t = trajectory(answer);
        // What the model really says to this prompt (greedy, so the judge sees the same).
        let raw = backend.inner.complete(&judge.prompt_for(&t)).await.unwrap();
        let grade = parse_score(&raw, &judge.settings().scale);
        eprintln!("judge answer to {answer:?}: {raw:?} -> {grade:?}");
        let b = judge.score(&t).await.unwrap();
        match grade {
            Some(g) => {
                assert_eq!(b.parts["judge"], g, "{raw:?}");
                assert_eq!(b.parts["judge_fallback"], 0.0);
            }
            None => {
                expected_fallbacks += 1;
                assert_eq!(b.total, 0.125, "{raw:?}");
                assert_eq!(b.parts["judge_fallback"], 1.0);
            }
        }
    }
    assert_eq!(judge.fallbacks(), expected_fallbacks);
    assert!(
        expected_fallbacks > 0,
        "an untrained model should answer nonsense at least once"
    );
    assert_eq!(judge.failures(), 0, "{:?}", judge.last_failure());
    // One judge call per answer (ours went to the inner backend directly); scoring again hits
    // the cache.
    assert_eq!(backend.calls.load(Ordering::SeqCst), answers.len());
    judge.score(&trajectory("42")).await.unwrap();
    assert_eq!(backend.calls.load(Ordering::SeqCst), answers.len());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_scoring_through_one_policy() {
    let judge = Arc::new(LlmJudge::new(
        Arc::new(policy_judge(11)),
        JudgeSettings {
            max_concurrency: 3,
            ..settings()
        },
    ));
    let mut tasks = Vec::new();
    for i in 0..8 {
        let judge = judge.clone();
        tasks.push(tokio::spawn(async move {
            judge.score(&trajectory(&format!("{i}"))).await.unwrap()
        }));
    }
    for t in tasks {
        let b = t.await.unwrap();
        assert!((0.0..=1.0).contains(&b.total));
        assert!(b.parts.contains_key("judge_fallback"));
    }
    assert_eq!(judge.backend_calls(), 8);
    assert_eq!(judge.failures(), 0, "{:?}", judge.last_failure());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prompts_beyond_the_context_fall_back_with_a_reason() {
    let backend = Arc::new(policy_judge(3));
    let judge = LlmJudge::new(
        backend.clone(),
        JudgeSettings {
            max_transcript_chars: 4_000,
            rubric: "Grade it. ".repeat(40),
            ..settings()
        },
    );
    let b = judge.score(&trajectory("42")).await.unwrap();
    assert_eq!((b.total, b.parts["judge_fallback"]), (0.125, 1.0));
    assert_eq!((judge.fallbacks(), judge.failures()), (1, 1));
    let why = judge.last_failure().unwrap();
    assert!(why.contains("context is 256"), "{why}");
    assert_eq!(backend.prompts_too_long(), 1);
}

/// The real policy behind a delay far longer than the judge waits, so the timeout path runs
/// whatever the machine's load (a race against a 1 ms timer once failed under load).
struct Delayed {
    inner: PolicyJudge,
    delay: Duration,
}

#[async_trait]
impl JudgeBackend for Delayed {
    async fn complete(&self, prompt: &str) -> Result<String> {
        tokio::time::sleep(self.delay).await;
        self.inner.complete(prompt).await
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_policy_times_out_to_the_fallback() {
    let judge = LlmJudge::new(
        Arc::new(Delayed {
            inner: policy_judge(5),
            delay: Duration::from_secs(600),
        }),
        JudgeSettings {
            timeout: Duration::from_millis(50),
            ..settings()
        },
    );
    let b = judge.score(&trajectory("42")).await.unwrap();
    assert_eq!(b.parts["judge_fallback"], 1.0);
    assert_eq!((judge.fallbacks(), judge.failures()), (1, 1));
    let why = judge.last_failure().unwrap();
    assert!(why.contains("no answer within 50ms"), "{why}");
}
