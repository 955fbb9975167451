//! `math-reasoning`, `maze` and `text-adventure`: reference solvers, checkers, determinism,
//! split disjointness and malformed actions.

use agentrl_core::{Env, Message, Split, Task};
use agentrl_env::lookup;
use serde_json::json;

use crate::common::contract::{
    assert_disjoint_splits, assert_invalid, assert_reference_solver, assert_same_tasks,
    assert_seeds_differ, raw_call, task_data, unparsable_call,
};

const IDS: [&str; 3] = ["math-reasoning", "maze", "text-adventure"];

#[tokio::test]
async fn reference_solvers_solve_the_test_split() {
    for id in IDS {
        let factory = lookup(id).unwrap();
        assert_reference_solver(&*factory, 100, 95).await;
    }
}

#[test]
fn same_seed_gives_identical_tasks() {
    for id in IDS {
        let (a, b) = (lookup(id).unwrap(), lookup(id).unwrap());
        assert_same_tasks(&*a, &*b, &[Split::Train, Split::Test], 100);
    }
}

#[test]
fn seeds_select_different_task_sets() {
    use agentrl_env::{MathReasoning, Maze, TextAdventure};
    assert_seeds_differ(&MathReasoning::new(1), &MathReasoning::new(2), 40);
    assert_seeds_differ(&Maze::new(1), &Maze::new(2), 40);
    assert_seeds_differ(&TextAdventure::new(1), &TextAdventure::new(2), 40);
}

#[test]
fn splits_are_disjoint_over_1000_tasks() {
    for id in IDS {
        assert_disjoint_splits(&*lookup(id).unwrap(), 1000, task_data, 500, 500);
    }
}

async fn started(id: &str) -> Box<dyn Env> {
    let factory = lookup(id).unwrap();
    let mut env = factory.make();
    env.reset(&factory.task(Split::Test, 1)).await.unwrap();
    env
}

#[tokio::test]
async fn malformed_actions_get_error_observations() {
    let malformed = [
        unparsable_call("move"),
        unparsable_call("act"),
        raw_call("no_such_tool", "{}"),
        raw_call("move", r#"{"direction": 5}"#),
        raw_call("act", r#"{"command": ["go"]}"#),
        Message::assistant(""),
        Message::user("hello"),
    ];
    for id in IDS {
        for action in &malformed {
            let step = started(id).await.step(action).await.unwrap();
            assert_invalid(id, &step);
        }
    }
    let mut maze = started("maze").await;
    for action in [
        raw_call("move", r#"{"direction": "up"}"#),
        Message::assistant("north"),
    ] {
        assert_invalid("maze", &maze.step(&action).await.unwrap());
    }
    let mut adventure = started("text-adventure").await;
    for action in [
        Message::assistant("dance"),
        raw_call("act", r#"{"command": "fly away"}"#),
    ] {
        assert_invalid("text-adventure", &adventure.step(&action).await.unwrap());
    }
}

fn math_task() -> Task {
    lookup("math-reasoning").unwrap().task(Split::Test, 0)
}

#[tokio::test]
async fn math_checker_takes_the_last_number() {
    let task = math_task();
    let answer: i64 = task.data["answer"].as_str().unwrap().parse().unwrap();
    let factory = lookup("math-reasoning").unwrap();
    for (text, success) in [
        (format!("So it is {answer}."), true),
        (format!("{answer} or maybe {}", answer + 1), false),
        ("I do not know".to_string(), false),
    ] {
        let mut env = factory.make();
        let obs = env.reset(&task).await.unwrap();
        assert_eq!(
            obs.messages[0].text(),
            task.data["question"].as_str().unwrap()
        );
        assert!(obs.tools.is_empty());
        let step = env.step(&Message::assistant(text.clone())).await.unwrap();
        assert!(step.terminated, "{text}");
        assert_eq!(step.info.success, Some(success), "{text}");
        assert_eq!(step.reward, if success { 1.0 } else { 0.0 });
        assert_eq!(step.info.extra.contains_key("feedback"), !success);
    }
}

#[tokio::test]
async fn maze_walls_block_and_wandering_is_truncated() {
    let factory = lookup("maze").unwrap();
    let task = factory.task(Split::Test, 2);
    let mut env = factory.make();
    let obs = env.reset(&task).await.unwrap();
    assert_eq!(obs.tools[0].name(), "move");
    assert!(obs.messages[0].text().contains('A') && obs.messages[0].text().contains('G'));
    let mut last = None;
    for i in 0..factory.max_turns() {
        // Bouncing north and south never reaches a goal that is not in this column pair,
        // and is a valid action even against a wall.
        let dir = if i % 2 == 0 { "north" } else { "south" };
        let step = env
            .step(&raw_call("move", &json!({ "direction": dir }).to_string()))
            .await
            .unwrap();
        assert!(step.info.invalid_action.is_none());
        last = Some(step);
        if last.as_ref().unwrap().done() {
            break;
        }
    }
    let last = last.unwrap();
    assert!(last.done());
    assert!(last.truncated || last.info.success == Some(true));
}

#[tokio::test]
async fn adventure_checker_needs_the_goal() {
    let factory = lookup("text-adventure").unwrap();
    let task = factory.task(Split::Test, 3);
    let mut env = factory.make();
    let obs = env.reset(&task).await.unwrap();
    assert!(obs.messages[0].text().starts_with("Goal: "));
    for command in ["look", "inventory", "open door", "go nowhere-north"] {
        let step = env.step(&Message::assistant(command)).await.unwrap();
        assert!(!step.done(), "{command}: {step:?}");
        assert!(step.info.success.is_none());
    }
    let refused = env
        .step(&raw_call("act", r#"{"command": "drop lamp"}"#))
        .await
        .unwrap();
    assert!(refused.info.invalid_action.is_none());
    assert!(
        refused.messages[0].text().starts_with("cannot:"),
        "{refused:?}"
    );
}
