//! The contract every env keeps, checked the same way for each: malformed actions are answered
//! with an error observation, tasks are deterministic and seeded, train and test splits are
//! disjoint, and the reference solver succeeds.

use std::collections::HashSet;

use agentrl_core::{Env, Message, Split, Step, Task, ToolCall};
use agentrl_env::{EnvFactory, SolverEpisode, run_solver_episode};
use serde_json::json;

/// An assistant message calling `tool` with `arguments` as the raw (possibly broken) JSON text.
pub fn raw_call(tool: &str, arguments: &str) -> Message {
    let mut call = ToolCall::new("c1", tool, &json!({}));
    call.function.arguments = arguments.to_string();
    Message::assistant_tool_calls(None, vec![call])
}

/// An assistant message calling `tool` with arguments that are not JSON.
pub fn unparsable_call(tool: &str) -> Message {
    raw_call(tool, "{not json")
}

/// Asserts that the episode goes on after `step` and that a message of it mentions an error.
pub fn assert_error_observation(what: &str, step: &Step) {
    assert!(!step.done(), "{what}: {step:?}");
    assert!(
        step.messages.iter().any(|m| m.text().contains("error")),
        "{what}: {step:?}"
    );
}

/// Asserts that `step` answers an invalid action: `invalid_action` is set, the episode goes on
/// and a message mentions the error.
pub fn assert_invalid(what: &str, step: &Step) {
    assert!(step.info.invalid_action.is_some(), "{what}: {step:?}");
    assert_error_observation(what, step);
}

/// Steps every action of `actions` in `env`, asserting each is answered as an invalid action.
pub async fn assert_all_invalid(env: &mut Box<dyn Env>, actions: &[Message]) {
    for action in actions {
        let step = env.step(action).await.unwrap();
        assert_invalid(&format!("{action:?}"), &step);
    }
}

/// Asserts that `a` and `b` (built alike) give identical tasks at indices `0..n` of each split
/// in `splits`, each naming `a`'s env id and its split.
pub fn assert_same_tasks(a: &dyn EnvFactory, b: &dyn EnvFactory, splits: &[Split], n: u64) {
    let id = a.id();
    for index in 0..n {
        for &split in splits {
            let task = a.task(split, index);
            assert_eq!(task, b.task(split, index), "{id}: {split} {index}");
            assert_eq!((task.env_id.as_str(), task.split), (id, split));
        }
    }
}

/// Asserts that factories `a` and `b` (of different seeds) differ in the data of more than
/// `more_than` of their first 50 train tasks.
pub fn assert_seeds_differ(a: &dyn EnvFactory, b: &dyn EnvFactory, more_than: usize) {
    let differing = (0..50)
        .filter(|&i| a.task(Split::Train, i).data != b.task(Split::Train, i).data)
        .count();
    assert!(differing > more_than, "{}: {differing}", a.id());
}

/// The whole task data as text: the default key for [`assert_disjoint_splits`].
pub fn task_data(task: &Task) -> String {
    task.data.to_string()
}

/// Asserts that no task among the first `n` of the train split has the `key` of one among the
/// first `n` of the test split, that the train and test splits hold more than `min_train` and
/// `min_test` distinct keys, and that every task names its split.
pub fn assert_disjoint_splits(
    factory: &dyn EnvFactory,
    n: u64,
    key: impl Fn(&Task) -> String,
    min_train: usize,
    min_test: usize,
) {
    let id = factory.id();
    let set = |split| -> HashSet<String> {
        (0..n)
            .map(|i| {
                let task = factory.task(split, i);
                assert_eq!(task.split, split, "{id}: task {i}");
                key(&task)
            })
            .collect()
    };
    let (train, test) = (set(Split::Train), set(Split::Test));
    assert!(train.is_disjoint(&test), "{id}");
    assert!(
        train.len() > min_train && test.len() > min_test,
        "{id}: too many repeats ({} train, {} test)",
        train.len(),
        test.len()
    );
}

/// Plays the reference solver (`factory.solver(0)`) on the first `tasks` test tasks and asserts
/// that at least `percent` per cent succeed; returns the episodes.
pub async fn assert_reference_solver(
    factory: &dyn EnvFactory,
    tasks: u64,
    percent: u64,
) -> Vec<SolverEpisode> {
    let id = factory.id();
    let mut solver = factory.solver(0);
    let mut episodes = Vec::new();
    for i in 0..tasks {
        let task = factory.task(Split::Test, i);
        let episode = run_solver_episode(factory, &mut *solver, &task)
            .await
            .unwrap();
        if !episode.success {
            eprintln!("{id}: unsolved {}: {:?}", task.id, episode.messages);
        }
        episodes.push(episode);
    }
    let solved = episodes.iter().filter(|e| e.success).count() as u64;
    println!("{id} reference solver: {solved}/{tasks}");
    assert!(solved * 100 >= percent * tasks, "{id}: {solved}/{tasks}");
    episodes
}

/// Fails the test with a clear message when bubblewrap (which the sandboxed envs run their
/// commands in) is not installed.
pub fn require_bwrap() {
    let ok = std::process::Command::new("bwrap")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        ok,
        "these tests need bubblewrap (`bwrap`) in PATH; install it (e.g. apt-get install bubblewrap)"
    );
}
