//! `code-fix`: the reference solver with real Python in the bubblewrap sandbox, partial scores
//! of the buggy project, test files the agent edits, determinism, splits and malformed actions.

use std::collections::HashSet;

use agentrl_core::{Env, Message, Split, Step, ToolCall};
use agentrl_env::code_fix::{apply_fixes, project_of};
use agentrl_env::{CodeFix, EnvFactory, lookup};
use serde_json::json;

use crate::common::contract::{
    assert_all_invalid, assert_disjoint_splits, assert_reference_solver, assert_same_tasks,
    require_bwrap, task_data, unparsable_call,
};

fn call(name: &str, args: serde_json::Value) -> Message {
    Message::assistant_tool_calls(None, vec![ToolCall::new("c1", name, &args)])
}

async fn finish(env: &mut Box<dyn Env>) -> Step {
    let step = env.step(&Message::assistant("done")).await.unwrap();
    assert!(step.terminated, "{step:?}");
    step
}

#[tokio::test]
async fn reference_solver_passes_every_test() {
    require_bwrap();
    let factory = lookup("code-fix").unwrap();
    assert_reference_solver(&*factory, 30, 95).await;
}

#[tokio::test]
async fn buggy_project_scores_the_share_of_passing_tests() {
    require_bwrap();
    let factory = CodeFix::default();
    for i in 0..12 {
        let task = factory.task(Split::Test, i);
        let project = project_of(&task).unwrap();
        let mut env = factory.make();
        env.reset(&task).await.unwrap();
        let step = finish(&mut env).await;
        let passed = step.info.extra["tests_passed"].as_u64().unwrap() as usize;
        assert_eq!(step.info.extra["tests_total"], json!(project.tests));
        assert!(passed < project.tests, "{}: bugs not caught", task.id);
        // Functions without a planted bug pass all their tests.
        let bugged: HashSet<&str> = project.bugs.iter().map(|b| b.function.as_str()).collect();
        let clean_functions = project.tests / 3 - bugged.len();
        assert!(passed >= clean_functions * 3, "{}: {passed}", task.id);
        assert_eq!(step.info.success, Some(false));
        assert!((step.reward - passed as f64 / project.tests as f64).abs() < 1e-12);
        assert_eq!(step.info.score, Some(step.reward));
    }
}

#[tokio::test]
async fn editing_the_tests_does_not_count_and_broken_code_scores_zero() {
    require_bwrap();
    let factory = CodeFix::default();
    let task = factory.task(Split::Train, 5);
    let project = project_of(&task).unwrap();
    let mut env = factory.make();
    env.reset(&task).await.unwrap();
    let gutted =
        "import unittest\n\nclass T(unittest.TestCase):\n    def test_ok(self):\n        pass\n";
    let step = env
        .step(&call(
            "write_file",
            json!({"path": project.test_file(), "content": gutted}),
        ))
        .await
        .unwrap();
    assert!(step.info.invalid_action.is_none());
    assert!(finish(&mut env).await.info.success == Some(false));

    // A module that never finishes importing: the run is killed, no test passes.
    let mut env = factory.make();
    env.reset(&task).await.unwrap();
    let hang = json!({"path": project.module_file(), "content": "while True:\n    pass\n"});
    env.step(&call("write_file", hang)).await.unwrap();
    let step = finish(&mut env).await;
    assert_eq!(step.reward, 0.0);
    assert_eq!(step.info.extra["tests_passed"], json!(0));

    // Fixing the module by hand (the fixes applied to the file) passes everything.
    let mut env = factory.make();
    env.reset(&task).await.unwrap();
    let fixed = apply_fixes(&project.files[&project.module_file()], &project.bugs);
    let write = json!({"path": project.module_file(), "content": fixed});
    env.step(&call("write_file", write)).await.unwrap();
    let step = finish(&mut env).await;
    assert_eq!((step.reward, step.info.success), (1.0, Some(true)));
}

#[test]
fn tasks_are_deterministic_disjoint_and_bugs_are_unique_lines() {
    let (a, b) = (CodeFix::new(2), CodeFix::new(2));
    assert_same_tasks(&a, &b, &[Split::Test], 300);
    for i in 0..300 {
        let task = a.task(Split::Test, i);
        let project = project_of(&task).unwrap();
        assert!((1..=2).contains(&project.bugs.len()));
        let source = &project.files[&project.module_file()];
        for bug in &project.bugs {
            let count = source.lines().filter(|l| *l == bug.buggy).count();
            assert_eq!(count, 1, "{}: {bug:?}", task.id);
        }
    }
    assert_disjoint_splits(&a, 500, task_data, 450, 450);
}

#[tokio::test]
async fn malformed_actions_get_error_observations() {
    require_bwrap();
    let factory = lookup("code-fix").unwrap();
    let mut env = factory.make();
    env.reset(&factory.task(Split::Test, 0)).await.unwrap();
    let actions = [
        unparsable_call("write_file"),
        call("no_such_tool", json!({})),
        call("write_file", json!({"path": "x.py"})),
        call("read_file", json!({"path": "/etc/passwd"})),
        Message::assistant(""),
        Message::system("hi"),
    ];
    assert_all_invalid(&mut env, &actions).await;
    let step = env
        .step(&call(
            "shell",
            json!({"command": "python3 -m unittest 2>&1 | tail -n 1"}),
        ))
        .await
        .unwrap();
    assert!(step.messages[0].text().contains("FAILED"), "{step:?}");
}
