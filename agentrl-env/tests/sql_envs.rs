//! `sql-analysis` and `spreadsheet-ops`: reference solvers, checkers, ground truth against
//! SQL, determinism, split disjointness, turn limits and malformed actions.

use std::collections::HashSet;

use agentrl_core::{Env, Message, Split, Step, Task, ToolCall};
use agentrl_env::spreadsheet_ops::{Job, SheetTask};
use agentrl_env::sql_analysis::{SqlTask, Truth, check};
use agentrl_env::{EnvFactory, SpreadsheetOps, SqlAnalysis, lookup};
use serde_json::json;

use crate::common::contract::{
    assert_disjoint_splits, assert_invalid, assert_reference_solver, assert_same_tasks,
    assert_seeds_differ, raw_call, unparsable_call,
};

const IDS: [&str; 2] = ["sql-analysis", "spreadsheet-ops"];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reference_solvers_solve_the_test_split() {
    for id in IDS {
        let factory = lookup(id).unwrap();
        assert!(!factory.description().is_empty());
        assert_reference_solver(&*factory, 100, 95).await;
    }
}

#[test]
fn same_seed_gives_identical_tasks_and_seeds_differ() {
    for id in IDS {
        let (a, b) = (lookup(id).unwrap(), lookup(id).unwrap());
        assert_same_tasks(&*a, &*b, &[Split::Train, Split::Test], 50);
    }
    assert_seeds_differ(&SqlAnalysis::new(1), &SqlAnalysis::new(2), 40);
    assert_seeds_differ(&SpreadsheetOps::new(1), &SpreadsheetOps::new(2), 40);
}

/// The task data without its rendered `text` (which repeats the rest).
fn data_without_text(task: &Task) -> String {
    let mut data = task.data.clone();
    data.as_object_mut().unwrap().remove("text");
    data.to_string()
}

#[test]
fn splits_are_disjoint_over_1000_tasks() {
    for id in IDS {
        assert_disjoint_splits(&*lookup(id).unwrap(), 1000, data_without_text, 900, 900);
    }
}

#[test]
fn every_question_and_job_kind_occurs() {
    let sql = SqlAnalysis::default();
    let kinds: HashSet<String> = (0..200)
        .map(|i| sql.task(Split::Train, i).data["question"]["kind"].to_string())
        .collect();
    assert_eq!(kinds.len(), 7, "{kinds:?}");
    let sheet = SpreadsheetOps::default();
    let kinds: HashSet<String> = (0..200)
        .map(|i| sheet.task(Split::Train, i).data["job"]["kind"].to_string())
        .collect();
    assert_eq!(kinds.len(), 6, "{kinds:?}");
}

/// The generator's ground truth, computed from the rows, agrees with SQLite running the
/// reference query on the same rows.
#[test]
fn ground_truth_matches_sql_over_300_tasks() {
    let factory = SqlAnalysis::default();
    for i in 0..300 {
        let task = SqlTask::from_task(&factory.task(Split::Train, i)).unwrap();
        let conn = rusqlite::Connection::open_in_memory().unwrap();
        task.shop.load(&conn).unwrap();
        let sql = task.question.reference_sql();
        let value: rusqlite::types::Value = conn.query_row(&sql, [], |r| r.get(0)).unwrap();
        match (&task.truth, value) {
            (Truth::Number(n), rusqlite::types::Value::Integer(v)) => {
                assert_eq!(*n, v as f64, "{sql}")
            }
            (Truth::Number(n), rusqlite::types::Value::Real(v)) => {
                assert!((n - v).abs() <= 0.005 + 1e-9, "{sql}: {n} vs {v}")
            }
            (Truth::Name { name, .. }, rusqlite::types::Value::Text(v)) => {
                assert_eq!(name, &v, "{sql}")
            }
            (truth, value) => panic!("{sql}: {truth:?} vs {value:?}"),
        }
    }
}

async fn started(factory: &dyn EnvFactory, task: &Task) -> Box<dyn Env> {
    let mut env = factory.make();
    env.reset(task).await.unwrap();
    env
}

async fn final_answer(factory: &dyn EnvFactory, task: &Task, text: &str) -> Step {
    let mut env = started(factory, task).await;
    let step = env.step(&Message::assistant(text)).await.unwrap();
    assert!(step.terminated, "{text}: {step:?}");
    step
}

fn sql_call(query: &str) -> Message {
    Message::assistant_tool_calls(
        None,
        vec![ToolCall::new("c1", "sql", &json!({ "query": query }))],
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sql_checker_rejects_wrong_answers() {
    let factory = SqlAnalysis::default();
    let mut seen_number = false;
    let mut seen_name = false;
    for i in 0..40 {
        let task = factory.task(Split::Test, i);
        let truth = SqlTask::from_task(&task).unwrap().truth;
        let (right, wrong) = match &truth {
            Truth::Number(n) => {
                seen_number = true;
                (format!("{n}"), format!("{}", n + 1.0))
            }
            Truth::Name { name, candidates } => {
                seen_name = true;
                let other = candidates.iter().find(|c| *c != name).unwrap();
                (name.clone(), other.to_string())
            }
        };
        assert!(check(&truth, &right));
        assert_eq!(
            final_answer(&factory, &task, &right).await.info.success,
            Some(true),
            "{right}"
        );
        let step = final_answer(&factory, &task, &wrong).await;
        assert_eq!(step.info.success, Some(false), "{wrong}");
        assert_eq!(step.reward, 0.0);
    }
    assert!(seen_number && seen_name);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sql_session_is_read_only_and_limits_turns() {
    let factory = SqlAnalysis::default();
    let task = factory.task(Split::Test, 0);
    let mut env = started(&factory, &task).await;
    let refused = env.step(&sql_call("DELETE FROM orders")).await.unwrap();
    assert!(
        refused.messages[0].text().contains("read-only"),
        "{refused:?}"
    );
    assert!(refused.info.invalid_action.is_none() && refused.info.tool_errors == 1);
    let bad = env.step(&sql_call("SELEC 1")).await.unwrap();
    assert!(bad.messages[0].text().contains("syntax error"), "{bad:?}");
    let count = env
        .step(&sql_call("SELECT COUNT(*) FROM orders"))
        .await
        .unwrap();
    let orders = SqlTask::from_task(&task).unwrap().shop.orders.len();
    assert_eq!(
        count.messages[0].text(),
        format!("COUNT(*)\n{orders}\n(1 row)")
    );
    let mut last = None;
    for _ in 3..factory.max_turns() {
        last = Some(env.step(&sql_call("SELECT 1")).await.unwrap());
    }
    assert!(last.unwrap().truncated);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_episode_has_its_own_database_removed_afterwards() {
    let factory = SqlAnalysis::default();
    let mut env = agentrl_env::SqlAnalysisEnv::default();
    env.reset(&factory.task(Split::Test, 0)).await.unwrap();
    let first = env.database().unwrap().dir().unwrap().to_path_buf();
    assert!(first.exists());
    env.step(&Message::assistant("7")).await.unwrap();
    assert!(env.database().is_none());
    assert!(
        !first.exists(),
        "the finished episode left its database behind"
    );
    env.reset(&factory.task(Split::Test, 1)).await.unwrap();
    let second = env.database().unwrap().dir().unwrap().to_path_buf();
    assert_ne!(first, second);
    drop(env);
    assert!(
        !second.exists(),
        "the dropped session left its database behind"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_actions_get_error_observations() {
    let malformed = [
        unparsable_call("sql"),
        unparsable_call("spreadsheet"),
        raw_call("no_such_tool", "{}"),
        raw_call("sql", r#"{"query": 5}"#),
        raw_call("spreadsheet", r#"{"op": "read", "range": ["A1"]}"#),
        raw_call("spreadsheet", r#"{"op": "read", "range": "A1:"}"#),
        Message::assistant(""),
        Message::user("hello"),
    ];
    for id in IDS {
        let factory = lookup(id).unwrap();
        let task = factory.task(Split::Test, 1);
        for action in &malformed {
            let step = started(&*factory, &task).await.step(action).await.unwrap();
            assert_invalid(id, &step);
        }
    }
}

/// The first test task whose job matches `want`.
fn sheet_task(want: fn(&Job) -> bool) -> (Task, SheetTask) {
    let factory = SpreadsheetOps::default();
    (0..)
        .map(|i| factory.task(Split::Test, i))
        .map(|t| (t.clone(), SheetTask::from_task(&t).unwrap()))
        .find(|(_, s)| want(&s.job))
        .unwrap()
}

fn sheet_call(args: serde_json::Value) -> Message {
    Message::assistant_tool_calls(None, vec![ToolCall::new("c1", "spreadsheet", &args)])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spreadsheet_checker_needs_the_right_answer_and_sheet() {
    let factory = SpreadsheetOps::default();
    // A look-up: the right number succeeds, a wrong one fails, and so does changing the sheet.
    let (task, sheet) = sheet_task(|j| matches!(j, Job::LookUp { .. }));
    let answer = sheet.expected_answer().unwrap();
    assert_eq!(
        final_answer(&factory, &task, &answer.to_string())
            .await
            .info
            .success,
        Some(true)
    );
    assert_eq!(
        final_answer(&factory, &task, &(answer + 1).to_string())
            .await
            .info
            .success,
        Some(false)
    );
    let mut env = started(&factory, &task).await;
    let wrote = env
        .step(&sheet_call(
            json!({"op": "write", "cell": "A2", "value": "junk"}),
        ))
        .await
        .unwrap();
    assert!(wrote.info.tool_errors == 0, "{wrote:?}");
    let step = env
        .step(&Message::assistant(answer.to_string()))
        .await
        .unwrap();
    assert_eq!(step.info.success, Some(false));
    assert_eq!(step.info.extra["sheet_ok"], json!(false));

    // An update: saying done without doing it fails; the right write succeeds; a wrong cell fails.
    let (task, sheet) = sheet_task(|j| matches!(j, Job::SetStock { .. }));
    let Job::SetStock { item, stock } = &sheet.job else {
        unreachable!()
    };
    let row = sheet.items.iter().position(|i| &i.name == item).unwrap() + 2;
    assert_eq!(
        final_answer(&factory, &task, "done").await.info.success,
        Some(false)
    );
    for (cell, success) in [(format!("C{row}"), true), (format!("D{row}"), false)] {
        let mut env = started(&factory, &task).await;
        env.step(&sheet_call(
            json!({"op": "write", "cell": cell, "value": stock}),
        ))
        .await
        .unwrap();
        let step = env.step(&Message::assistant("done")).await.unwrap();
        assert_eq!(step.info.success, Some(success), "{cell}");
    }
}
