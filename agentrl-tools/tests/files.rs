//! The workspace file tools: round trips, listing, size limits and refused escapes.

use std::path::Path;

use agentrl_core::{ToolCall, ToolContext, ToolError};
use agentrl_tools::{FileLimits, ListDir, ReadFile, ToolBox, ToolLimits, ToolOutcome, WriteFile};
use serde_json::{Value, json};

fn toolbox() -> ToolBox {
    let limits = FileLimits {
        max_read_bytes: 10,
        max_write_bytes: 100,
        max_list_entries: 3,
    };
    ToolBox::new(ToolLimits::default())
        .with(ReadFile { limits })
        .and_then(|b| b.with(WriteFile { limits }))
        .and_then(|b| b.with(ListDir { limits }))
        .unwrap()
}

async fn call(ws: Option<&Path>, name: &str, args: Value) -> ToolOutcome {
    let ctx = ToolContext {
        workspace: ws.map(Path::to_path_buf),
    };
    toolbox()
        .dispatch(&ToolCall::new("call_1", name, &args), &ctx)
        .await
}

fn invalid(out: &ToolOutcome) -> String {
    match &out.error {
        Some(ToolError::InvalidArguments(m)) => m.clone(),
        other => panic!(
            "expected invalid arguments, got {other:?}: {}",
            out.message.text()
        ),
    }
}

fn failed(out: &ToolOutcome) -> String {
    match &out.error {
        Some(ToolError::Failed(m)) => m.clone(),
        other => panic!("expected a failure, got {other:?}: {}", out.message.text()),
    }
}

#[tokio::test]
async fn write_read_and_list() {
    let dir = tempfile::tempdir().unwrap();
    let ws = Some(dir.path());
    let out = call(
        ws,
        "write_file",
        json!({"path": "notes/a.txt", "content": "héllo"}),
    )
    .await;
    assert_eq!(out.message.text(), "wrote 6 bytes to notes/a.txt");
    assert_eq!(
        std::fs::read_to_string(dir.path().join("notes/a.txt")).unwrap(),
        "héllo"
    );
    let out = call(ws, "read_file", json!({"path": "./notes/a.txt"})).await;
    assert_eq!(out.message.text(), "héllo");
    call(
        ws,
        "write_file",
        json!({"path": "notes/a.txt", "content": "hi"}),
    )
    .await;
    assert_eq!(
        call(ws, "read_file", json!({"path": "notes/a.txt"}))
            .await
            .message
            .text(),
        "hi"
    );

    std::fs::write(dir.path().join("z.txt"), "").unwrap();
    let out = call(ws, "list_dir", json!({"path": "."})).await;
    assert_eq!(out.message.text(), "notes/\nz.txt (0 bytes)");
    let out = call(ws, "list_dir", json!({"path": "notes"})).await;
    assert_eq!(out.message.text(), "a.txt (2 bytes)");
    std::fs::create_dir(dir.path().join("empty")).unwrap();
    assert_eq!(
        call(ws, "list_dir", json!({"path": "empty"}))
            .await
            .message
            .text(),
        "(empty directory)"
    );
    for i in 0..3 {
        std::fs::write(dir.path().join(format!("f{i}")), "x").unwrap();
    }
    let text = call(ws, "list_dir", json!({"path": ""}))
        .await
        .message
        .text()
        .to_string();
    assert!(text.ends_with("…[3 more entries not shown]"), "{text}");
}

#[tokio::test]
async fn size_limits() {
    let dir = tempfile::tempdir().unwrap();
    let ws = Some(dir.path());
    std::fs::write(dir.path().join("long.txt"), "0123456789abcdef").unwrap();
    let out = call(ws, "read_file", json!({"path": "long.txt"})).await;
    assert_eq!(
        out.message.text(),
        "0123456789\n…[file truncated: it has 16 bytes, only the first 10 are shown]"
    );
    let out = call(
        ws,
        "write_file",
        json!({"path": "big", "content": "x".repeat(101)}),
    )
    .await;
    assert!(invalid(&out).contains("101 bytes, more than the limit of 100"));
    assert!(!dir.path().join("big").exists());
}

#[tokio::test]
async fn escapes_are_refused() {
    let outer = tempfile::tempdir().unwrap();
    let ws_dir = outer.path().join("ws");
    std::fs::create_dir(&ws_dir).unwrap();
    let secret_dir = outer.path().join("secret");
    std::fs::create_dir(&secret_dir).unwrap();
    std::fs::write(secret_dir.join("key"), "s3cret").unwrap();
    std::os::unix::fs::symlink(&secret_dir, ws_dir.join("link")).unwrap();
    std::os::unix::fs::symlink(secret_dir.join("new"), ws_dir.join("dangling")).unwrap();
    let ws = Some(ws_dir.as_path());

    let msg = invalid(&call(ws, "read_file", json!({"path": "../secret/key"})).await);
    assert!(msg.contains("goes up with `..`"), "{msg}");
    let key = secret_dir.join("key").display().to_string();
    let msg = invalid(&call(ws, "read_file", json!({"path": key})).await);
    assert!(msg.contains("is absolute"), "{msg}");
    let msg = invalid(&call(ws, "read_file", json!({"path": "link/key"})).await);
    assert!(msg.contains("resolves outside the workspace"), "{msg}");
    invalid(&call(ws, "list_dir", json!({"path": "link"})).await);
    invalid(
        &call(
            ws,
            "write_file",
            json!({"path": "link/new", "content": "x"}),
        )
        .await,
    );
    invalid(
        &call(
            ws,
            "write_file",
            json!({"path": "link/deeper/new", "content": "x"}),
        )
        .await,
    );
    let msg = invalid(
        &call(
            ws,
            "write_file",
            json!({"path": "dangling", "content": "x"}),
        )
        .await,
    );
    assert!(msg.contains("missing target"), "{msg}");
    invalid(
        &call(
            ws,
            "write_file",
            json!({"path": "../escape", "content": "x"}),
        )
        .await,
    );
    assert_eq!(
        std::fs::read_dir(&secret_dir).unwrap().count(),
        1,
        "nothing was written outside"
    );
    assert!(!outer.path().join("escape").exists());

    // A link that stays inside the workspace is fine.
    std::fs::create_dir(ws_dir.join("real")).unwrap();
    std::os::unix::fs::symlink(ws_dir.join("real"), ws_dir.join("alias")).unwrap();
    let out = call(
        ws,
        "write_file",
        json!({"path": "alias/f", "content": "ok"}),
    )
    .await;
    assert!(out.is_ok(), "{}", out.message.text());
    assert_eq!(
        std::fs::read_to_string(ws_dir.join("real/f")).unwrap(),
        "ok"
    );
}

#[tokio::test]
async fn clear_failures() {
    let dir = tempfile::tempdir().unwrap();
    let ws = Some(dir.path());
    let msg = failed(&call(None, "read_file", json!({"path": "a"})).await);
    assert_eq!(
        msg,
        "`read_file` needs a session workspace, and this session has none"
    );
    let msg = failed(&call(ws, "read_file", json!({"path": "missing.txt"})).await);
    assert_eq!(msg, "`missing.txt` does not exist in the workspace");
    std::fs::create_dir(dir.path().join("d")).unwrap();
    assert!(failed(&call(ws, "read_file", json!({"path": "d"})).await).contains("use list_dir"));
    assert!(
        failed(&call(ws, "write_file", json!({"path": "d", "content": ""})).await)
            .contains("is a directory")
    );
    let msg = invalid(&call(ws, "write_file", json!({"path": ".", "content": ""})).await);
    assert!(msg.contains("names the workspace itself"), "{msg}");
    let out = call(ws, "write_file", json!({"path": "a"})).await;
    assert!(out.is_invalid_action(), "schema requires content");
}
