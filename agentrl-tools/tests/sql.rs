//! The `sql` tool on real SQLite databases: read-only refusals, row/output/time limits, bad
//! SQL and malformed calls through the ToolBox, and the private database being removed on drop.

use std::sync::Arc;
use std::time::Duration;

use agentrl_core::{ToolCall, ToolContext, ToolError};
use agentrl_tools::{Sql, SqlAccess, SqlDatabase, SqlLimits, ToolBox, ToolLimits, ToolOutcome};
use serde_json::json;

/// A database with `items(id, name, price)` holding `n` rows, opened with `access`.
fn items(n: i64, access: SqlAccess) -> Arc<SqlDatabase> {
    let db = SqlDatabase::build(access, |conn| {
        conn.execute_batch(
            "CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT, price INTEGER)",
        )?;
        for i in 1..=n {
            conn.execute(
                "INSERT INTO items (name, price) VALUES (?1, ?2)",
                rusqlite_params(i),
            )?;
        }
        Ok(())
    })
    .unwrap();
    Arc::new(db)
}

fn rusqlite_params(i: i64) -> (String, i64) {
    (format!("item{i}"), i * 10)
}

fn toolbox(db: Arc<SqlDatabase>, limits: SqlLimits) -> ToolBox {
    ToolBox::new(ToolLimits {
        timeout: Duration::from_secs(30),
        max_output_chars: 100_000,
    })
    .with(Sql::new(db, limits))
    .unwrap()
}

async fn call(tools: &ToolBox, arguments: &str) -> ToolOutcome {
    let mut call = ToolCall::new("c1", "sql", &json!({}));
    call.function.arguments = arguments.to_string();
    tools.dispatch(&call, &ToolContext::default()).await
}

async fn query(tools: &ToolBox, sql: &str) -> ToolOutcome {
    call(tools, &json!({ "query": sql }).to_string()).await
}

fn failed_with(outcome: &ToolOutcome, text: &str) {
    assert!(
        matches!(&outcome.error, Some(ToolError::Failed(m)) if m.contains(text)),
        "expected a failure containing {text:?}: {outcome:?}"
    );
    assert!(outcome.message.text().starts_with("error: "), "{outcome:?}");
}

#[tokio::test]
async fn selects_render_a_table() {
    let tools = toolbox(items(3, SqlAccess::ReadOnly), SqlLimits::default());
    let out = query(
        &tools,
        "SELECT name, price, price / 4.0 AS q, NULL AS n FROM items WHERE id <= 2",
    )
    .await;
    assert!(out.is_ok(), "{out:?}");
    assert_eq!(
        out.message.text(),
        "name | price | q | n\nitem1 | 10 | 2.5 | NULL\nitem2 | 20 | 5.0 | NULL\n(2 rows)"
    );
    let sum = query(&tools, "SELECT SUM(price) FROM items;").await;
    assert_eq!(sum.message.text(), "SUM(price)\n60\n(1 row)");
}

#[tokio::test]
async fn read_only_refuses_every_write() {
    let db = items(3, SqlAccess::ReadOnly);
    let tools = toolbox(Arc::clone(&db), SqlLimits::default());
    for write in [
        "INSERT INTO items (name, price) VALUES ('x', 1)",
        "UPDATE items SET price = 0",
        "DELETE FROM items",
        "DROP TABLE items",
        "CREATE TABLE t (x)",
    ] {
        failed_with(&query(&tools, write).await, "read-only");
    }
    // Settings that would lift read-only mode, and other files, are refused too.
    failed_with(&query(&tools, "PRAGMA query_only = 0").await, "not allowed");
    let other = tempfile::tempdir().unwrap();
    let path = other.path().join("x.db");
    let attach = format!("ATTACH DATABASE '{}' AS x", path.display());
    failed_with(&query(&tools, &attach).await, "not allowed");
    assert!(!path.exists());
    let count = query(&tools, "SELECT COUNT(*), SUM(price) FROM items").await;
    assert_eq!(
        count.message.text(),
        "COUNT(*) | SUM(price)\n3 | 60\n(1 row)"
    );
    // Reading pragmas still work.
    assert!(
        query(&tools, "PRAGMA table_info(items)")
            .await
            .message
            .text()
            .contains("price")
    );
}

#[tokio::test]
async fn read_write_changes_only_its_own_database() {
    let tools = toolbox(items(2, SqlAccess::ReadWrite), SqlLimits::default());
    let out = query(&tools, "UPDATE items SET price = price + 1").await;
    assert_eq!(out.message.text(), "ok (2 rows changed)");
    let out = query(&tools, "SELECT price FROM items ORDER BY id").await;
    assert_eq!(out.message.text(), "price\n11\n21\n(2 rows)");
    let other = tempfile::tempdir().unwrap();
    let path = other.path().join("copy.db");
    let vacuum = format!("VACUUM INTO '{}'", path.display());
    assert!(!query(&tools, &vacuum).await.is_ok());
    failed_with(
        &query(&tools, &format!("ATTACH '{}' AS x", path.display())).await,
        "not allowed",
    );
    assert!(!path.exists(), "a statement wrote another file");
}

#[tokio::test]
async fn values_and_the_database_size_are_capped() {
    let tools = toolbox(items(1, SqlAccess::ReadWrite), SqlLimits::default());
    failed_with(
        &query(&tools, "SELECT length(printf('%.2000000c', 'x'))").await,
        "too big",
    );
    let pages = query(&tools, "PRAGMA max_page_count").await;
    assert_eq!(pages.message.text(), "max_page_count\n16384\n(1 row)");
    failed_with(
        &query(&tools, "PRAGMA max_page_count = 1000000").await,
        "not allowed",
    );
}

#[tokio::test]
async fn row_limit_says_how_many_rows_there_were() {
    let limits = SqlLimits {
        max_rows: 5,
        ..SqlLimits::default()
    };
    let tools = toolbox(items(120, SqlAccess::ReadOnly), limits);
    let out = query(&tools, "SELECT id FROM items").await;
    let text = out.message.text();
    assert_eq!(text.lines().count(), 1 + 5 + 1, "{text}");
    assert!(text.contains("showing the first 5 of 120 rows"), "{text}");
    assert!(text.starts_with("id\n1\n2\n3\n4\n5\n"), "{text}");
}

#[tokio::test]
async fn output_limit_cuts_long_results() {
    let limits = SqlLimits {
        max_output_chars: 100,
        ..SqlLimits::default()
    };
    let tools = toolbox(items(3, SqlAccess::ReadOnly), limits);
    let out = query(&tools, "SELECT printf('%.500c', 'x') AS long").await;
    let text = out.message.text();
    assert!(out.is_ok(), "{out:?}");
    assert!(text.contains("…[output limit: showing 100 of"), "{text}");
    assert!(text.chars().count() < 200, "{text}");
}

#[tokio::test]
async fn a_statement_past_the_time_limit_is_stopped() {
    let limits = SqlLimits {
        time_limit: Duration::from_millis(300),
        ..SqlLimits::default()
    };
    let tools = toolbox(items(3, SqlAccess::ReadOnly), limits);
    let endless = "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n) \
                   SELECT COUNT(*) FROM n";
    let out = query(&tools, endless).await;
    failed_with(&out, "time limit of 300 ms");
    // The connection is usable again afterwards.
    assert_eq!(
        query(&tools, "SELECT COUNT(*) FROM items")
            .await
            .message
            .text(),
        "COUNT(*)\n3\n(1 row)"
    );
}

#[tokio::test]
async fn bad_sql_gets_clear_errors() {
    let tools = toolbox(items(1, SqlAccess::ReadOnly), SqlLimits::default());
    failed_with(
        &query(&tools, "SELEC name FROM items").await,
        "syntax error",
    );
    failed_with(
        &query(&tools, "SELECT * FROM nope").await,
        "no such table: nope",
    );
    failed_with(
        &query(&tools, "SELECT nope FROM items").await,
        "no such column: nope",
    );
    failed_with(
        &query(&tools, "SELECT 1; SELECT 2").await,
        "only one statement per call",
    );
}

#[tokio::test]
async fn malformed_calls_are_invalid_actions() {
    let tools = toolbox(items(1, SqlAccess::ReadOnly), SqlLimits::default());
    for arguments in [
        "{not json",
        r#"{"query": 5}"#,
        "{}",
        r#"{"query": "SELECT 1", "x": 1}"#,
    ] {
        let out = call(&tools, arguments).await;
        assert!(out.is_invalid_action(), "{arguments}: {out:?}");
    }
    let empty = query(&tools, "   ").await;
    assert!(empty.is_invalid_action(), "{empty:?}");
    assert!(empty.message.text().contains("`query` is empty"));
}

#[test]
fn the_database_directory_is_removed_on_drop() {
    let db = items(2, SqlAccess::ReadOnly);
    let dir = db.dir().unwrap().to_path_buf();
    assert!(dir.join("task.sqlite").exists());
    drop(db);
    assert!(!dir.exists());
}
