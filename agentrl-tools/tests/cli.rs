//! `agentrl tool list` and `agentrl tool call`, parsed from the same arguments as on the
//! command line and run in process.

use agentrl_tools::cli::{ToolCommand, run};
use clap::Parser;

/// The `agentrl tool` part of the command line.
#[derive(Parser)]
struct Cli {
    #[command(subcommand)]
    command: ToolCommand,
}

/// What a `tool` command printed and, when it failed, the error the binary reports.
struct Output {
    stdout: String,
    error: Option<String>,
}

impl Output {
    fn success(&self) -> bool {
        self.error.is_none()
    }
}

/// Runs `agentrl tool ARGS...` (the `tool` word is left out) in process.
fn tool(args: &[&str]) -> Output {
    let cli = Cli::try_parse_from(std::iter::once("tool").chain(args.iter().copied())).unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let mut out = Vec::new();
    let result = rt.block_on(run(cli.command, &mut out));
    Output {
        stdout: String::from_utf8(out).unwrap(),
        error: result.err().map(|e| format!("error: {e}")),
    }
}

fn stdout(out: &Output) -> String {
    out.stdout.clone()
}

fn stderr(out: &Output) -> String {
    out.error.clone().unwrap_or_default()
}

#[test]
fn lists_every_tool() {
    let out = tool(&["list"]);
    assert!(out.success(), "{}", stderr(&out));
    let text = stdout(&out);
    let names: Vec<&str> = text.lines().filter_map(|l| l.split('\t').next()).collect();
    assert_eq!(
        names,
        [
            "calculator",
            "read_file",
            "write_file",
            "list_dir",
            "shell",
            "python",
            "sql",
            "spreadsheet",
            "search",
            "http",
            "browser"
        ]
    );
    assert!(
        text.contains("calculator\tEvaluates an arithmetic expression"),
        "{text}"
    );
}

#[test]
fn calls_the_calculator() {
    let out = tool(&["call", "calculator", r#"{"expression":"6*7"}"#]);
    assert!(out.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out), "42\n");
}

#[test]
fn bad_arguments_fail_with_a_clear_error() {
    let out = tool(&["call", "calculator", r#"{"expr":"6*7"}"#]);
    assert!(!out.success());
    assert!(stdout(&out).is_empty());
    let err = stderr(&out);
    assert!(
        err.contains("error: tool `calculator`: invalid arguments:")
            && err.contains("\"expression\" is a required property"),
        "{err}"
    );
    let out = tool(&["call", "calculator", "{not json"]);
    assert!(!out.success());
    assert!(
        stderr(&out).contains("arguments are not valid JSON"),
        "{}",
        stderr(&out)
    );
    let out = tool(&["call", "no_such_tool", "{}"]);
    assert!(!out.success());
    assert!(
        stderr(&out).contains("unknown tool `no_such_tool` (available tools: calculator"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn workspace_tools_use_the_given_directory() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().to_str().unwrap();
    let args = r#"{"path":"a.txt","content":"hi"}"#;
    let out = tool(&["call", "write_file", args, "--workspace", ws]);
    assert!(out.success(), "{}", stderr(&out));
    let out = tool(&[
        "call",
        "shell",
        r#"{"command":"cat a.txt"}"#,
        "--workspace",
        ws,
    ]);
    assert!(out.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out), "exit status: 0\n--- stdout ---\nhi\n");
    let out = tool(&["call", "read_file", r#"{"path":"a.txt"}"#]);
    assert!(!out.success());
    assert!(
        stderr(&out).contains("needs a session workspace"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn sql_runs_on_a_database_file_read_only_unless_told() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("shop.sqlite");
    let db = db.to_str().unwrap();
    for statement in [
        "CREATE TABLE items (name TEXT, price REAL)",
        "INSERT INTO items VALUES ('pen', 1.5), ('ink', 4.0)",
    ] {
        let args = serde_json::json!({ "query": statement }).to_string();
        let out = tool(&["call", "sql", &args, "--database", db, "--write"]);
        assert!(out.success(), "{}", stderr(&out));
    }
    let sum = r#"{"query": "SELECT SUM(price) AS total FROM items"}"#;
    let out = tool(&["call", "sql", sum, "--database", db]);
    assert!(out.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains("5.5"), "{}", stdout(&out));
    let insert = r#"{"query": "INSERT INTO items VALUES ('cap', 2)"}"#;
    let out = tool(&["call", "sql", insert, "--database", db]);
    assert!(!out.success());
    assert!(stderr(&out).contains("read-only"), "{}", stderr(&out));
}

#[test]
fn spreadsheet_search_and_web_tools_take_their_resources_from_flags() {
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("stock.csv");
    std::fs::write(&csv, "item,count\n\"pens, blue\",12\nink,3\n").unwrap();
    let sheet = format!("stock={}", csv.display());
    let sum = r#"{"op": "aggregate", "sheet": "stock", "range": "B2:B3", "function": "sum"}"#;
    let out = tool(&["call", "spreadsheet", sum, "--sheet", &sheet]);
    assert!(out.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains("15"), "{}", stdout(&out));

    let corpus = dir.path().join("corpus");
    std::fs::create_dir(&corpus).unwrap();
    std::fs::write(
        corpus.join("a.txt"),
        "Quillbrook Mills\nFounded in Tarnfield.",
    )
    .unwrap();
    std::fs::write(corpus.join("b.md"), "Velmora Dask\nAn inventor.").unwrap();
    let query = r#"{"query": "Tarnfield"}"#;
    let out = tool(&[
        "call",
        "search",
        query,
        "--corpus",
        corpus.to_str().unwrap(),
    ]);
    assert!(out.success(), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("Quillbrook Mills"),
        "{}",
        stdout(&out)
    );

    let get = r#"{"method": "GET", "url": "http://127.0.0.1:9/x"}"#;
    let out = tool(&["call", "http", get]);
    assert!(!out.success());
    let bad = tool(&["call", "http", get, "--allow", "ftp://x"]);
    assert!(stderr(&bad).contains("--allow"), "{}", stderr(&bad));
}
