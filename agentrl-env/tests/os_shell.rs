//! `os-shell`: the reference solver in the real bubblewrap sandbox, the checker on wrong
//! answers and half-done chores, determinism, disjoint splits and malformed actions.

use std::collections::HashSet;

use agentrl_core::{Env, Message, Split, ToolCall};
use agentrl_env::os_shell::{Question, ShellExpert, path_matches, shell_task_of};
use agentrl_env::{EnvFactory, OsShell, lookup, run_solver_episode};
use serde_json::json;

/// Fails the test with a clear message when bubblewrap is not installed.
fn require_bwrap() {
    let ok = std::process::Command::new("bwrap")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        ok,
        "these tests need bubblewrap (`bwrap`) in PATH; install it (e.g. apt-get install bubblewrap)"
    );
}

fn shell(command: &str) -> Message {
    let call = ToolCall::new("c1", "shell", &json!({ "command": command }));
    Message::assistant_tool_calls(None, vec![call])
}

#[tokio::test]
async fn reference_solver_solves_the_test_split() {
    require_bwrap();
    let factory = lookup("os-shell").unwrap();
    let mut solver = factory.solver(0);
    let mut kinds = HashSet::new();
    let tasks = 40;
    let mut solved = 0;
    for i in 0..tasks {
        let task = factory.task(Split::Test, i);
        kinds.insert(task.data["kind"].as_str().unwrap().to_string());
        let episode = run_solver_episode(&*factory, &mut *solver, &task)
            .await
            .unwrap();
        if episode.success {
            solved += 1;
        } else {
            eprintln!("unsolved {}: {:?}", task.id, episode.messages);
        }
    }
    println!("os-shell reference solver: {solved}/{tasks}");
    assert!(solved * 100 >= tasks * 95, "{solved}/{tasks}");
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
    for i in 0..50 {
        assert_eq!(a.task(Split::Test, i), b.task(Split::Test, i));
    }
    let set = |split| -> HashSet<String> {
        (0..300)
            .map(|i| a.task(split, i).data.to_string())
            .collect()
    };
    let (train, test) = (set(Split::Train), set(Split::Test));
    assert!(train.is_disjoint(&test));
    assert!(train.len() > 290 && test.len() > 290);
    let other = OsShell::new(4);
    let differing = (0..50)
        .filter(|&i| a.task(Split::Train, i).data != other.task(Split::Train, i).data)
        .count();
    assert!(differing > 45);
}

#[tokio::test]
async fn malformed_actions_get_error_observations() {
    require_bwrap();
    let factory = lookup("os-shell").unwrap();
    let mut env = factory.make();
    env.reset(&factory.task(Split::Test, 0)).await.unwrap();
    let mut raw = ToolCall::new("c1", "shell", &json!({}));
    raw.function.arguments = "{not json".into();
    let actions = [
        Message::assistant_tool_calls(None, vec![raw]),
        Message::assistant_tool_calls(None, vec![ToolCall::new("c2", "rm_rf", &json!({}))]),
        Message::assistant_tool_calls(
            None,
            vec![ToolCall::new("c3", "shell", &json!({"command": 5}))],
        ),
        Message::assistant_tool_calls(
            None,
            vec![ToolCall::new(
                "c4",
                "read_file",
                &json!({"path": "../etc/passwd"}),
            )],
        ),
        Message::assistant(" "),
        Message::user("hi"),
    ];
    for action in &actions {
        let step = env.step(action).await.unwrap();
        assert!(!step.done(), "{step:?}");
        assert!(
            step.messages.iter().any(|m| m.text().contains("error")),
            "{step:?}"
        );
    }
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
