//! The score, efficiency, tool-format, length, shaping and execution rewards on hand-built
//! trajectories.

use std::time::Duration;

use crate::common::{solved, trajectory, turn};
use agentrl_core::{Message, Outcome, RewardFn, ToolCall, Trajectory};
use agentrl_reward::{
    CommandCheck, Efficiency, EfficiencyMeasure, Execution, ExecutionCheck, Length, LengthUnit,
    SandboxCheck, ScoreReward, ToolFormat, TurnShaping,
};
use async_trait::async_trait;

async fn total(f: &dyn RewardFn, t: &Trajectory) -> f64 {
    f.score(t).await.unwrap().total
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-12
}

#[tokio::test]
async fn score_reward_uses_the_env_score_then_the_fallbacks() {
    let f = ScoreReward::default();
    assert_eq!(f.name(), "score");
    let mut t = solved();
    t.score = Some(0.25);
    let b = f.score(&t).await.unwrap();
    assert_eq!(b.parts["score"], 0.25);
    assert_eq!(b.total, 0.25);
    // No score: the outcome stands in.
    assert_eq!(total(&f, &solved()).await, 1.0);
    let failed = trajectory(vec![turn(1, false)], Some("3"), Outcome::Completed, false);
    assert_eq!(total(&f, &failed).await, 0.0);
    // Or the configured value.
    let g = ScoreReward { missing: Some(0.5) };
    assert_eq!(total(&g, &solved()).await, 0.5);
    // A broken env score is an error naming the task.
    t.score = Some(f64::NAN);
    let err = f.score(&t).await.unwrap_err().to_string();
    assert!(err.contains("score") && err.contains("t1"), "{err}");
}

#[tokio::test]
async fn efficiency_prefers_cheaper_successes() {
    let f = Efficiency {
        measure: EfficiencyMeasure::Turns,
        best: 1.0,
        worst: 5.0,
        only_on_success: true,
    };
    assert_eq!(f.name(), "efficiency");
    let turns = |n: usize| {
        trajectory(
            (0..n).map(|_| turn(2, false)).collect(),
            Some("2"),
            Outcome::Completed,
            true,
        )
    };
    assert_eq!(total(&f, &turns(1)).await, 1.0);
    assert!(close(total(&f, &turns(2)).await, 0.75));
    assert!(close(total(&f, &turns(4)).await, 0.25));
    assert_eq!(total(&f, &turns(5)).await, 0.0);
    assert_eq!(total(&f, &turns(9)).await, 0.0);
    // Unsolved gets nothing, however short.
    let mut short_fail = turns(1);
    short_fail.success = false;
    assert_eq!(total(&f, &short_fail).await, 0.0);
    let lenient = Efficiency {
        only_on_success: false,
        ..f
    };
    assert_eq!(total(&lenient, &short_fail).await, 1.0);

    // Tokens and tool calls.
    let tokens = Efficiency {
        measure: EfficiencyMeasure::Tokens,
        best: 10.0,
        worst: 20.0,
        only_on_success: true,
    };
    assert!(close(total(&tokens, &solved()).await, 0.5)); // 15 generated tokens
    let calls = Efficiency {
        measure: EfficiencyMeasure::ToolCalls,
        best: 0.0,
        worst: 4.0,
        only_on_success: true,
    };
    assert!(close(total(&calls, &solved()).await, 0.75)); // one tool call
}

fn with_calls(calls: Vec<ToolCall>, answer: Option<&str>) -> Trajectory {
    let mut messages = vec![
        Message::user("What is 1+1?"),
        Message::assistant_tool_calls(None, calls),
    ];
    if let Some(a) = answer {
        messages.push(Message::assistant(a));
    }
    trajectory(vec![turn(3, false)], None, Outcome::Completed, true).with_messages(messages)
}

#[tokio::test]
async fn tool_format_checks_parsing_known_tools_and_the_answer() {
    let f = ToolFormat::new(["calculator"]);
    assert_eq!(f.name(), "tool_format");
    assert_eq!(total(&f, &solved()).await, 1.0);

    let good = ToolCall::new(
        "c1",
        "calculator",
        &serde_json::json!({"expression": "1+1"}),
    );
    let mut broken = good.clone();
    broken.function.arguments = "{\"expression\": ".to_string();
    let mut not_object = good.clone();
    not_object.function.arguments = "[1, 2]".to_string();
    let unknown = ToolCall::new("c2", "browser", &serde_json::json!({"url": "x"}));
    let nameless = ToolCall::new("c3", "  ", &serde_json::json!({}));

    // Half the calls parse, all are known, answered: (0.5 + 1 + 1) / 3.
    let t = with_calls(vec![good.clone(), broken], Some("2"));
    assert!(close(total(&f, &t).await, 2.5 / 3.0));
    // Arrays are not argument objects.
    let t = with_calls(vec![not_object], Some("2"));
    assert!(close(total(&f, &t).await, 2.0 / 3.0));
    // A call to a tool that does not exist, and no answer: (1 + 0.5 + 0) / 3.
    let t = with_calls(vec![good.clone(), unknown.clone()], None);
    assert!(close(total(&f, &t).await, 1.5 / 3.0));
    // Without a tool list any non-blank name is known.
    let any = ToolFormat::default();
    let t = with_calls(vec![unknown, nameless], Some("2"));
    assert!(close(total(&any, &t).await, (1.0 + 0.5 + 1.0) / 3.0));
    // No calls at all, but an answer: full marks.
    let t = with_calls(vec![], Some("2"));
    assert_eq!(total(&f, &t).await, 1.0);
}

#[tokio::test]
async fn length_counts_tokens_or_characters() {
    let tokens = Length {
        unit: LengthUnit::Tokens,
        budget: 10,
        per_unit: 0.1,
    };
    assert_eq!(tokens.name(), "length");
    assert!(close(total(&tokens, &solved()).await, -0.5)); // 15 tokens, 5 over
    // solved(): the call `calculator` + `{"expression":"1+1"}` (10 + 20 chars) and the answer "2".
    let chars = Length {
        unit: LengthUnit::Chars,
        budget: 25,
        per_unit: 0.5,
    };
    assert_eq!(LengthUnit::Chars.measure(&solved()), 31);
    assert!(close(total(&chars, &solved()).await, -3.0));
    let roomy = Length {
        unit: LengthUnit::Chars,
        budget: 31,
        per_unit: 0.5,
    };
    assert_eq!(total(&roomy, &solved()).await, 0.0);
    // Characters, not bytes.
    let mut t = with_calls(vec![], Some("é✓"));
    t.messages.truncate(1);
    t.messages.push(Message::assistant("é✓"));
    assert_eq!(LengthUnit::Chars.measure(&t), 2);
}

#[tokio::test]
async fn turn_shaping_discounts_later_turns() {
    let mut t = solved();
    t.turns.push(turn(1, false));
    for (turn, r) in t.turns.iter_mut().zip([1.0, 2.0, 4.0]) {
        turn.reward = r;
    }
    let f = TurnShaping { discount: 0.5 };
    assert_eq!(f.name(), "turn_shaping");
    assert!(close(total(&f, &t).await, 1.0 + 1.0 + 1.0));
    assert!(close(total(&TurnShaping { discount: 1.0 }, &t).await, 7.0));
    assert!(close(total(&TurnShaping { discount: 0.0 }, &t).await, 1.0));
    let empty = trajectory(vec![], None, Outcome::Truncated, false);
    assert_eq!(total(&f, &empty).await, 0.0);
}

fn sh(script: &str, timeout: Duration) -> Execution {
    Execution::new(CommandCheck::new(
        "sh",
        vec!["-c".to_string(), script.to_string()],
        timeout,
    ))
}

#[tokio::test]
async fn execution_runs_a_command_on_the_final_answer() {
    let check = sh(
        r#"read answer; test "$answer" = 2 && test "$AGENTRL_TASK_ID" = t1"#,
        Duration::from_secs(10),
    );
    assert_eq!(check.name(), "execution");
    let b = check.score(&solved()).await.unwrap();
    assert_eq!(b.parts["execution"], 1.0);
    let wrong = trajectory(vec![turn(1, false)], Some("3"), Outcome::Completed, false);
    assert_eq!(total(&check, &wrong).await, 0.0);
    // No final answer: fails without running.
    let none = trajectory(vec![turn(1, false)], None, Outcome::Truncated, false);
    assert_eq!(total(&check, &none).await, 0.0);
    // A command that ignores its input and passes.
    assert_eq!(
        total(&sh("exit 0", Duration::from_secs(10)), &wrong).await,
        1.0
    );
}

#[tokio::test]
async fn execution_times_out_and_reports_missing_programs() {
    // `sleep 60` would exit 0 (a pass): 0.0 means the 200 ms limit killed it.
    let slow = sh("sleep 60", Duration::from_millis(200));
    assert_eq!(total(&slow, &solved()).await, 0.0);

    let missing = Execution::new(CommandCheck::new(
        "/nonexistent/agentrl-check",
        vec![],
        Duration::from_secs(1),
    ));
    let err = missing.score(&solved()).await.unwrap_err().to_string();
    assert!(
        err.contains("/nonexistent/agentrl-check") && err.contains("could not start"),
        "{err}"
    );
}

fn sandboxed(argv: &[&str], files: Vec<std::path::PathBuf>) -> Execution {
    let argv = argv.iter().map(|a| a.to_string()).collect();
    Execution::new(SandboxCheck::new(argv, files, Default::default()))
}

#[tokio::test]
async fn a_sandboxed_checker_sees_the_answer_and_its_files_only() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("check.py");
    std::fs::write(
        &script,
        "import sys\nanswer = open('answer.txt').read().strip()\n\
         sys.exit(0 if answer == sys.stdin.read().strip() == '2' else 1)\n",
    )
    .unwrap();
    let check = sandboxed(&["python3", "check.py"], vec![script.clone()]);
    assert_eq!(total(&check, &solved()).await, 1.0);
    let wrong = trajectory(vec![turn(1, false)], Some("3"), Outcome::Completed, false);
    assert_eq!(total(&check, &wrong).await, 0.0);
    // The host's files are out of reach: the checker's directory is not mounted.
    let host = script.parent().unwrap().display().to_string();
    let peek = sandboxed(&["test", "-e", &format!("{host}/check.py")], vec![]);
    assert_eq!(total(&peek, &solved()).await, 0.0);
    // And the system is read-only.
    let write = sandboxed(&["touch", "/usr/agentrl-was-here"], vec![]);
    assert_eq!(total(&write, &solved()).await, 0.0);
}

#[tokio::test]
async fn a_sandbox_that_cannot_be_built_is_an_error_not_an_unsandboxed_run() {
    let config = agentrl_tools::SandboxConfig {
        bwrap: "/nonexistent/bwrap".into(),
        ..Default::default()
    };
    let check = Execution::new(SandboxCheck::new(vec!["true".into()], vec![], config));
    let err = check.score(&solved()).await.unwrap_err().to_string();
    assert!(err.contains("sandboxed command `true`"), "{err}");
    assert!(err.contains("/nonexistent/bwrap"), "{err}");
}

/// A checker reporting a fixed share, as a test suite runner would.
struct Share(f64);

#[async_trait]
impl ExecutionCheck for Share {
    fn describe(&self) -> String {
        "fixed share".to_string()
    }
    async fn check(&self, _t: &Trajectory) -> agentrl_core::Result<f64> {
        Ok(self.0)
    }
}

#[tokio::test]
async fn execution_accepts_pass_shares_in_range_only() {
    assert_eq!(total(&Execution::new(Share(0.75)), &solved()).await, 0.75);
    let err = Execution::new(Share(1.5))
        .score(&solved())
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("fixed share") && err.contains("1.5"), "{err}");
}
