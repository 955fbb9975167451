//! `agentrl show`: a saved episode rendered readably, selected by index, failure and env.

use agentrl_core::{
    FinishReason, Message, Outcome, Split, Task, ToolCall, Trajectory, Turn, write_jsonl,
};
use agentrl_trainer::show::{ShowArgs, show};
use serde_json::json;

fn turn(version: u64, name: &str, invalid: Option<&str>) -> Turn {
    Turn {
        injected_ids: vec![1, 2],
        generated_ids: vec![3, 4],
        logprobs: vec![-0.5, -1.5],
        policy_version: version,
        policy_name: Some(name.into()),
        finish: FinishReason::Stop,
        reward: 0.0,
        stale: false,
        invalid_action: invalid.map(str::to_string),
    }
}

fn episode(env: &str, id: &str, success: bool) -> Trajectory {
    let task = Task {
        env_id: env.into(),
        id: id.into(),
        split: Split::Test,
        data: serde_json::Value::Null,
    };
    let call = ToolCall::new("call_0", "calculator", &json!({"expression": "2+3"}));
    let mut tool = Message::tool("call_0", "5");
    tool.name = Some("calculator".into());
    let messages = vec![
        Message::system("Use the calculator."),
        Message::user("What is 2+3?"),
        Message::assistant_tool_calls(None, vec![call]),
        tool,
        Message::assistant(if success { "5" } else { "My guess: 6" }),
    ];
    let mut t = Trajectory::for_task(&task, 7)
        .with_messages(messages)
        .with_turns(vec![
            turn(3, "current", None),
            turn(2, "snapshot", Some("answer is not a number")),
        ])
        .with_success(success)
        .with_outcome(Outcome::Completed)
        .with_tool_calls(1, 0)
        .with_reward(if success { 1.1 } else { 0.1 });
    t.reward_parts
        .insert("outcome".into(), if success { 1.0 } else { 0.0 });
    t.reward_parts.insert("format".into(), 0.1);
    // A failed episode's first turn lagged the staleness bound when it was trained.
    t.turns[0].stale = !success;
    t
}

fn render(args: &ShowArgs) -> agentrl_core::Result<String> {
    let mut out = Vec::new();
    show(args, &mut out)?;
    Ok(String::from_utf8(out).expect("utf-8"))
}

#[test]
fn show_renders_the_selected_episode() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("episodes.jsonl");
    write_jsonl(
        &file,
        &[
            episode("arith-calc", "a0", true),
            episode("arith-calc", "a1", false),
            episode("maze", "m0", false),
        ],
        false,
    )
    .unwrap();
    // A broken line in the middle is skipped, not fatal.
    let mut text = std::fs::read_to_string(&file).unwrap();
    text.insert_str(0, "{not json\n");
    std::fs::write(&file, text).unwrap();

    let args = |index, failed, env: Option<&str>| ShowArgs {
        file: file.clone(),
        index,
        failed,
        env: env.map(str::to_string),
    };
    let first = render(&args(0, false, None)).unwrap();
    assert!(
        first.contains("task a0") && first.contains("SUCCESS"),
        "{first}"
    );
    assert!(!first.contains("stale"), "{first}");

    let failed = render(&args(1, true, None)).unwrap();
    assert!(
        failed.contains("env maze") && failed.contains("task m0"),
        "{failed}"
    );
    assert!(failed.contains("FAILED"), "{failed}");
    for expected in [
        "[system]",
        "  Use the calculator.",
        "[user]",
        "-> call calculator (call_0)",
        "\"expression\": \"2+3\"",
        "[tool] name=calculator answers call_0",
        "policy current v3",
        "policy snapshot v2",
        "finish Stop  mean logprob -1.000  stale: not trained",
        "!! invalid action: answer is not a number",
        "  My guess: 6",
        "reward/outcome = 0.0000",
        "reward/format = 0.1000",
        "mean logprob -1.000",
    ] {
        assert!(
            failed.contains(expected),
            "missing {expected:?} in\n{failed}"
        );
    }
    assert_eq!(failed.matches("stale").count(), 1, "{failed}");
    // The first assistant message is the call, made by turn 0 (v3); the answer is turn 1 (v2).
    let call_line = failed.find("policy current v3").unwrap();
    let answer_line = failed.find("policy snapshot v2").unwrap();
    assert!(call_line < failed.find("-> call").unwrap());
    assert!(answer_line > failed.find("[tool]").unwrap());

    let by_env = render(&args(0, true, Some("arith-calc"))).unwrap();
    assert!(by_env.contains("task a1"), "{by_env}");

    let err = render(&args(2, true, None)).unwrap_err().to_string();
    assert!(
        err.contains("2 matching episodes")
            && err.contains("failed")
            && err.contains("1 unreadable"),
        "{err}"
    );
}
