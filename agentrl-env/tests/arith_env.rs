//! Episodes of `arith-calc`: tool calls, final answers, malformed actions and the turn limit.

use agentrl_core::{Env, Error, Message, Role, Split, Step, Task, ToolCall};
use agentrl_env::{ArithCalc, ArithCalcEnv, EnvFactory};
use serde_json::json;

use crate::common::contract;

fn task() -> Task {
    ArithCalc::default().task(Split::Train, 3)
}

fn answer_of(task: &Task) -> String {
    task.data["answer"].as_str().unwrap().to_string()
}

async fn started() -> (Box<dyn Env>, Task) {
    let task = task();
    let mut env = ArithCalc::default().make();
    env.reset(&task).await.unwrap();
    (env, task)
}

fn call(name: &str, arguments: &str) -> Message {
    let mut call = ToolCall::new("call_7", name, &json!({}));
    call.function.arguments = arguments.to_string();
    Message::assistant_tool_calls(None, vec![call])
}

/// Asserts that `step` is an invalid action answered by one error message, unrewarded, and
/// that the episode goes on.
fn assert_invalid(step: &Step) {
    contract::assert_invalid("arith-calc", step);
    assert_eq!(step.reward, 0.0);
    assert_eq!(step.messages.len(), 1);
}

#[tokio::test]
async fn reset_shows_the_expression_and_the_calculator() {
    let task = task();
    let mut env = ArithCalc::default().make();
    assert_eq!(env.id(), "arith-calc");
    let obs = env.reset(&task).await.unwrap();
    let expr = task.data["expression"].as_str().unwrap();
    assert_eq!(obs.messages, vec![Message::user(format!("Compute {expr}"))]);
    assert_eq!(obs.tools.len(), 1);
    assert_eq!(obs.tools[0].name(), "calculator");
}

#[tokio::test]
async fn tool_call_then_right_answer() {
    let (mut env, task) = started().await;
    let expr = task.data["expression"].as_str().unwrap();
    let action = Message::assistant_tool_calls(
        None,
        vec![ToolCall::new(
            "c1",
            "calculator",
            &json!({ "expression": expr }),
        )],
    );
    let step = env.step(&action).await.unwrap();
    assert!(!step.done());
    assert_eq!(step.reward, 0.0);
    assert_eq!(step.info.tool_calls, 1);
    assert_eq!(step.info.tool_errors, 0);
    assert_eq!(step.info.invalid_action, None);
    assert_eq!(step.messages.len(), 1);
    assert_eq!(step.messages[0].role, Role::Tool);
    assert_eq!(step.messages[0].tool_call_id.as_deref(), Some("c1"));
    assert_eq!(step.messages[0].text(), answer_of(&task));

    let answer = format!("The answer is {}.", answer_of(&task));
    let last = env.step(&Message::assistant(answer)).await.unwrap();
    assert!(last.terminated && !last.truncated);
    assert_eq!(last.reward, 1.0);
    assert_eq!(last.info.success, Some(true));
    assert!(last.messages.is_empty());
}

#[tokio::test]
async fn answer_forms_are_accepted() {
    for form in ["{}", "{}.0", "The answer is {}.", "= {}"] {
        let (mut env, task) = started().await;
        let text = form.replace("{}", &answer_of(&task));
        let step = env.step(&Message::assistant(text.clone())).await.unwrap();
        assert_eq!(step.info.success, Some(true), "{text}");
    }
}

#[tokio::test]
async fn negative_answers_are_extracted() {
    let task = Task {
        env_id: "arith-calc".into(),
        id: "neg".into(),
        split: Split::Train,
        data: json!({"expression": "10-22", "answer": "-12", "operands": 2}),
    };
    let mut env = ArithCalc::default().make();
    env.reset(&task).await.unwrap();
    let step = env.step(&Message::assistant("-12")).await.unwrap();
    assert_eq!(step.info.success, Some(true));
    assert_eq!(step.reward, 1.0);
}

#[tokio::test]
async fn wrong_answer_terminates_with_zero_reward() {
    let (mut env, task) = started().await;
    let wrong: i64 = answer_of(&task).parse::<i64>().unwrap() + 1;
    let step = env
        .step(&Message::assistant(wrong.to_string()))
        .await
        .unwrap();
    assert!(step.terminated);
    assert_eq!(step.reward, 0.0);
    assert_eq!(step.info.success, Some(false));
    let err = env.step(&Message::assistant("1")).await.unwrap_err();
    assert!(matches!(err, Error::Env { .. }), "{err}");
}

#[tokio::test]
async fn bad_json_arguments_are_an_invalid_action() {
    let (mut env, _) = started().await;
    let step = env.step(&call("calculator", "{oops")).await.unwrap();
    assert_invalid(&step);
    assert_eq!(step.messages[0].role, Role::Tool);
    assert_eq!(step.messages[0].tool_call_id.as_deref(), Some("call_7"));
    assert_eq!((step.info.tool_calls, step.info.tool_errors), (1, 1));
}

#[tokio::test]
async fn unknown_tool_is_an_invalid_action() {
    let (mut env, _) = started().await;
    let step = env.step(&call("python", r#"{"code": "1"}"#)).await.unwrap();
    assert_invalid(&step);
    assert_eq!((step.info.tool_calls, step.info.tool_errors), (1, 1));
}

#[tokio::test]
async fn wrong_argument_type_is_an_invalid_action() {
    let (mut env, _) = started().await;
    let step = env
        .step(&call("calculator", r#"{"expression": 5}"#))
        .await
        .unwrap();
    assert_invalid(&step);
}

#[tokio::test]
async fn empty_message_is_an_invalid_action() {
    let (mut env, _) = started().await;
    for text in ["", "  \n"] {
        let step = env.step(&Message::assistant(text)).await.unwrap();
        assert_invalid(&step);
        assert_eq!(step.info.invalid_action.as_deref(), Some("empty message"));
        assert_eq!(
            step.messages[0],
            Message::user("error: empty message; call a tool or give the answer")
        );
    }
    let none = Message::assistant_tool_calls(None, Vec::new());
    assert_invalid(&env.step(&none).await.unwrap());
}

#[tokio::test]
async fn non_assistant_role_is_an_invalid_action() {
    let (mut env, task) = started().await;
    let step = env.step(&Message::user(answer_of(&task))).await.unwrap();
    assert_invalid(&step);
    assert!(step.info.invalid_action.unwrap().contains("user"));
}

#[tokio::test]
async fn failing_calculation_is_an_error_but_not_invalid() {
    let (mut env, _) = started().await;
    let step = env
        .step(&call("calculator", r#"{"expression": "1/0"}"#))
        .await
        .unwrap();
    assert_eq!((step.info.tool_calls, step.info.tool_errors), (1, 1));
    assert_eq!(step.info.invalid_action, None);
    assert!(!step.done());
}

#[tokio::test]
async fn several_calls_in_one_step() {
    let (mut env, _) = started().await;
    let action = Message::assistant_tool_calls(
        None,
        vec![
            ToolCall::new("a", "calculator", &json!({"expression": "2+3"})),
            ToolCall::new("b", "nope", &json!({})),
        ],
    );
    let step = env.step(&action).await.unwrap();
    assert_eq!(step.messages.len(), 2);
    assert_eq!(step.messages[0].text(), "5");
    assert_eq!(step.messages[1].tool_call_id.as_deref(), Some("b"));
    assert_eq!((step.info.tool_calls, step.info.tool_errors), (2, 1));
    assert!(step.info.invalid_action.is_some());
}

#[tokio::test]
async fn truncated_after_four_tool_calls() {
    let (mut env, _) = started().await;
    let action = call("calculator", r#"{"expression": "1+1"}"#);
    for turn in 1..=4 {
        let step = env.step(&action).await.unwrap();
        assert!(!step.terminated);
        assert_eq!(step.truncated, turn == 4, "turn {turn}");
    }
    let err = env.step(&action).await.unwrap_err();
    assert!(matches!(err, Error::Env { .. }), "{err}");
}

#[tokio::test]
async fn step_before_reset_is_an_error() {
    let mut env = ArithCalcEnv::new();
    let err = env.step(&Message::assistant("1")).await.unwrap_err();
    assert!(matches!(err, Error::Env { .. }), "{err}");
    let mut wrapped = ArithCalc::default().make();
    assert!(wrapped.step(&Message::assistant("1")).await.is_err());
}

#[tokio::test]
async fn reset_rejects_foreign_tasks() {
    let mut env = ArithCalc::default().make();
    let mut task = task();
    task.env_id = "other".into();
    assert!(env.reset(&task).await.is_err());
}
