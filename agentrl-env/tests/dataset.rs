//! `dataset`: task files of one's own (JSONL and Parquet) with a column mapping, each checker,
//! bad rows skipped with their line or row, splits by column and by stable hash, and the
//! generator envs (`math-reasoning`, `sql-analysis`, `knowledge-search`) playing user data.

use crate::common;

use std::path::{Path, PathBuf};

use agentrl_core::{Message, Split, Step, Task, ToolCall};
use agentrl_env::dataset::{
    DATASET_ID, Dataset, DatasetOptions, EnvOptions, REFERENCE_NOTE, RecordPlace, hash_split,
};
use agentrl_env::{EnvFactory, env_ids, env_option_docs, lookup, lookup_with_options};
use serde_json::{Value, json};

/// GSM8K-shaped rows: a question and an answer ending in `#### N`.
const GSM8K_ROWS: &[(&str, &str)] = &[
    (
        "Ann has 3 apples and buys 4 more. How many?",
        "3 + 4 = 7\n#### 7",
    ),
    (
        "Ben has 10 pens and gives away 2. How many?",
        "10 - 2 = 8\n#### 8",
    ),
    (
        "6 boxes hold 5 cards each. How many cards?",
        "6 * 5 = 30\n#### 30",
    ),
    (
        "A shop sells 1,200 cups and 34 more. How many?",
        "#### 1,234",
    ),
];

/// Writes `lines` as a file named `name` in `dir`.
fn write_file(dir: &Path, name: &str, lines: &[String]) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    path
}

/// A JSON line of a GSM8K-shaped row.
fn gsm_line(question: &str, answer: &str) -> String {
    json!({ "question": question, "answer": answer }).to_string()
}

/// Options from a JSON object.
fn options(value: Value) -> EnvOptions {
    match value {
        Value::Object(map) => map,
        other => panic!("options must be an object, got {other}"),
    }
}

/// Plays `actions` on a fresh session of `task`; returns the observation's messages and the
/// last step.
async fn play(factory: &dyn EnvFactory, task: &Task, actions: &[Message]) -> (Vec<Message>, Step) {
    let mut env = factory.make();
    let observation = env.reset(task).await.unwrap();
    let mut last = None;
    for action in actions {
        last = Some(env.step(action).await.unwrap());
    }
    (observation.messages, last.expect("at least one action"))
}

/// The verdict of the final `answer` on task `index` of `split`.
async fn answer(factory: &dyn EnvFactory, split: Split, index: u64, answer: &str) -> Step {
    let task = factory.task(split, index);
    play(factory, &task, &[Message::assistant(answer)]).await.1
}

/// Every task of `split` by index over one cycle.
fn tasks(factory: &Dataset, split: Split) -> Vec<Task> {
    (0..factory.len(split) as u64)
        .map(|i| factory.task(split, i))
        .collect()
}

#[tokio::test]
async fn jsonl_rows_map_and_bad_rows_are_skipped_with_their_line() {
    let dir = tempfile::tempdir().unwrap();
    let mut lines: Vec<String> = GSM8K_ROWS.iter().map(|(q, a)| gsm_line(q, a)).collect();
    lines.insert(1, "{not json".into()); // line 2
    lines.insert(3, json!({ "question": "no answer" }).to_string()); // line 4
    lines.insert(4, gsm_line("no marker", "the answer is 5")); // line 5
    lines.insert(5, json!({ "question": "q", "answer": ["7"] }).to_string()); // line 6
    lines.insert(6, String::new()); // line 7: blank, ignored
    lines.insert(7, "[1, 2]".into()); // line 8
    let path = write_file(dir.path(), "gsm8k.jsonl", &lines);
    let mut opts = DatasetOptions::for_file(&path);
    opts.answer_pattern = Some("#### (.*)$".into());
    opts.test_fraction = Some(0.0);
    let dataset = Dataset::load(&opts).unwrap();

    let skipped: Vec<(RecordPlace, &str)> = dataset
        .skipped_rows()
        .iter()
        .map(|w| (w.place, w.reason.as_str()))
        .collect();
    let places: Vec<RecordPlace> = skipped.iter().map(|(p, _)| *p).collect();
    assert_eq!(
        places,
        [2, 4, 5, 6, 8].map(RecordPlace::Line),
        "{skipped:?}"
    );
    assert!(skipped[0].1.contains("invalid JSON"), "{skipped:?}");
    assert!(
        skipped[1].1.contains("missing column `answer`"),
        "{skipped:?}"
    );
    assert!(skipped[2].1.contains("answer_pattern"), "{skipped:?}");
    assert!(skipped[3].1.contains("column `answer`"), "{skipped:?}");
    assert!(skipped[4].1.contains("not a JSON object"), "{skipped:?}");
    assert_eq!(skipped[0].0.to_string(), "line 2");

    assert_eq!(dataset.len(Split::Train), 4);
    let references: Vec<String> = tasks(&dataset, Split::Train)
        .iter()
        .map(|t| t.data["reference"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(references, ["7", "8", "30", "1,234"]);
    // The train split cycles through its rows in file order, deterministically.
    assert_eq!(dataset.task(Split::Train, 5), dataset.task(Split::Train, 1));
    assert_eq!(dataset.task(Split::Train, 0).id, "line-1");
    // No test rows: evaluation reuses the train rows.
    assert_eq!(dataset.len(Split::Test), 0);
    assert_eq!(
        dataset.task(Split::Test, 0).data,
        dataset.task(Split::Train, 0).data
    );

    let (shown, step) = play(
        &dataset,
        &dataset.task(Split::Train, 0),
        &[Message::assistant("3 + 4 = 7 apples. Answer: 7")],
    )
    .await;
    assert_eq!(shown, [Message::user(GSM8K_ROWS[0].0)]);
    assert_eq!(step.info.success, Some(true));
    assert_eq!(step.reward, 1.0);
    let boxed = answer(&dataset, Split::Train, 3, "so \\boxed{1234}").await;
    assert_eq!(
        boxed.info.success,
        Some(true),
        "auto is numeric: 1,234 = 1234"
    );
    let wrong = answer(&dataset, Split::Train, 1, "Answer: 9").await;
    assert_eq!(wrong.info.success, Some(false));
    assert_eq!(wrong.info.extra["feedback"], "9 is too high");
}

#[tokio::test]
async fn messages_ids_system_prompt_and_tools() {
    let dir = tempfile::tempdir().unwrap();
    let row = json!({
        "uid": 17,
        "chat": [
            { "role": "system", "content": "Be brief." },
            { "role": "user", "content": "What is 12*12?" }
        ],
        "gold": 144
    });
    let bad_role = json!({ "uid": 18, "chat": [{ "role": "robot", "content": "x" }], "gold": 1 });
    let plain = json!({ "uid": 19, "chat": [{ "role": "user", "content": "2+2?" }], "gold": 4 });
    let path = write_file(
        dir.path(),
        "chat.jsonl",
        &[row.to_string(), bad_role.to_string(), plain.to_string()],
    );
    let factory = lookup_with_options(
        DATASET_ID,
        &options(json!({
            "path": path, "messages": "chat", "answer": "gold", "id_column": "uid",
            "tools": ["calculator"], "system": "You are a careful solver.",
            "test_fraction": 0.0, "max_turns": 3
        })),
    )
    .unwrap();
    assert_eq!(factory.id(), DATASET_ID);
    assert_eq!(factory.max_turns(), 3);
    let task = factory.task(Split::Train, 0);
    assert_eq!(task.id, "17");
    let call = ToolCall::new("c1", "calculator", &json!({ "expression": "12*12" }));
    let mut env = factory.make();
    let observation = env.reset(&task).await.unwrap();
    assert_eq!(observation.messages[0], Message::system("Be brief."));
    assert_eq!(
        observation.messages.len(),
        2,
        "the row's own system prompt wins"
    );
    assert_eq!(observation.tools.len(), 1);
    let tool_step = env
        .step(&Message::assistant_tool_calls(None, vec![call]))
        .await
        .unwrap();
    assert!(!tool_step.done());
    assert_eq!(tool_step.messages[0].text(), "144");
    let last = env.step(&Message::assistant("144")).await.unwrap();
    assert_eq!(last.info.success, Some(true));

    let plain_task = factory.task(Split::Train, 1);
    assert_eq!(
        plain_task.id, "19",
        "row 18 has an unknown role and is skipped"
    );
    let (shown, _) = play(&*factory, &plain_task, &[Message::assistant("4")]).await;
    assert_eq!(shown[0], Message::system("You are a careful solver."));
}

/// A dataset of `rows` (JSON objects) with extra `opts`; all rows in train unless `opts` sets
/// a split column.
fn dataset_of(dir: &Path, rows: &[Value], opts: Value) -> Dataset {
    let lines: Vec<String> = rows.iter().map(Value::to_string).collect();
    let path = write_file(dir, "rows.jsonl", &lines);
    let mut all = options(opts);
    all.insert("path".into(), json!(path));
    if !all.contains_key("split_column") {
        all.insert("test_fraction".into(), json!(0.0));
    }
    Dataset::from_options(&all).unwrap()
}

#[tokio::test]
async fn in_process_checkers_and_per_row_override() {
    let dir = tempfile::tempdir().unwrap();
    let rows = [
        json!({ "question": "capital of France?", "answer": "Paris" }),
        json!({ "question": "pi to 3 places?", "answer": "3.142", "check": "numeric" }),
        json!({ "question": "a date?", "answer": "^\\d{4}-\\d{2}-\\d{2}$", "check": "regex" }),
        json!({ "question": "a colour?", "answer": "blue", "check": "contains" }),
        json!({ "question": "q", "answer": "x", "check": "fuzzy" }),
    ];
    let dataset = dataset_of(
        dir.path(),
        &rows,
        json!({ "checker": "exact", "checker_column": "check" }),
    );
    assert_eq!(dataset.len(Split::Train), 4);
    let skipped = &dataset.skipped_rows()[0];
    assert_eq!(skipped.place, RecordPlace::Line(5));
    assert!(
        skipped.reason.contains("unknown checker `fuzzy`"),
        "{skipped}"
    );

    let cases = [
        (0, "Answer: paris.", true),
        (0, "Answer: Lyon", false),
        (1, "about 3.1420000001", true),
        (1, "3.14", false),
        (2, "Answer: 2024-05-01", true),
        (2, "Answer: May 1st", false),
        (3, "I think it is Blue, mostly.", true),
        (3, "red", false),
    ];
    for (index, reply, solved) in cases {
        let step = answer(&dataset, Split::Train, index, reply).await;
        assert_eq!(step.info.success, Some(solved), "row {index}: {reply}");
    }
}

#[tokio::test]
async fn numeric_tolerance_is_an_option() {
    let dir = tempfile::tempdir().unwrap();
    let rows = [json!({ "question": "g?", "answer": "9.81" })];
    let strict = dataset_of(dir.path(), &rows, json!({ "checker": "numeric" }));
    let loose = dataset_of(
        dir.path(),
        &rows,
        json!({ "checker": "numeric", "tolerance": 0.01 }),
    );
    let close = "Answer: 9.8";
    let strict_step = answer(&strict, Split::Train, 0, close).await;
    assert_eq!(strict_step.info.success, Some(false));
    assert_eq!(
        answer(&loose, Split::Train, 0, close).await.info.success,
        Some(true)
    );
}

#[tokio::test]
async fn the_judge_checker_leaves_the_verdict_to_the_reward() {
    let dir = tempfile::tempdir().unwrap();
    let rows = [json!({ "question": "Write a haiku about rain.", "answer": "5-7-5 lines" })];
    let dataset = dataset_of(dir.path(), &rows, json!({ "checker": "judge" }));
    let step = answer(&dataset, Split::Train, 0, "Rain taps on the roof...").await;
    assert!(step.terminated);
    assert_eq!(step.info.success, None);
    assert_eq!(step.info.extra["reference"], "5-7-5 lines");
    assert_eq!(
        step.messages[0].text(),
        format!("{REFERENCE_NOTE}5-7-5 lines")
    );
}

#[tokio::test]
async fn python_and_shell_checkers_run_in_the_sandbox() {
    common::contract::require_bwrap();
    let dir = tempfile::tempdir().unwrap();
    let python = "import os, sys\nsys.exit(0 if sys.stdin.read().strip()[::-1] == os.environ['REFERENCE'] else 1)\n";
    let shell = "read answer\n[ \"$answer\" = \"$REFERENCE$REFERENCE\" ]\n";
    let rows = [
        json!({ "question": "reverse abc", "answer": "abc" }),
        json!({ "question": "say 12 twice", "answer": "12", "kind": "shell", "code": shell }),
    ];
    let dataset = dataset_of(
        dir.path(),
        &rows,
        json!({
            "checker": "python", "script": python,
            "checker_column": "kind", "script_column": "code"
        }),
    );
    let cases = [
        (0, "Answer: cba", true),
        (0, "Answer: abc", false),
        (1, "1212", true),
        (1, "12", false),
    ];
    for (index, reply, solved) in cases {
        let step = answer(&dataset, Split::Train, index, reply).await;
        assert_eq!(
            step.info.success,
            Some(solved),
            "row {index}: {reply}: {step:?}"
        );
    }
    let failed = answer(&dataset, Split::Train, 0, "Answer: abc").await;
    assert!(
        failed.info.extra["feedback"]
            .as_str()
            .unwrap()
            .contains("exit status: 1"),
        "{failed:?}"
    );
}

#[test]
fn splits_by_column_and_by_stable_hash() {
    let dir = tempfile::tempdir().unwrap();
    let rows: Vec<Value> = ["train", "test", "validation", "TRAIN", "holdout"]
        .iter()
        .enumerate()
        .map(|(i, s)| json!({ "question": format!("q{i}"), "answer": i, "split": s }))
        .collect();
    let by_column = dataset_of(dir.path(), &rows, json!({ "split_column": "split" }));
    let ids =
        |d: &Dataset, split| -> Vec<String> { tasks(d, split).into_iter().map(|t| t.id).collect() };
    assert_eq!(ids(&by_column, Split::Train), ["line-1", "line-4"]);
    assert_eq!(ids(&by_column, Split::Test), ["line-2", "line-3"]);
    assert_eq!(by_column.skipped_rows()[0].place, RecordPlace::Line(5));
    assert!(by_column.task(Split::Test, 0).split == Split::Test);

    let many: Vec<Value> = (0..200)
        .map(|i| json!({ "id": format!("task-{i}"), "question": format!("q{i}"), "answer": i }))
        .collect();
    let lines: Vec<String> = many.iter().map(Value::to_string).collect();
    let path = write_file(dir.path(), "many.jsonl", &lines);
    let load = || {
        Dataset::from_options(&options(json!({
            "path": path, "id_column": "id", "test_fraction": 0.25
        })))
        .unwrap()
    };
    let (first, second) = (load(), load());
    assert_eq!(ids(&first, Split::Test), ids(&second, Split::Test));
    for id in ids(&first, Split::Test) {
        assert_eq!(hash_split(&id, 0.25), Split::Test, "{id}");
    }
    let test_rows = first.len(Split::Test);
    assert!((30..=70).contains(&test_rows), "{test_rows} of 200 in test");
    assert_eq!(first.len(Split::Train) + test_rows, 200);
    // A fixed key always lands in the same split (the hash is stable across runs).
    assert_eq!(hash_split("task-0", 0.25), hash_split("task-0", 0.25));
    assert_eq!(hash_split("anything", 0.0), Split::Train);
}

#[test]
fn files_without_usable_rows_are_errors_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_file(
        dir.path(),
        "broken.jsonl",
        &["{oops".into(), json!({ "question": "q" }).to_string()],
    );
    let err = Dataset::load(&DatasetOptions::for_file(&path))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("broken.jsonl") && err.contains("no usable rows"),
        "{err}"
    );
    assert!(err.contains("2 skipped") && err.contains("line 1"), "{err}");

    let all_test = write_file(
        dir.path(),
        "t.jsonl",
        &[json!({"question": "q", "answer": 1, "s": "test"}).to_string()],
    );
    let mut opts = DatasetOptions::for_file(&all_test);
    opts.split_column = Some("s".into());
    let err = Dataset::load(&opts).unwrap_err().to_string();
    assert!(
        err.contains("t.jsonl") && err.contains("test split"),
        "{err}"
    );

    let missing = Dataset::load(&DatasetOptions::for_file(dir.path().join("nope.jsonl")));
    assert!(missing.unwrap_err().to_string().contains("nope.jsonl"));
    let csv = Dataset::load(&DatasetOptions::for_file(dir.path().join("x.csv")));
    assert!(csv.unwrap_err().to_string().contains("unknown format"));
}

#[test]
fn options_are_checked() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_file(dir.path(), "a.jsonl", &[gsm_line("q", "1")]);
    let err = |value: Value| {
        let mut all = options(value);
        all.insert("path".into(), json!(path));
        lookup_with_options(DATASET_ID, &all)
            .err()
            .unwrap()
            .to_string()
    };
    assert!(err(json!({ "colour": "red" })).contains("unknown field `colour`"));
    assert!(err(json!({ "tools": ["hammer"] })).contains("unknown tool `hammer`"));
    assert!(err(json!({ "tools": ["sql"] })).contains("`database`"));
    assert!(err(json!({ "checker": "python" })).contains("needs `script`"));
    assert!(err(json!({ "answer_pattern": "(" })).contains("answer_pattern"));
    assert!(err(json!({ "test_fraction": 1.5 })).contains("test_fraction"));
    let maze = lookup_with_options("maze", &options(json!({ "path": path })));
    assert!(maze.err().unwrap().to_string().contains("takes no options"));
    assert_eq!(
        lookup_with_options("maze", &EnvOptions::new())
            .unwrap()
            .id(),
        "maze"
    );
}

#[tokio::test]
async fn the_registry_lists_the_env_and_its_sample_is_solved() {
    assert!(env_ids().contains(&DATASET_ID));
    let docs = env_option_docs(DATASET_ID);
    for name in [
        "path",
        "prompt",
        "messages",
        "answer",
        "checker",
        "split_column",
    ] {
        assert!(docs.iter().any(|(n, _)| *n == name), "{name}");
    }
    assert_eq!(env_option_docs("math-reasoning")[0].0, "seed");
    assert!(env_option_docs("maze").is_empty());
    let sample = lookup(DATASET_ID).unwrap();
    assert!(
        sample.description().contains("path"),
        "{}",
        sample.description()
    );
    let report = agentrl_env::check(sample, 20).await.unwrap();
    report.ensure_passed().unwrap();
}

#[tokio::test]
async fn math_reasoning_plays_a_user_file() {
    let dir = tempfile::tempdir().unwrap();
    let lines: Vec<String> = GSM8K_ROWS.iter().map(|(q, a)| gsm_line(q, a)).collect();
    let path = write_file(dir.path(), "gsm.jsonl", &lines);
    let factory = lookup_with_options(
        "math-reasoning",
        &options(json!({ "path": path, "answer_pattern": "#### (.*)$", "test_fraction": 0.0 })),
    )
    .unwrap();
    assert_eq!(factory.id(), "math-reasoning");
    let task = factory.task(Split::Train, 2);
    assert_eq!(task.env_id, "math-reasoning");
    let (_, step) = play(&*factory, &task, &[Message::assistant("6*5 = 30")]).await;
    assert_eq!(step.info.success, Some(true));
    let seeded = lookup_with_options("math-reasoning", &options(json!({ "seed": 3 }))).unwrap();
    assert_ne!(
        seeded.task(Split::Train, 0),
        lookup("math-reasoning").unwrap().task(Split::Train, 0)
    );
    let stray = lookup_with_options("math-reasoning", &options(json!({ "answer": "x" })));
    assert!(stray.err().unwrap().to_string().contains("needs `path`"));
}

#[cfg(feature = "sql-envs")]
#[tokio::test]
async fn sql_analysis_plays_a_user_database_and_question_file() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("shop.sqlite");
    let conn = rusqlite::Connection::open(&db).unwrap();
    conn.execute_batch(
        "CREATE TABLE sales (region TEXT, amount REAL);
         INSERT INTO sales VALUES ('north', 10.5), ('south', 4.5), ('north', 5);",
    )
    .unwrap();
    drop(conn);
    let questions = write_file(
        dir.path(),
        "questions.jsonl",
        &[json!({ "question": "Total sales in the north?", "answer": "15.5" }).to_string()],
    );
    let factory = lookup_with_options(
        "sql-analysis",
        &options(json!({ "path": questions, "database": db, "test_fraction": 0.0 })),
    )
    .unwrap();
    assert_eq!(factory.id(), "sql-analysis");
    let query = "SELECT SUM(amount) FROM sales WHERE region = 'north'";
    let call = ToolCall::new("c1", "sql", &json!({ "query": query }));
    let task = factory.task(Split::Train, 0);
    let mut env = factory.make();
    let observation = env.reset(&task).await.unwrap();
    assert_eq!(observation.tools[0].name(), "sql");
    let result = env
        .step(&Message::assistant_tool_calls(None, vec![call]))
        .await
        .unwrap();
    assert!(result.messages[0].text().contains("15.5"), "{result:?}");
    let last = env.step(&Message::assistant("15.5")).await.unwrap();
    assert_eq!(last.info.success, Some(true));
    let without_db = lookup_with_options("sql-analysis", &options(json!({ "path": questions })));
    assert!(without_db.err().unwrap().to_string().contains("`database`"));
}

#[cfg(feature = "search-envs")]
#[tokio::test]
async fn knowledge_search_plays_a_user_corpus_and_question_file() {
    let dir = tempfile::tempdir().unwrap();
    let corpus = dir.path().join("docs");
    std::fs::create_dir_all(corpus.join("towns")).unwrap();
    std::fs::write(
        corpus.join("towns/varn.md"),
        "# Varn\nVarn is a harbour town famous for its glass.",
    )
    .unwrap();
    std::fs::write(
        corpus.join("people.txt"),
        "Ida Holm\nIda Holm was born in Varn.",
    )
    .unwrap();
    let questions = write_file(
        dir.path(),
        "q.jsonl",
        &[json!({ "question": "What is Varn famous for?", "answer": "glass" }).to_string()],
    );
    let factory = lookup_with_options(
        "knowledge-search",
        &options(json!({ "path": questions, "corpus": corpus, "test_fraction": 0.0 })),
    )
    .unwrap();
    let task = factory.task(Split::Train, 0);
    let call = ToolCall::new("c1", "search", &json!({ "query": "Varn famous" }));
    let mut env = factory.make();
    let observation = env.reset(&task).await.unwrap();
    assert_eq!(observation.messages[0].role, agentrl_core::Role::System);
    let result = env
        .step(&Message::assistant_tool_calls(None, vec![call]))
        .await
        .unwrap();
    assert!(
        result.messages[0].text().contains("towns/varn"),
        "{result:?}"
    );
    let last = env
        .step(&Message::assistant("It is famous for its Glass."))
        .await
        .unwrap();
    assert_eq!(
        last.info.success,
        Some(true),
        "contains is the default checker"
    );
}

#[cfg(feature = "dataset-parquet")]
mod parquet_files {
    use std::sync::Arc;

    use parquet::basic::{Compression, GzipLevel, ZstdLevel};
    use parquet::data_type::{ByteArray, ByteArrayType, Int64Type};
    use parquet::file::properties::WriterProperties;
    use parquet::file::writer::SerializedFileWriter;
    use parquet::schema::parser::parse_message_type;

    use super::*;

    /// One row group: questions, optional answers (None = null), and an int column.
    type Group<'a> = &'a [(&'a str, Option<&'a str>, i64)];

    /// Writes `groups` (each a row group) to a Parquet file with `compression`.
    fn write_parquet(path: &Path, compression: Compression, groups: &[Group]) {
        let schema = parse_message_type(
            "message tasks {
                REQUIRED BYTE_ARRAY question (UTF8);
                OPTIONAL BYTE_ARRAY answer (UTF8);
                REQUIRED INT64 points;
            }",
        )
        .unwrap();
        let props = WriterProperties::builder()
            .set_compression(compression)
            .build();
        let file = std::fs::File::create(path).unwrap();
        let mut writer =
            SerializedFileWriter::new(file, Arc::new(schema), Arc::new(props)).unwrap();
        for group in groups {
            let mut rows = writer.next_row_group().unwrap();
            let questions: Vec<ByteArray> = group.iter().map(|r| r.0.into()).collect();
            let answers: Vec<ByteArray> =
                group.iter().filter_map(|r| r.1.map(Into::into)).collect();
            let defined: Vec<i16> = group.iter().map(|r| i16::from(r.1.is_some())).collect();
            let points: Vec<i64> = group.iter().map(|r| r.2).collect();
            let mut column = rows.next_column().unwrap().unwrap();
            column
                .typed::<ByteArrayType>()
                .write_batch(&questions, None, None)
                .unwrap();
            column.close().unwrap();
            let mut column = rows.next_column().unwrap().unwrap();
            column
                .typed::<ByteArrayType>()
                .write_batch(&answers, Some(&defined), None)
                .unwrap();
            column.close().unwrap();
            let mut column = rows.next_column().unwrap().unwrap();
            column
                .typed::<Int64Type>()
                .write_batch(&points, None, None)
                .unwrap();
            column.close().unwrap();
            rows.close().unwrap();
        }
        writer.close().unwrap();
    }

    #[tokio::test]
    async fn parquet_row_groups_with_each_compression() {
        let dir = tempfile::tempdir().unwrap();
        let groups: [Group; 2] = [
            &[("2+3?", Some("#### 5"), 1), ("4*4?", Some("#### 16"), 2)],
            &[
                ("no answer", None, 3),
                ("9-1?", Some("#### 8"), 4),
                ("bad", Some("eight"), 5),
            ],
        ];
        let compressions = [
            ("snappy", Compression::SNAPPY),
            ("zstd", Compression::ZSTD(ZstdLevel::default())),
            ("gzip", Compression::GZIP(GzipLevel::default())),
        ];
        for (name, compression) in compressions {
            let path = dir.path().join(format!("tasks-{name}.parquet"));
            write_parquet(&path, compression, &groups);
            let mut opts = DatasetOptions::for_file(&path);
            opts.answer_pattern = Some("#### (.*)$".into());
            opts.test_fraction = Some(0.0);
            let dataset = Dataset::load(&opts).unwrap();
            let places: Vec<RecordPlace> = dataset.skipped_rows().iter().map(|w| w.place).collect();
            assert_eq!(places, [RecordPlace::Row(2), RecordPlace::Row(4)], "{name}");
            assert!(
                dataset.skipped_rows()[0]
                    .reason
                    .contains("column `answer` is null")
            );
            assert_eq!(
                dataset.skipped_rows()[0].to_string(),
                "row 2: column `answer` is null"
            );
            let ids: Vec<String> = tasks(&dataset, Split::Train)
                .into_iter()
                .map(|t| t.id)
                .collect();
            assert_eq!(ids, ["row-0", "row-1", "row-3"], "{name}");
            let step = answer(&dataset, Split::Train, 2, "Answer: 8").await;
            assert_eq!(step.info.success, Some(true), "{name}");
        }
        // An int column is a valid reference too.
        let path = dir.path().join("tasks-snappy.parquet");
        let mut opts = DatasetOptions::for_file(&path);
        opts.answer = "points".into();
        opts.checker = agentrl_env::dataset::CheckerKind::Numeric;
        opts.test_fraction = Some(0.0);
        let dataset = Dataset::load(&opts).unwrap();
        assert_eq!(dataset.len(Split::Train), 5);
        assert_eq!(dataset.task(Split::Train, 4).data["reference"], "5");
    }

    #[test]
    fn a_file_that_is_not_parquet_is_an_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = write_file(dir.path(), "fake.parquet", &["not parquet".into()]);
        let err = Dataset::load(&DatasetOptions::for_file(&path))
            .unwrap_err()
            .to_string();
        assert!(err.contains("fake.parquet"), "{err}");
    }
}

#[tokio::test]
async fn the_example_gsm8k_file_loads_whole_and_is_solved() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/data/gsm8k-tiny.jsonl");
    let factory = Dataset::from_options(&options(json!({
        "path": path, "answer_pattern": "#### (.*)$", "checker": "numeric",
        "test_fraction": 0.1
    })))
    .unwrap();
    assert!(
        factory.skipped_rows().is_empty(),
        "{:?}",
        factory.skipped_rows()
    );
    assert_eq!(factory.len(Split::Train) + factory.len(Split::Test), 120);
    assert!(factory.len(Split::Test) > 0);
    let report = agentrl_env::check(std::sync::Arc::new(factory), 20)
        .await
        .unwrap();
    report.ensure_passed().unwrap();
}
