//! Scripted `arith-calc` agents played through whole episodes.

use agentrl_core::{Message, Role, Split, Task, ToolCall};
use agentrl_env::{
    ArithCalc, ArithDemonstrator, ArithExpert, EnvFactory, Solver, lookup, run_solver_episode,
};

#[tokio::test]
async fn expert_solves_every_test_task() {
    let factory = lookup("arith-calc").unwrap();
    let mut expert = factory.solver(0);
    for index in 0..200 {
        let task = factory.task(Split::Test, index);
        let episode = run_solver_episode(&*factory, &mut *expert, &task)
            .await
            .unwrap();
        assert!(episode.success, "{}: {:?}", task.id, episode.messages);
        assert_eq!(episode.steps, 2);
        assert!(!episode.truncated);
        assert_eq!(episode.tools.len(), 1);
        // user, assistant tool call, tool result, assistant answer
        let roles: Vec<Role> = episode.messages.iter().map(|m| m.role).collect();
        assert_eq!(
            roles,
            [Role::User, Role::Assistant, Role::Tool, Role::Assistant]
        );
        assert_eq!(episode.messages[1].tool_calls[0].id, "call_0");
        assert_eq!(
            episode.messages[3].text(),
            task.data["answer"].as_str().unwrap()
        );
    }
}

#[test]
fn expert_computes_itself_when_the_tool_fails() {
    let task = ArithCalc::default().task(Split::Train, 0);
    let call = ToolCall::new("call_0", "calculator", &serde_json::json!({}));
    let history = [
        Message::user("Compute"),
        Message::assistant_tool_calls(None, vec![call]),
        Message::tool("call_0", "error: something broke"),
    ];
    let reply = ArithExpert.act(&task, &history);
    assert_eq!(reply.text(), task.data["answer"].as_str().unwrap());
}

#[test]
fn solvers_do_not_panic_on_unreadable_tasks() {
    let task = Task {
        env_id: "arith-calc".into(),
        id: "bad".into(),
        split: Split::Train,
        data: serde_json::json!({"expression": 5}),
    };
    let reply = ArithExpert.act(&task, &[]);
    assert_eq!(reply.role, Role::Assistant);
    let reply = ArithDemonstrator::new(0, 1.0, 1.0, 0.0).act(&task, &[]);
    assert_eq!(reply.role, Role::Assistant);
}

async fn success_rate(solver: &mut ArithDemonstrator, tasks: u64) -> f64 {
    let factory = ArithCalc::default();
    let mut wins = 0;
    for index in 0..tasks {
        let task = factory.task(Split::Train, index);
        let episode = run_solver_episode(&factory, solver, &task).await.unwrap();
        wins += usize::from(episode.success);
    }
    wins as f64 / tasks as f64
}

#[tokio::test]
async fn demonstrator_without_tool_never_succeeds() {
    let mut demo = ArithDemonstrator::new(5, 0.0, 0.0, 0.0);
    assert_eq!(success_rate(&mut demo, 200).await, 0.0);
}

#[tokio::test]
async fn demonstrator_with_tool_and_no_copy_errors_always_succeeds() {
    let mut demo = ArithDemonstrator::new(5, 1.0, 1.0, 0.0);
    assert_eq!(success_rate(&mut demo, 200).await, 1.0);
}

#[tokio::test]
async fn demonstrator_always_miscopying_never_succeeds() {
    let mut demo = ArithDemonstrator::new(5, 1.0, 1.0, 1.0);
    assert_eq!(success_rate(&mut demo, 100).await, 0.0);
}

#[tokio::test]
async fn demonstrator_rates_follow_its_probabilities() {
    let mut demo = ArithDemonstrator::new(9, 0.8, 0.3, 0.0);
    let factory = ArithCalc::default();
    let mut used = [(0u32, 0u32); 2]; // (tool used, episodes) for 2 and 3 operands
    for index in 0..600 {
        let task = factory.task(Split::Train, index);
        let episode = run_solver_episode(&factory, &mut demo, &task)
            .await
            .unwrap();
        let slot = task.data["operands"].as_u64().unwrap() as usize - 2;
        used[slot].1 += 1;
        if episode.steps == 2 {
            used[slot].0 += 1;
            assert!(episode.success);
        } else {
            assert!(!episode.success);
        }
    }
    let rate = |(k, n): (u32, u32)| f64::from(k) / f64::from(n);
    assert!((rate(used[0]) - 0.8).abs() < 0.1, "{used:?}");
    assert!((rate(used[1]) - 0.3).abs() < 0.1, "{used:?}");
}

#[tokio::test]
async fn demonstrator_is_reproducible() {
    let factory = ArithCalc::default();
    let mut a = ArithDemonstrator::new(3, 0.5, 0.5, 0.5);
    let mut b = ArithDemonstrator::new(3, 0.5, 0.5, 0.5);
    for index in 0..50 {
        let task = factory.task(Split::Train, index);
        let ea = run_solver_episode(&factory, &mut a, &task).await.unwrap();
        let eb = run_solver_episode(&factory, &mut b, &task).await.unwrap();
        assert_eq!(ea, eb);
    }
}
