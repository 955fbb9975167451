//! `api-booking`: the reference solver against the real local service, the checker, wrong-order
//! API steps, malformed actions, session isolation, shutdown, determinism and splits.

use std::collections::HashSet;
use std::time::Duration;

use agentrl_core::{Env, Message, Split, Step, ToolCall};
use agentrl_env::api_booking::{Booking, Desk, Status, check, world_of};
use agentrl_env::{ApiBooking, EnvFactory, lookup, run_solver_episode};
use serde_json::{Value, json};

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

#[test]
fn reference_solver_books_the_right_room() {
    let rt = runtime();
    let factory = lookup("api-booking").unwrap();
    let mut solver = factory.solver(0);
    let n = 40;
    let solved = (0..n)
        .filter(|&i| {
            let task = factory.task(Split::Test, i);
            rt.block_on(run_solver_episode(&*factory, &mut *solver, &task))
                .unwrap()
                .success
        })
        .count();
    println!("api-booking reference solver: {solved}/{n}");
    assert!(solved * 100 >= 95 * n as usize, "{solved}/{n}");
}

#[test]
fn tasks_are_deterministic_seeded_and_split() {
    let (a, b) = (
        lookup("api-booking").unwrap(),
        lookup("api-booking").unwrap(),
    );
    for i in 0..50 {
        for split in [Split::Train, Split::Test] {
            assert_eq!(a.task(split, i), b.task(split, i));
        }
    }
    let (one, two) = (ApiBooking::new(1), ApiBooking::new(2));
    let differing = (0..50)
        .filter(|&i| one.task(Split::Train, i).data != two.task(Split::Train, i).data)
        .count();
    assert!(differing > 40, "{differing}");
    let set = |split| -> HashSet<String> {
        (0..500)
            .map(|i| a.task(split, i).data.to_string())
            .collect()
    };
    let (train, test) = (set(Split::Train), set(Split::Test));
    assert!(train.is_disjoint(&test));
    assert!(train.len() > 450 && test.len() > 450);
}

fn http(args: Value) -> Message {
    Message::assistant_tool_calls(None, vec![ToolCall::new("c1", "http", &args)])
}

/// A started session on test task `index`, with the API base URL from its statement.
async fn started(index: u64) -> (Box<dyn Env>, agentrl_core::Task, String) {
    let factory = lookup("api-booking").unwrap();
    let task = factory.task(Split::Test, index);
    let mut env = factory.make();
    let obs = env.reset(&task).await.unwrap();
    assert_eq!(obs.tools[0].name(), "http");
    let text = obs.messages[0].text();
    let api = text
        .split_once("REST API at ")
        .unwrap()
        .1
        .split_whitespace()
        .next()
        .unwrap()
        .to_string();
    (env, task, api)
}

async fn send(env: &mut Box<dyn Env>, args: Value) -> String {
    let step = env.step(&http(args)).await.unwrap();
    assert!(
        !step.done() && step.info.invalid_action.is_none(),
        "{step:?}"
    );
    step.messages[0].text().to_string()
}

#[tokio::test]
async fn steps_in_the_wrong_order_fail_with_4xx() {
    let (mut env, task, api) = started(0).await;
    let world = world_of(&task).unwrap();
    let r = &world.request;
    let out = send(
        &mut env,
        json!({"method": "POST", "url": format!("{api}/bookings/B1/confirm")}),
    )
    .await;
    assert!(
        out.starts_with("HTTP 404") && out.contains("no booking"),
        "{out}"
    );
    let taken = world.taken.first().unwrap();
    let body =
        json!({"room_id": taken.room, "day": taken.day, "hour": taken.hour, "guest": r.guest});
    let out = send(
        &mut env,
        json!({"method": "POST", "url": format!("{api}/bookings"), "body": body}),
    )
    .await;
    assert!(
        out.starts_with("HTTP 409") && out.contains("not available"),
        "{out}"
    );
    let out = send(
        &mut env,
        json!({"method": "POST", "url": format!("{api}/bookings"), "body": {"room": "R1"}}),
    )
    .await;
    assert!(
        out.starts_with("HTTP 400") && out.contains("room_id"),
        "{out}"
    );
    let bad_day = json!({"room_id": "R1", "day": "Sun", "hour": 10, "guest": r.guest});
    let out = send(
        &mut env,
        json!({"method": "POST", "url": format!("{api}/bookings"), "body": bad_day}),
    )
    .await;
    assert!(out.starts_with("HTTP 422"), "{out}");
    let out = send(
        &mut env,
        json!({"url": format!("{api}/availability?day=Tue")}),
    )
    .await;
    assert!(out.starts_with("HTTP 400"), "{out}");

    let room = world.answer().unwrap().id.clone();
    let body = json!({"room_id": room, "day": r.day, "hour": r.hour, "guest": r.guest});
    let out = send(
        &mut env,
        json!({"method": "POST", "url": format!("{api}/bookings"), "body": body.clone()}),
    )
    .await;
    assert!(
        out.starts_with("HTTP 201") && out.contains("\"B1\""),
        "{out}"
    );
    let out = send(
        &mut env,
        json!({"method": "POST", "url": format!("{api}/bookings"), "body": body}),
    )
    .await;
    assert!(out.starts_with("HTTP 409"), "the slot is now held: {out}");
    let out = send(
        &mut env,
        json!({"method": "DELETE", "url": format!("{api}/bookings/B1")}),
    )
    .await;
    assert!(
        out.starts_with("HTTP 200") && out.contains("cancelled"),
        "{out}"
    );
    let out = send(
        &mut env,
        json!({"method": "POST", "url": format!("{api}/bookings/B1/confirm")}),
    )
    .await;
    assert!(
        out.starts_with("HTTP 409") && out.contains("cancelled"),
        "{out}"
    );
    let out = send(
        &mut env,
        json!({"url": format!("{api}/availability?day={}&hour={}", r.day, r.hour)}),
    )
    .await;
    assert!(
        out.contains(&format!("\"{room}\"")),
        "cancelling frees the slot: {out}"
    );

    let end = env.step(&Message::assistant("done")).await.unwrap();
    assert!(
        end.terminated && end.info.success == Some(false) && end.reward == 0.0,
        "{end:?}"
    );
}

#[tokio::test]
async fn confirming_a_wrong_room_fails_and_the_right_one_succeeds() {
    for right in [false, true] {
        let (mut env, task, api) = started(3).await;
        let world = world_of(&task).unwrap();
        let r = &world.request;
        let answer = world.answer().unwrap().id.clone();
        let room = if right {
            answer
        } else {
            let free = |id: &str| !world.is_taken(id, &r.day, r.hour);
            world
                .rooms
                .iter()
                .map(|x| x.id.clone())
                .find(|id| *id != answer && free(id))
                .unwrap()
        };
        let body = json!({"room_id": room, "day": r.day, "hour": r.hour, "guest": r.guest});
        send(
            &mut env,
            json!({"method": "POST", "url": format!("{api}/bookings"), "body": body}),
        )
        .await;
        let out = send(
            &mut env,
            json!({"method": "POST", "url": format!("{api}/bookings/B1/confirm")}),
        )
        .await;
        assert!(
            out.starts_with("HTTP 200") && out.contains("confirmed"),
            "{out}"
        );
        let end = env.step(&Message::assistant("booked")).await.unwrap();
        assert_eq!(end.info.success, Some(right));
    }
}

#[test]
fn checker_needs_exactly_the_right_confirmed_booking() {
    let task = lookup("api-booking").unwrap().task(Split::Train, 5);
    let world = world_of(&task).unwrap();
    let r = world.request.clone();
    let booking = |room: &str, status| Booking {
        id: "B1".into(),
        room: room.into(),
        day: r.day.clone(),
        hour: r.hour,
        guest: r.guest.clone(),
        status,
    };
    let answer = world.answer().unwrap().id.clone();
    let other = world
        .rooms
        .iter()
        .find(|x| x.id != answer)
        .unwrap()
        .id
        .clone();
    let desk = |bookings: Vec<Booking>| Desk {
        world: world.clone(),
        bookings,
    };
    assert!(check(&desk(vec![booking(&answer, Status::Confirmed)])));
    assert!(check(&desk(vec![
        booking(&other, Status::Cancelled),
        booking(&answer, Status::Confirmed)
    ])));
    assert!(!check(&desk(vec![])));
    assert!(!check(&desk(vec![booking(&answer, Status::Held)])));
    assert!(!check(&desk(vec![booking(&other, Status::Confirmed)])));
    assert!(!check(&desk(vec![
        booking(&answer, Status::Confirmed),
        booking(&other, Status::Confirmed)
    ])));
    let mut wrong_guest = booking(&answer, Status::Confirmed);
    wrong_guest.guest = "Someone Else".into();
    assert!(!check(&desk(vec![wrong_guest])));
}

fn assert_invalid(step: &Step) {
    assert!(
        step.info.invalid_action.is_some() && !step.done(),
        "{step:?}"
    );
    assert!(
        step.messages.iter().any(|m| m.text().contains("error")),
        "{step:?}"
    );
}

#[tokio::test]
async fn malformed_actions_get_error_observations() {
    let (mut env, _, api) = started(1).await;
    let mut raw = ToolCall::new("c1", "http", &json!({}));
    raw.function.arguments = "{not json".into();
    let actions = [
        Message::assistant_tool_calls(None, vec![raw]),
        Message::assistant_tool_calls(None, vec![ToolCall::new("c1", "book", &json!({}))]),
        http(json!({"method": "GET"})),
        http(json!({"url": "http://example.invalid/api/rooms"})),
        http(json!({"url": format!("{api}/../admin")})),
        http(json!({"url": format!("{api}/rooms"), "method": "FETCH"})),
        Message::assistant("  "),
        Message::user("hello"),
    ];
    for action in &actions {
        assert_invalid(&env.step(action).await.unwrap());
    }
    // The episode goes on after all of them.
    assert!(
        send(&mut env, json!({"url": format!("{api}/rooms")}))
            .await
            .starts_with("HTTP 200")
    );
}

#[tokio::test]
async fn sessions_do_not_share_state_and_services_stop_when_dropped() {
    let (mut one, task, api_one) = started(2).await;
    let (two, _, api_two) = started(2).await;
    assert_ne!(api_one, api_two);
    let r = world_of(&task).unwrap().request;
    let room = world_of(&task).unwrap().answer().unwrap().id.clone();
    let body = json!({"room_id": room, "day": r.day, "hour": r.hour, "guest": r.guest});
    send(
        &mut one,
        json!({"method": "POST", "url": format!("{api_one}/bookings"), "body": body}),
    )
    .await;
    let client = reqwest::Client::builder().no_proxy().build().unwrap();
    let listed: Value = client
        .get(format!("{api_two}/bookings"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(listed, json!({"bookings": []}));
    drop(two);
    let mut refused = false;
    for _ in 0..100 {
        if client.get(format!("{api_two}/rooms")).send().await.is_err() {
            refused = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(refused, "the dropped session's service still answers");
    let listed: Value = client
        .get(format!("{api_one}/bookings"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(listed["bookings"].as_array().unwrap().len(), 1);
}

#[tokio::test]
async fn a_second_episode_in_a_session_starts_clean() {
    let (mut env, task, api) = started(4).await;
    let r = world_of(&task).unwrap().request;
    let room = world_of(&task).unwrap().answer().unwrap().id.clone();
    let body = json!({"room_id": room, "day": r.day, "hour": r.hour, "guest": r.guest});
    send(
        &mut env,
        json!({"method": "POST", "url": format!("{api}/bookings"), "body": body}),
    )
    .await;
    let factory = lookup("api-booking").unwrap();
    let obs = env.reset(&factory.task(Split::Test, 5)).await.unwrap();
    assert!(
        obs.messages[0].text().contains(&api),
        "the service is reused"
    );
    let out = send(&mut env, json!({"url": format!("{api}/bookings")})).await;
    assert_eq!(out, "HTTP 200 OK\n{\"bookings\":[]}");
}
