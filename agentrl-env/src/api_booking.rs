//! `api-booking`: book and confirm the right meeting room through a REST service the session
//! runs on 127.0.0.1, with the `http` tool.

mod demonstrator;
mod env;
mod service;
mod task;
mod world;

use agentrl_core::{Env, Message, Result, Split, Task, ToolCall};
use serde_json::{Value, json};

pub use demonstrator::{API_BOOKING_DEMONSTRATOR_KNOBS, BookingDemonstrator};
pub use env::{ApiBookingEnv, check};
pub use service::{Booking, Desk, Status};
pub use task::{generate, split_of, world_of};
pub use world::{DAYS, FEATURES, HOURS, Request, Room, Slot, World};

use crate::demonstrator::{DemonstratorKnobs, KnobDoc};
use crate::factory::{EnvFactory, Solver};
use crate::transcript::exchanges;
use crate::wrappers::TurnLimit;

/// Registry id of the env.
pub const API_BOOKING_ID: &str = "api-booking";

/// Steps allowed per episode (the workflow takes five).
pub const API_BOOKING_MAX_TURNS: usize = 12;

/// The `api-booking` factory; `seed` selects the task set (default `0`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ApiBooking {
    /// Seed of the task generator.
    pub seed: u64,
}

impl ApiBooking {
    /// The factory for the task set of `seed`.
    pub fn new(seed: u64) -> Self {
        ApiBooking { seed }
    }
}

impl EnvFactory for ApiBooking {
    fn id(&self) -> &str {
        API_BOOKING_ID
    }

    fn description(&self) -> &str {
        "book and confirm the cheapest fitting free meeting room through a local REST API"
    }

    fn task(&self, split: Split, index: u64) -> Task {
        task::to_task(&generate(self.seed, split, index), split, index)
    }

    fn make(&self) -> Box<dyn Env> {
        Box::new(TurnLimit::new(ApiBookingEnv::new(), API_BOOKING_MAX_TURNS))
    }

    fn max_turns(&self) -> usize {
        API_BOOKING_MAX_TURNS
    }

    /// The expert is deterministic, so `seed` is not used.
    fn solver(&self, _seed: u64) -> Box<dyn Solver> {
        Box::new(BookingExpert)
    }

    fn demonstrator_knobs(&self) -> &[KnobDoc] {
        API_BOOKING_DEMONSTRATOR_KNOBS
    }

    /// A [`BookingDemonstrator`] (see [`BookingDemonstrator::from_knobs`]).
    fn demonstrator(&self, knobs: &DemonstratorKnobs, seed: u64) -> Result<Box<dyn Solver>> {
        Ok(Box::new(BookingDemonstrator::from_knobs(seed, knobs)?))
    }
}

/// The reference solver: reads the API address from the task statement, lists the rooms,
/// asks for the slot's availability, books the cheapest fitting free room (from the answers
/// it got) and confirms that booking, then replies.
#[derive(Debug, Clone, Copy, Default)]
pub struct BookingExpert;

/// The JSON body of an `http` tool answer (`HTTP 200 OK` line, then the body), if it is a 2xx.
fn ok_body(answer: Option<&str>) -> Option<Value> {
    let (status, body) = answer?.split_once('\n')?;
    let code: u16 = status.split_whitespace().nth(1)?.parse().ok()?;
    (200..300)
        .contains(&code)
        .then(|| serde_json::from_str(body).ok())?
}

/// The answer body of the last successful call whose method and URL satisfy `wanted`.
fn last_ok(history: &[Message], wanted: impl Fn(&str, &str) -> bool) -> Option<Value> {
    exchanges(history, "http").into_iter().rev().find_map(|x| {
        let method = x
            .args
            .get("method")
            .and_then(Value::as_str)
            .unwrap_or("GET");
        let url = x.args.get("url").and_then(Value::as_str).unwrap_or("");
        if wanted(method, url) {
            ok_body(x.answer)
        } else {
            None
        }
    })
}

/// The habits a scripted agent follows on a task (none for the reference solver).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Habits {
    /// Book the first fitting free room of the listing, not the cheapest.
    first_fit: bool,
    /// Reply that the booking is confirmed without confirming it.
    skip_confirm: bool,
}

/// The cheapest room in `rooms` that fits `request` and is listed in `free` (with
/// `first_fit`, the first such room in the listing's order).
fn choose(rooms: &Value, free: &Value, request: &Request, first_fit: bool) -> Option<String> {
    let free: Vec<&str> = free
        .get("free_rooms")?
        .as_array()?
        .iter()
        .filter_map(Value::as_str)
        .collect();
    let rooms: Vec<Room> = serde_json::from_value(rooms.get("rooms")?.clone()).ok()?;
    let mut fitting = rooms
        .into_iter()
        .filter(|r| r.capacity >= request.people && r.features.contains(&request.feature))
        .filter(|r| free.contains(&r.id.as_str()));
    let room = if first_fit {
        fitting.next()
    } else {
        fitting.min_by_key(|r| r.price)
    };
    room.map(|r| r.id)
}

impl Solver for BookingExpert {
    fn act(&mut self, task: &Task, history: &[Message]) -> Message {
        next_action(task, history, Habits::default())
    }
}

/// The next action of the scripted agents on `task` after `history`, following `habits`.
fn next_action(task: &Task, history: &[Message], habits: Habits) -> Message {
    let world = match world_of(task) {
        Ok(w) => w,
        Err(e) => return Message::assistant(format!("I cannot read this task: {e}")),
    };
    let statement = history.first().map(Message::text).unwrap_or("");
    let Some(api) = statement
        .split_once("REST API at ")
        .and_then(|(_, rest)| rest.split_whitespace().next())
    else {
        return Message::assistant("I cannot find the API address.");
    };
    let r = &world.request;
    let call = |args: Value| {
        let id = format!("call_{}", history.len());
        Message::assistant_tool_calls(None, vec![ToolCall::new(id, "http", &args)])
    };
    let Some(rooms) = last_ok(history, |m, u| m == "GET" && u.ends_with("/rooms")) else {
        return call(json!({"method": "GET", "url": format!("{api}/rooms")}));
    };
    let Some(free) = last_ok(history, |m, u| m == "GET" && u.contains("/availability?")) else {
        let url = format!("{api}/availability?day={}&hour={}", r.day, r.hour);
        return call(json!({"method": "GET", "url": url}));
    };
    let Some(held) = last_ok(history, |m, u| m == "POST" && u.ends_with("/bookings")) else {
        let Some(room) = choose(&rooms, &free, r, habits.first_fit) else {
            return Message::assistant("No room fits the request.");
        };
        let body = json!({"room_id": room, "day": r.day, "hour": r.hour, "guest": r.guest});
        return call(json!({"method": "POST", "url": format!("{api}/bookings"), "body": body}));
    };
    let id = held
        .pointer("/booking/id")
        .and_then(Value::as_str)
        .unwrap_or("");
    if !habits.skip_confirm
        && last_ok(history, |m, u| m == "POST" && u.ends_with("/confirm")).is_none()
    {
        return call(json!({"method": "POST", "url": format!("{api}/bookings/{id}/confirm")}));
    }
    Message::assistant(format!("Booking {id} is confirmed."))
}
