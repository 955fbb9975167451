//! `api-booking`: the reference solver against the real local service, the checker, wrong-order
//! API steps, malformed actions, session isolation, shutdown, determinism and splits.

use std::time::Duration;

use agentrl_core::{Env, Message, Split, ToolCall};
use agentrl_env::api_booking::{Booking, Desk, Status, World, check, world_of};
use agentrl_env::{ApiBooking, lookup};
use serde_json::{Value, json};

use crate::common::contract::{
    assert_all_invalid, assert_disjoint_splits, assert_reference_solver, assert_same_tasks,
    assert_seeds_differ, task_data, unparsable_call,
};

#[tokio::test]
async fn reference_solver_books_the_right_room() {
    let factory = lookup("api-booking").unwrap();
    assert_reference_solver(&*factory, 40, 95).await;
}

#[test]
fn tasks_are_deterministic_seeded_and_split() {
    let (a, b) = (
        lookup("api-booking").unwrap(),
        lookup("api-booking").unwrap(),
    );
    assert_same_tasks(&*a, &*b, &[Split::Train, Split::Test], 50);
    assert_seeds_differ(&ApiBooking::new(1), &ApiBooking::new(2), 40);
    assert_disjoint_splits(&*a, 500, task_data, 450, 450);
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

/// Sends one `http` call (a valid action that does not end the episode); returns the answer.
async fn send(env: &mut Box<dyn Env>, args: Value) -> String {
    let step = env.step(&http(args)).await.unwrap();
    assert!(
        !step.done() && step.info.invalid_action.is_none(),
        "{step:?}"
    );
    step.messages[0].text().to_string()
}

/// `GET url`.
async fn get(env: &mut Box<dyn Env>, url: String) -> String {
    send(env, json!({ "url": url })).await
}

/// `METHOD url` without a body.
async fn call(env: &mut Box<dyn Env>, method: &str, url: String) -> String {
    send(env, json!({ "method": method, "url": url })).await
}

/// `POST api/bookings` with `body`.
async fn book(env: &mut Box<dyn Env>, api: &str, body: Value) -> String {
    let url = format!("{api}/bookings");
    send(env, json!({"method": "POST", "url": url, "body": body})).await
}

/// The booking body for `room` at the requested slot, for the requesting guest.
fn booking_for(world: &World, room: &str) -> Value {
    let r = &world.request;
    json!({"room_id": room, "day": r.day, "hour": r.hour, "guest": r.guest})
}

/// Asserts that the answer `out` has HTTP status `status` and contains `needle`.
fn assert_answer(out: &str, status: u16, needle: &str) {
    assert!(
        out.starts_with(&format!("HTTP {status}")) && out.contains(needle),
        "expected HTTP {status} with {needle:?}: {out}"
    );
}

#[tokio::test]
async fn steps_in_the_wrong_order_fail_with_4xx() {
    let (mut env, task, api) = started(0).await;
    let world = world_of(&task).unwrap();
    let r = &world.request;
    let confirm = format!("{api}/bookings/B1/confirm");
    let out = call(&mut env, "POST", confirm.clone()).await;
    assert_answer(&out, 404, "no booking");
    let taken = world.taken.first().unwrap();
    let body =
        json!({"room_id": taken.room, "day": taken.day, "hour": taken.hour, "guest": r.guest});
    assert_answer(&book(&mut env, &api, body).await, 409, "not available");
    let out = book(&mut env, &api, json!({"room": "R1"})).await;
    assert_answer(&out, 400, "room_id");
    let bad_day = json!({"room_id": "R1", "day": "Sun", "hour": 10, "guest": r.guest});
    assert_answer(&book(&mut env, &api, bad_day).await, 422, "");
    let out = get(&mut env, format!("{api}/availability?day=Tue")).await;
    assert_answer(&out, 400, "");

    let room = world.answer().unwrap().id.clone();
    let body = booking_for(&world, &room);
    assert_answer(&book(&mut env, &api, body.clone()).await, 201, "\"B1\"");
    let out = book(&mut env, &api, body).await;
    assert!(out.starts_with("HTTP 409"), "the slot is now held: {out}");
    let out = call(&mut env, "DELETE", format!("{api}/bookings/B1")).await;
    assert_answer(&out, 200, "cancelled");
    assert_answer(&call(&mut env, "POST", confirm).await, 409, "cancelled");
    let availability = format!("{api}/availability?day={}&hour={}", r.day, r.hour);
    let out = get(&mut env, availability).await;
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
        book(&mut env, &api, booking_for(&world, &room)).await;
        let out = call(&mut env, "POST", format!("{api}/bookings/B1/confirm")).await;
        assert_answer(&out, 200, "confirmed");
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

#[tokio::test]
async fn malformed_actions_get_error_observations() {
    let (mut env, _, api) = started(1).await;
    let actions = [
        unparsable_call("http"),
        Message::assistant_tool_calls(None, vec![ToolCall::new("c1", "book", &json!({}))]),
        http(json!({"method": "GET"})),
        http(json!({"url": "http://example.invalid/api/rooms"})),
        http(json!({"url": format!("{api}/../admin")})),
        http(json!({"url": format!("{api}/rooms"), "method": "FETCH"})),
        Message::assistant("  "),
        Message::user("hello"),
    ];
    assert_all_invalid(&mut env, &actions).await;
    // The episode goes on after all of them.
    assert_answer(&get(&mut env, format!("{api}/rooms")).await, 200, "");
}

/// The bookings list of the service at `api`, fetched directly (not through an env).
async fn bookings(client: &reqwest::Client, api: &str) -> Value {
    let answer = client.get(format!("{api}/bookings")).send().await.unwrap();
    answer.json().await.unwrap()
}

#[tokio::test]
async fn sessions_do_not_share_state_and_services_stop_when_dropped() {
    let (mut one, task, api_one) = started(2).await;
    let (two, _, api_two) = started(2).await;
    assert_ne!(api_one, api_two);
    let world = world_of(&task).unwrap();
    let room = world.answer().unwrap().id.clone();
    book(&mut one, &api_one, booking_for(&world, &room)).await;
    let client = reqwest::Client::builder().no_proxy().build().unwrap();
    let listed = bookings(&client, &api_two).await;
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
    let listed = bookings(&client, &api_one).await;
    assert_eq!(listed["bookings"].as_array().unwrap().len(), 1);
}

#[tokio::test]
async fn a_second_episode_in_a_session_starts_clean() {
    let (mut env, task, api) = started(4).await;
    let world = world_of(&task).unwrap();
    let room = world.answer().unwrap().id.clone();
    book(&mut env, &api, booking_for(&world, &room)).await;
    let factory = lookup("api-booking").unwrap();
    let obs = env.reset(&factory.task(Split::Test, 5)).await.unwrap();
    assert!(
        obs.messages[0].text().contains(&api),
        "the service is reused"
    );
    let out = get(&mut env, format!("{api}/bookings")).await;
    assert_eq!(out, "HTTP 200 OK\n{\"bookings\":[]}");
}
