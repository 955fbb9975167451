//! `os-shell`: the reference solver in the real bubblewrap sandbox, the checker on wrong
//! answers and half-done chores, determinism, disjoint splits and malformed actions.

use std::collections::HashSet;

use agentrl_core::{Env, Message, Split, ToolCall};
use std::path::PathBuf;

use agentrl_env::os_shell::{OsShellEnv, Question, ShellExpert, path_matches, shell_task_of};
use agentrl_env::{EnvFactory, OsShell, lookup};
use agentrl_tools::SandboxConfig;
use serde_json::json;

use crate::common::contract::{
    assert_all_invalid, assert_disjoint_splits, assert_reference_solver, assert_same_tasks,
    assert_seeds_differ, raw_call, require_bwrap, task_data, unparsable_call,
};

fn shell(command: &str) -> Message {
    let call = ToolCall::new("c1", "shell", &json!({ "command": command }));
    Message::assistant_tool_calls(None, vec![call])
}

#[tokio::test]
async fn reference_solver_solves_the_test_split() {
    require_bwrap();
    let factory = lookup("os-shell").unwrap();
    let tasks = 40;
    assert_reference_solver(&*factory, tasks, 95).await;
    let kinds: HashSet<String> = (0..tasks)
        .map(|i| {
            factory.task(Split::Test, i).data["kind"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    assert_eq!(kinds.len(), 4, "{kinds:?}");
}

#[tokio::test]
async fn checker_rejects_wrong_answers() {
    require_bwrap();
    let factory = OsShell::default();
    for i in 0..20 {
        let task = factory.task(Split::Test, i);
        let parsed = shell_task_of(&task).unwrap();
        let wrong = match (&parsed.question, parsed.answer()) {
            (Question::RenameTxt, _) => "done".to_string(),
            (_, Some(a)) => match a.parse::<i64>() {
                Ok(n) => (n + 1).to_string(),
                Err(_) => "data/none.csv".to_string(),
            },
            (_, None) => unreachable!(),
        };
        let mut env = factory.make();
        env.reset(&task).await.unwrap();
        if parsed.question == Question::RenameTxt {
            // Only half of the chore: rename one file, keep the others.
            let one =
                "f=$(find notes -name '*.txt' | sort | head -n 1); mv \"$f\" \"${f%.txt}.md\"";
            let step = env.step(&shell(one)).await.unwrap();
            assert!(!step.done());
            let txt = parsed
                .files
                .keys()
                .filter(|p| p.starts_with("notes/") && p.ends_with(".txt"))
                .count();
            let done = env.step(&Message::assistant(wrong)).await.unwrap();
            assert_eq!(done.info.success, Some(txt == 1), "{}", task.id);
        } else {
            let done = env.step(&Message::assistant(wrong.clone())).await.unwrap();
            assert!(done.terminated);
            assert_eq!(done.info.success, Some(false), "{}: {wrong}", task.id);
            assert_eq!(done.reward, 0.0);
        }
    }
}

#[tokio::test]
async fn rename_checked_on_the_final_workspace() {
    require_bwrap();
    let factory = OsShell::default();
    let task = (0..200)
        .map(|i| factory.task(Split::Train, i))
        .find(|t| t.data["kind"] == "rename_txt")
        .unwrap();
    let mut env = factory.make();
    env.reset(&task).await.unwrap();
    // Renaming but also clobbering the content fails.
    let cmd = ShellExpert::command(&Question::RenameTxt)
        + "; for f in $(find notes -name '*.md'); do echo x > \"$f\"; done";
    env.step(&shell(&cmd)).await.unwrap();
    let done = env.step(&Message::assistant("done")).await.unwrap();
    assert_eq!(done.info.success, Some(false));
}

#[test]
fn path_answers() {
    assert!(path_matches(
        "The largest is `data/a-1.csv`.",
        "data/a-1.csv"
    ));
    assert!(path_matches("./data/a-1.csv", "data/a-1.csv"));
    assert!(!path_matches(
        "data/a-1.csv is not it, data/b.csv",
        "data/a-1.csv"
    ));
    assert!(!path_matches("", "data/a-1.csv"));
}

#[test]
fn same_seed_same_tasks_and_disjoint_splits() {
    let (a, b) = (OsShell::new(3), OsShell::new(3));
    assert_same_tasks(&a, &b, &[Split::Test], 50);
    assert_disjoint_splits(&a, 300, task_data, 290, 290);
    assert_seeds_differ(&a, &OsShell::new(4), 45);
}

#[tokio::test]
async fn malformed_actions_get_error_observations() {
    require_bwrap();
    let factory = lookup("os-shell").unwrap();
    let mut env = factory.make();
    env.reset(&factory.task(Split::Test, 0)).await.unwrap();
    let actions = [
        unparsable_call("shell"),
        raw_call("rm_rf", "{}"),
        raw_call("shell", r#"{"command": 5}"#),
        raw_call("read_file", r#"{"path": "../etc/passwd"}"#),
        Message::assistant(" "),
        Message::user("hi"),
    ];
    assert_all_invalid(&mut env, &actions).await;
    // A failing command is a normal observation, not an invalid action.
    let step = env.step(&shell("cat no-such-file")).await.unwrap();
    assert!(step.info.invalid_action.is_none());
    assert!(
        step.messages[0].text().contains("exit status: 1"),
        "{step:?}"
    );
}

#[tokio::test]
async fn shell_runs_in_the_task_workspace() {
    require_bwrap();
    let factory = OsShell::default();
    let mut env = factory.make();
    env.reset(&factory.task(Split::Test, 0)).await.unwrap();
    let step = env.step(&shell("pwd; ls")).await.unwrap();
    assert!(step.messages[0].text().contains("/workspace"), "{step:?}");
    assert!(step.messages[0].text().contains("logs"), "{step:?}");
}

#[tokio::test]
async fn a_sandbox_that_cannot_start_is_an_env_error_not_an_observation() {
    let factory = OsShell::default();
    let missing = SandboxConfig {
        bwrap: PathBuf::from("/nonexistent/bwrap"),
        ..SandboxConfig::default()
    };
    let mut env = OsShellEnv::new(missing);
    env.reset(&factory.task(Split::Test, 0)).await.unwrap();
    let err = env.step(&shell("ls")).await.unwrap_err().to_string();
    assert!(err.contains("os-shell"), "{err}");
    assert!(
        err.contains("bubblewrap (`/nonexistent/bwrap`) was not found"),
        "{err}"
    );
}

#[tokio::test]
async fn preflight_starts_the_sandbox() {
    require_bwrap();
    OsShell::default().preflight().await.unwrap();
}
