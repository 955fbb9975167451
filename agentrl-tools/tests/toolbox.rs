//! Dispatching through the ToolBox: validation, errors, timeouts and truncation.

use std::sync::Arc;
use std::time::Duration;

use agentrl_core::{Role, Tool, ToolCall, ToolContext, ToolError, ToolSpec};
use agentrl_tools::{Calculator, ToolBox, ToolLimits, ToolOutcome};
use async_trait::async_trait;
use serde_json::{Value, json};

/// Sleeps for `ms` milliseconds, then answers "done".
struct Sleeper;

#[async_trait]
impl Tool for Sleeper {
    fn spec(&self) -> ToolSpec {
        ToolSpec::function(
            "sleep",
            "Sleeps.",
            json!({"type": "object", "properties": {"ms": {"type": "integer", "minimum": 0}}, "required": ["ms"]}),
        )
    }
    async fn call(&self, args: Value, _ctx: &ToolContext) -> Result<String, ToolError> {
        let ms = args["ms"].as_u64().unwrap_or(0);
        tokio::time::sleep(Duration::from_millis(ms)).await;
        Ok("done".into())
    }
}

/// Repeats a character `n` times.
struct Repeat;

#[async_trait]
impl Tool for Repeat {
    fn spec(&self) -> ToolSpec {
        ToolSpec::function(
            "repeat",
            "Repeats é.",
            json!({"type": "object", "properties": {"n": {"type": "integer"}}}),
        )
    }
    async fn call(&self, args: Value, _ctx: &ToolContext) -> Result<String, ToolError> {
        let n = args["n"].as_u64().unwrap_or(0) as usize;
        Ok("é".repeat(n))
    }
}

/// Panics when called.
struct Crasher;

#[async_trait]
impl Tool for Crasher {
    fn spec(&self) -> ToolSpec {
        ToolSpec::function("crash", "Panics.", Value::Null)
    }
    async fn call(&self, _args: Value, _ctx: &ToolContext) -> Result<String, ToolError> {
        panic!("boom")
    }
}

/// A tool whose schema is not a valid JSON Schema.
struct BadSchema;

#[async_trait]
impl Tool for BadSchema {
    fn spec(&self) -> ToolSpec {
        ToolSpec::function("bad", "Broken schema.", json!({"type": "no-such-type"}))
    }
    async fn call(&self, _args: Value, _ctx: &ToolContext) -> Result<String, ToolError> {
        Ok(String::new())
    }
}

fn toolbox() -> ToolBox {
    let limits = ToolLimits {
        timeout: Duration::from_millis(50),
        max_output_chars: 200,
    };
    ToolBox::new(limits)
        .with(Calculator)
        .and_then(|b| b.with(Sleeper))
        .and_then(|b| b.with(Repeat))
        .and_then(|b| b.with(Crasher))
        .unwrap()
}

async fn dispatch_raw(name: &str, arguments: &str) -> ToolOutcome {
    let mut call = ToolCall::new("call_7", name, &json!({}));
    call.function.arguments = arguments.to_string();
    toolbox().dispatch(&call, &ToolContext::default()).await
}

async fn dispatch(name: &str, args: Value) -> ToolOutcome {
    dispatch_raw(name, &args.to_string()).await
}

#[test]
fn toolbox_is_send_sync_and_clone() {
    fn assert_traits<T: Send + Sync + Clone + 'static>() {}
    assert_traits::<ToolBox>();
    let b = toolbox();
    assert_eq!(b.clone().names(), b.names());
}

#[test]
fn registration() {
    let b = toolbox();
    assert_eq!(b.names(), ["calculator", "sleep", "repeat", "crash"]);
    assert_eq!(b.specs()[0], Calculator.spec());
    assert_eq!(b.limits().max_output_chars, 200);
    assert_eq!(ToolLimits::default().timeout, Duration::from_secs(5));
    assert_eq!(ToolLimits::default().max_output_chars, 4000);

    let err = b.clone().with(Calculator).unwrap_err().to_string();
    assert!(
        err.contains("calculator") && err.contains("already registered"),
        "{err}"
    );
    let err = ToolBox::default().with(BadSchema).unwrap_err().to_string();
    assert!(err.contains("invalid parameters schema"), "{err}");

    // Registering into a clone does not change the original.
    let mut copy = b.clone();
    copy.register(Arc::new(BadSchema)).unwrap_err();
    let mut copy = ToolBox::default();
    copy.register(Arc::new(Calculator)).unwrap();
    assert_eq!(copy.names(), ["calculator"]);
    assert_eq!(b.names().len(), 4);
}

#[tokio::test]
async fn valid_call() {
    let out = dispatch("calculator", json!({"expression": "-3*-(2+1)"})).await;
    assert_eq!(out.message.role, Role::Tool);
    assert_eq!(out.message.tool_call_id.as_deref(), Some("call_7"));
    assert_eq!(out.message.text(), "9");
    assert!(out.is_ok() && !out.is_invalid_action());
}

#[tokio::test]
async fn tool_failure_is_not_an_invalid_action() {
    let out = dispatch("calculator", json!({"expression": "1/0"})).await;
    assert_eq!(out.message.text(), "error: division by zero at position 1");
    assert!(matches!(out.error, Some(ToolError::Failed(_))));
    assert!(!out.is_invalid_action());
}

#[tokio::test]
async fn unknown_tool_lists_available_tools() {
    let out = dispatch("search", json!({})).await;
    assert_eq!(out.error, Some(ToolError::UnknownTool("search".into())));
    assert!(out.is_invalid_action());
    let text = out.message.text();
    assert!(text.starts_with("error: unknown tool `search`"), "{text}");
    assert!(text.contains("calculator"), "{text}");
}

#[tokio::test]
async fn bad_json() {
    let out = dispatch_raw("calculator", "{\"expression\": \"1+1\"").await;
    assert!(out.is_invalid_action());
    let text = out.message.text();
    assert!(
        text.starts_with("error: invalid arguments: arguments are not valid JSON"),
        "{text}"
    );
    assert!(text.contains("expression"), "{text}");
}

#[tokio::test]
async fn schema_wrong_type() {
    let out = dispatch("calculator", json!({"expression": 5})).await;
    assert!(out.is_invalid_action());
    let Some(ToolError::InvalidArguments(msg)) = out.error else {
        panic!("expected invalid arguments, got {:?}", out.error);
    };
    assert_eq!(msg, "/expression: 5 is not of type \"string\"");
}

#[tokio::test]
async fn schema_missing_field() {
    let out = dispatch("calculator", json!({})).await;
    assert!(out.is_invalid_action());
    let Some(ToolError::InvalidArguments(msg)) = out.error else {
        panic!("expected invalid arguments");
    };
    assert!(
        msg.contains("\"expression\" is a required property"),
        "{msg}"
    );
}

#[tokio::test]
async fn schema_extra_field() {
    let out = dispatch("calculator", json!({"expression": "1", "precision": 3})).await;
    assert!(out.is_invalid_action());
    let Some(ToolError::InvalidArguments(msg)) = out.error else {
        panic!("expected invalid arguments");
    };
    assert!(msg.contains("precision"), "{msg}");
}

#[tokio::test]
async fn blank_arguments_mean_an_empty_object() {
    let out = dispatch_raw("repeat", "  ").await;
    assert!(out.is_ok(), "{:?}", out.error);
    assert_eq!(out.message.text(), "");
}

#[tokio::test]
async fn slow_tool_times_out() {
    let out = dispatch("sleep", json!({"ms": 5_000})).await;
    assert_eq!(out.error, Some(ToolError::Timeout(50)));
    assert_eq!(out.message.text(), "error: timed out after 50 ms");
    assert!(!out.is_invalid_action());
    let fast = dispatch("sleep", json!({"ms": 1})).await;
    assert_eq!(fast.message.text(), "done");
}

#[tokio::test]
async fn huge_output_is_truncated() {
    let out = dispatch("repeat", json!({"n": 100_000})).await;
    assert!(out.is_ok());
    let expected = format!("{}\n…[truncated 99800 chars]", "é".repeat(200));
    assert_eq!(out.message.text(), expected);
    let short = dispatch("repeat", json!({"n": 200})).await;
    assert_eq!(short.message.text(), "é".repeat(200));
}

#[tokio::test]
async fn panicking_tool_becomes_a_failure() {
    let out = dispatch("crash", json!({})).await;
    assert!(!out.is_invalid_action());
    assert!(matches!(&out.error, Some(ToolError::Failed(m)) if m.contains("boom")));
}
