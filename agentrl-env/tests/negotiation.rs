//! `negotiation`: the reference solver against the scripted partner on either seat, two policy
//! seats in one session (messages and actions carry the seat in `name`), scores of bad deals,
//! determinism, splits and malformed actions.

use std::collections::HashSet;

use agentrl_core::{Env, Message, Split, Step, ToolCall};
use agentrl_env::negotiation::{Control, Move, Seat, Table, deal_of};
use agentrl_env::{EnvFactory, Negotiation, lookup, run_solver_episode};
use serde_json::json;

use crate::common::contract::{
    assert_all_invalid, assert_disjoint_splits, assert_same_tasks, task_data, unparsable_call,
};

fn named(mut message: Message, seat: &str) -> Message {
    message.name = Some(seat.to_string());
    message
}

fn propose(keep: [u32; 3]) -> Message {
    let args = json!({"book": keep[0], "hat": keep[1], "ball": keep[2]});
    Message::assistant_tool_calls(None, vec![ToolCall::new("c1", "propose", &args)])
}

fn accept() -> Message {
    Message::assistant_tool_calls(None, vec![ToolCall::new("c1", "accept", &json!({}))])
}

#[tokio::test]
async fn reference_solver_succeeds_on_either_seat() {
    let setups = [
        ("alice", Negotiation::default()),
        (
            "bob",
            Negotiation::new(0, [Control::Scripted, Control::Policy]).unwrap(),
        ),
    ];
    for (seat, factory) in setups {
        let mut solver = factory.solver(0);
        let tasks = 50;
        let (mut solved, mut value) = (0, 0.0);
        for i in 0..tasks {
            let task = factory.task(Split::Test, i);
            let episode = run_solver_episode(&factory, &mut *solver, &task)
                .await
                .unwrap();
            solved += u64::from(episode.success);
            assert!(
                episode
                    .messages
                    .iter()
                    .all(|m| m.role == agentrl_core::Role::Assistant
                        || m.name.as_deref() == Some(seat)),
                "every env message is addressed to {seat}"
            );
            let last = episode.messages.last().unwrap().text().to_string();
            let v: f64 = last
                .rsplit("value ")
                .next()
                .unwrap()
                .split(' ')
                .next()
                .unwrap()
                .parse()
                .unwrap();
            value += v / 10.0;
        }
        println!(
            "negotiation reference solver as {seat}: success {solved}/{tasks}, mean score {:.3}",
            value / tasks as f64
        );
        assert!(solved * 100 >= tasks * 95, "{seat}: {solved}/{tasks}");
    }
}

#[tokio::test]
async fn two_policy_seats_share_one_session() {
    let factory = Negotiation::new(0, [Control::Policy, Control::Policy]).unwrap();
    let mut solver = factory.solver(0);
    for i in 0..20 {
        let task = factory.task(Split::Test, i);
        let episode = run_solver_episode(&factory, &mut *solver, &task)
            .await
            .unwrap();
        assert!(!episode.truncated);
        let seats: HashSet<&str> = episode
            .messages
            .iter()
            .filter(|m| m.role == agentrl_core::Role::Assistant)
            .filter_map(|m| m.name.as_deref())
            .collect();
        assert_eq!(seats.len(), 2, "both seats acted: {seats:?}");
        // The two briefings at the start carry each seat's own values.
        let mut env = factory.make();
        let obs = env.reset(&task).await.unwrap();
        let names: Vec<_> = obs
            .messages
            .iter()
            .map(|m| m.name.clone().unwrap())
            .collect();
        assert_eq!(names, ["alice", "bob"]);
        assert!(obs.messages[0].text().starts_with("You are alice"));
    }
}

async fn started(factory: &Negotiation, task_index: u64) -> (Box<dyn Env>, agentrl_core::Task) {
    let task = factory.task(Split::Test, task_index);
    let mut env = factory.make();
    env.reset(&task).await.unwrap();
    (env, task)
}

#[tokio::test]
async fn a_greedy_proposal_loses_everything_and_scores_follow_values() {
    // Alice opens and always asks for everything: the partner never accepts, no deal.
    let factory = Negotiation::default();
    let index = (0..100)
        .find(|&i| factory.task(Split::Test, i).data["first"] == "alice")
        .unwrap();
    let (mut env, task) = started(&factory, index).await;
    let deal = deal_of(&task).unwrap();
    let mut last: Option<Step> = None;
    for _ in 0..20 {
        let step = env.step(&propose(deal.counts)).await.unwrap();
        let done = step.done();
        last = Some(step);
        if done {
            break;
        }
    }
    let last = last.unwrap();
    assert!(last.terminated, "{last:?}");
    assert_eq!(last.info.extra["deal"], json!(false));
    assert_eq!((last.reward, last.info.success), (0.0, Some(false)));

    // Accepting the partner's opening offer scores its value to alice.
    let index = (0..100)
        .find(|&i| factory.task(Split::Test, i).data["first"] == "bob")
        .unwrap();
    let (mut env, task) = started(&factory, index).await;
    let deal = deal_of(&task).unwrap();
    let step = env.step(&accept()).await.unwrap();
    assert!(step.terminated);
    let alice_value = step.info.extra["seat_scores"]["alice"].as_f64().unwrap();
    assert_eq!(step.reward, alice_value);
    let Move::Propose(bob_keeps) = Table::new(deal.clone()).scripted_move(Seat::Bob) else {
        panic!("the partner opens with a proposal");
    };
    assert!(deal.value(Seat::Bob, &bob_keeps) >= deal.aspiration(1));
    let expected = f64::from(deal.value(Seat::Alice, &deal.rest(&bob_keeps))) / 10.0;
    assert_eq!(alice_value, expected);
    assert_eq!(step.info.success, Some(expected >= 0.5));
}

#[test]
fn tasks_are_deterministic_disjoint_and_fair() {
    let (a, b) = (Negotiation::default(), Negotiation::default());
    assert_same_tasks(&a, &b, &[Split::Train], 200);
    for i in 0..200 {
        let task = a.task(Split::Train, i);
        let deal = deal_of(&task).unwrap();
        assert!(deal.splits().iter().any(|k| {
            deal.value(Seat::Alice, k) >= 6 && deal.value(Seat::Bob, &deal.rest(k)) >= 6
        }));
    }
    assert_disjoint_splits(&a, 1000, task_data, 300, 100);
    assert!(Negotiation::new(0, [Control::Scripted, Control::Scripted]).is_err());
}

#[tokio::test]
async fn malformed_actions_get_error_observations() {
    let factory = lookup("negotiation").unwrap();
    let mut env = factory.make();
    let task = factory.task(Split::Test, 0);
    env.reset(&task).await.unwrap();
    let counts = deal_of(&task).unwrap().counts;
    let mut actions = vec![
        unparsable_call("propose"),
        Message::assistant_tool_calls(None, vec![ToolCall::new("c2", "walk_away", &json!({}))]),
        propose([counts[0] + 1, 0, 0]),
        Message::assistant_tool_calls(
            None,
            vec![ToolCall::new(
                "c3",
                "propose",
                &json!({"book": -1, "hat": 0, "ball": 0}),
            )],
        ),
        named(propose([0, 0, 0]), "bob"),
        named(propose([0, 0, 0]), "carol"),
        Message::assistant("I propose half"),
        Message::assistant(""),
        Message::user("hi"),
    ];
    if task.data["first"] == "alice" {
        actions.push(accept()); // nothing to accept yet
    }
    assert_all_invalid(&mut env, &actions).await;
    // Two policy seats: acting out of turn is refused.
    let both = Negotiation::new(0, [Control::Policy, Control::Policy]).unwrap();
    let (mut env, task) = started(&both, 0).await;
    let waiting = if task.data["first"] == "alice" {
        "bob"
    } else {
        "alice"
    };
    let step = env.step(&named(propose([0, 0, 0]), waiting)).await.unwrap();
    assert!(
        step.info
            .invalid_action
            .as_deref()
            .unwrap()
            .contains("turn"),
        "{step:?}"
    );
    assert_eq!(step.messages[0].name.as_deref(), Some(waiting));
}
