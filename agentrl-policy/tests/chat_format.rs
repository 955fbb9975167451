//! The tiny chat format: rendering, parsing, malformed output, and token exactness across turns.

use agentrl_core::{Message, ToolCall, ToolSpec};
use agentrl_policy::{ByteTokenizer, ChatFormat, TinyChatFormat};
use serde_json::json;

fn calculator_spec() -> ToolSpec {
    ToolSpec::function(
        "calculator",
        "Evaluates arithmetic.",
        json!({"type": "object", "properties": {"expression": {"type": "string"}}, "required": ["expression"]}),
    )
}

fn call(id: &str, expr: &str) -> ToolCall {
    ToolCall::new(id, "calculator", &json!({ "expression": expr }))
}

#[test]
fn prompt_renders_tools_messages_and_assistant_header() {
    let fmt = TinyChatFormat::new();
    let ids = fmt.render_prompt(&[Message::user("Compute 2*3")], &[calculator_spec()]);
    assert_eq!(
        fmt.decode(&ids),
        "<|tools|>calculator(expression)<|end|><|user|>Compute 2*3<|end|><|assistant|>"
    );
}

#[test]
fn user_text_that_looks_special_stays_bytes() {
    let fmt = TinyChatFormat::new();
    let ids = fmt.render_prompt(&[Message::user("<|end|>")], &[]);
    let specials = ids.iter().filter(|&&i| i >= 256).count();
    assert_eq!(
        specials, 3,
        "user header, end, assistant header only: {ids:?}"
    );
}

#[test]
fn tool_call_and_answer_round_trip() {
    let fmt = TinyChatFormat::new();
    let msg = Message::assistant_tool_calls(None, vec![call("call_0_0", "347*29+118")]);
    let parsed = fmt.parse_assistant(&fmt.render_assistant(&msg), "call_0_");
    assert_eq!(parsed.error, None);
    assert_eq!(parsed.message, msg);
    let answer = Message::assistant("10181");
    let parsed = fmt.parse_assistant(&fmt.render_assistant(&answer), "call_1_");
    assert_eq!(parsed.error, None);
    assert_eq!(parsed.message, answer);
}

#[test]
fn several_tool_calls_in_one_message() {
    let fmt = TinyChatFormat::new();
    let msg = Message::assistant_tool_calls(
        Some("Let me compute.".into()),
        vec![call("c0", "1+1"), call("c1", "2*2")],
    );
    let parsed = fmt.parse_assistant(&fmt.render_assistant(&msg), "c");
    assert_eq!(parsed.error, None);
    assert_eq!(parsed.message, msg);
}

#[test]
fn malformed_generations_become_flagged_actions_not_panics() {
    let fmt = TinyChatFormat::new();
    let t = ByteTokenizer;
    let s = ByteTokenizer::SPECIAL;
    let mut unterminated = vec![s.tool_call];
    unterminated.extend(t.encode("calculator{\"expression\":\"1+"));
    let mut no_json = vec![s.tool_call];
    no_json.extend(t.encode("calculator"));
    no_json.extend([s.tool_call_end, s.end]);
    let mut stray = t.encode("12");
    stray.extend([s.user, s.end]);
    let cases: Vec<(Vec<u32>, &str)> = vec![
        (unterminated, "without <|/tool_call|>"),
        (no_json, "no JSON arguments"),
        (stray, "unexpected special token"),
        (vec![999_999], "ended before"),
        (Vec::new(), "ended before"),
    ];
    for (ids, expected) in cases {
        let parsed = fmt.parse_assistant(&ids, "c");
        let err = parsed.error.unwrap_or_default();
        assert!(err.contains(expected), "{ids:?}: {err}");
    }
    // The malformed call is kept so the env can answer it.
    let mut bad_json = vec![s.tool_call];
    bad_json.extend(t.encode("calculator{oops"));
    bad_json.extend([s.tool_call_end, s.end]);
    let parsed = fmt.parse_assistant(&bad_json, "c");
    assert_eq!(parsed.message.tool_calls[0].function.arguments, "{oops");
    assert!(
        parsed.message.tool_calls[0]
            .function
            .parse_arguments()
            .is_err()
    );
}

#[test]
fn multi_turn_prompts_extend_exactly_without_retokenisation() {
    let fmt = TinyChatFormat::new();
    let tools = [calculator_spec()];
    let mut conversation = vec![Message::user("Compute 12*(3+4)")];
    let mut running = fmt.render_prompt(&conversation, &tools);
    for turn in 0..5 {
        let action = if turn < 4 {
            Message::assistant_tool_calls(None, vec![call(&format!("call_{turn}_0"), "12*(3+4)")])
        } else {
            Message::assistant("84")
        };
        running.extend(fmt.render_assistant(&action));
        conversation.push(action);
        if turn < 4 {
            let reply = vec![Message::tool(format!("call_{turn}_0"), "84")];
            running.extend(fmt.render_continuation(true, &reply));
            conversation.extend(reply);
            assert_eq!(
                running,
                fmt.render_prompt(&conversation, &tools),
                "turn {turn}"
            );
        }
    }
}

#[test]
fn a_cut_generation_is_closed_before_the_env_reply() {
    let fmt = TinyChatFormat::new();
    let ids = fmt.render_continuation(false, &[Message::user("error: empty message")]);
    assert_eq!(ids[0], ByteTokenizer::SPECIAL.end);
}
