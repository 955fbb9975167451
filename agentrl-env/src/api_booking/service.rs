//! The booking REST service a session runs: rooms, availability, bookings that are held, then
//! confirmed (or cancelled). Steps out of order get 4xx answers with a JSON `error` message.

use std::sync::{Arc, Mutex, MutexGuard};

use axum::extract::rejection::JsonRejection;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::world::{DAYS, HOURS, World};

/// Where a booking stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// Made, not yet confirmed; the slot is reserved.
    Held,
    /// Confirmed.
    Confirmed,
    /// Cancelled; the slot is free again.
    Cancelled,
}

/// A booking made through the service.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Booking {
    /// Id such as `B1`.
    pub id: String,
    /// Room id.
    pub room: String,
    /// Day.
    pub day: String,
    /// Starting hour.
    pub hour: u32,
    /// Guest name.
    pub guest: String,
    /// Where it stands.
    pub status: Status,
}

/// The service's state for the episode in progress.
#[derive(Debug, Clone)]
pub struct Desk {
    /// The task's world.
    pub world: World,
    /// Bookings made in this episode, in order.
    pub bookings: Vec<Booking>,
}

impl Desk {
    /// The desk of a new episode on `world`.
    pub fn new(world: World) -> Self {
        Desk {
            world,
            bookings: Vec::new(),
        }
    }

    /// Whether `room` is free on `day` at `hour` (not taken before, no live booking).
    fn is_free(&self, room: &str, day: &str, hour: u32) -> bool {
        !self.world.is_taken(room, day, hour)
            && !self.bookings.iter().any(|b| {
                b.status != Status::Cancelled && b.room == room && b.day == day && b.hour == hour
            })
    }
}

/// The state behind the service: the desk of the episode in progress, if any.
pub type Shared = Arc<Mutex<Option<Desk>>>;

/// Locks `shared`, recovering from a poisoned lock (the state stays consistent per call).
pub fn lock(shared: &Shared) -> MutexGuard<'_, Option<Desk>> {
    shared.lock().unwrap_or_else(|p| p.into_inner())
}

/// An error answer.
type Answer = (StatusCode, Json<Value>);

/// `{ "error": message }` with `status`.
fn error(status: StatusCode, message: impl Into<String>) -> Answer {
    (status, Json(json!({ "error": message.into() })))
}

/// Runs `work` on the desk, or answers 503 when no episode is in progress.
fn with_desk(shared: &Shared, work: impl FnOnce(&mut Desk) -> Answer) -> Answer {
    match lock(shared).as_mut() {
        Some(desk) => work(desk),
        None => error(StatusCode::SERVICE_UNAVAILABLE, "no episode is in progress"),
    }
}

/// The service's routes under `/api`.
pub fn router(shared: Shared) -> Router {
    Router::new()
        .route("/api/rooms", get(rooms))
        .route("/api/availability", get(availability))
        .route("/api/bookings", get(list).post(book))
        .route("/api/bookings/{id}", get(show).delete(cancel))
        .route("/api/bookings/{id}/confirm", post(confirm))
        .with_state(shared)
}

/// `GET /api/rooms`.
async fn rooms(State(shared): State<Shared>) -> Answer {
    with_desk(&shared, |desk| {
        (StatusCode::OK, Json(json!({ "rooms": desk.world.rooms })))
    })
}

/// Checks a day and hour, answering 422 when they are not bookable.
fn check_slot(day: &str, hour: u32) -> Result<(), Answer> {
    if !DAYS.contains(&day) {
        return Err(error(
            StatusCode::UNPROCESSABLE_ENTITY,
            format!("day {day:?} is not one of {}", DAYS.join(", ")),
        ));
    }
    if !(HOURS.0..=HOURS.1).contains(&hour) {
        return Err(error(
            StatusCode::UNPROCESSABLE_ENTITY,
            format!(
                "hour {hour} is outside opening hours {}..{}",
                HOURS.0, HOURS.1
            ),
        ));
    }
    Ok(())
}

/// Query of `GET /api/availability`.
#[derive(Debug, Deserialize)]
struct SlotQuery {
    day: Option<String>,
    hour: Option<u32>,
}

/// `GET /api/availability?day=Tue&hour=14`: the free rooms of that slot.
async fn availability(
    State(shared): State<Shared>,
    query: Result<Query<SlotQuery>, axum::extract::rejection::QueryRejection>,
) -> Answer {
    let (day, hour) = match query {
        Ok(Query(SlotQuery {
            day: Some(d),
            hour: Some(h),
        })) => (d, h),
        Ok(_) => {
            return error(
                StatusCode::BAD_REQUEST,
                "query parameters `day` and `hour` are required",
            );
        }
        Err(e) => return error(StatusCode::BAD_REQUEST, format!("bad query: {e}")),
    };
    if let Err(answer) = check_slot(&day, hour) {
        return answer;
    }
    with_desk(&shared, |desk| {
        let free: Vec<&str> = desk
            .world
            .rooms
            .iter()
            .filter(|r| desk.is_free(&r.id, &day, hour))
            .map(|r| r.id.as_str())
            .collect();
        (
            StatusCode::OK,
            Json(json!({ "day": day, "hour": hour, "free_rooms": free })),
        )
    })
}

/// Body of `POST /api/bookings`.
#[derive(Debug, Deserialize)]
struct NewBooking {
    room_id: String,
    day: String,
    hour: u32,
    guest: String,
}

/// `POST /api/bookings`: holds a free slot for a guest.
async fn book(
    State(shared): State<Shared>,
    body: Result<Json<NewBooking>, JsonRejection>,
) -> Answer {
    let Json(new) = match body {
        Ok(b) => b,
        Err(e) => {
            return error(
                StatusCode::BAD_REQUEST,
                format!(
                    "bad booking body (needs room_id, day, hour, guest): {}",
                    e.body_text()
                ),
            );
        }
    };
    if let Err(answer) = check_slot(&new.day, new.hour) {
        return answer;
    }
    if new.guest.trim().is_empty() {
        return error(StatusCode::UNPROCESSABLE_ENTITY, "guest must not be empty");
    }
    with_desk(&shared, |desk| {
        if !desk.world.rooms.iter().any(|r| r.id == new.room_id) {
            return error(StatusCode::NOT_FOUND, format!("no room {:?}", new.room_id));
        }
        if !desk.is_free(&new.room_id, &new.day, new.hour) {
            return error(
                StatusCode::CONFLICT,
                format!(
                    "room {} is not available on {} at {}:00",
                    new.room_id, new.day, new.hour
                ),
            );
        }
        let booking = Booking {
            id: format!("B{}", desk.bookings.len() + 1),
            room: new.room_id,
            day: new.day,
            hour: new.hour,
            guest: new.guest.trim().to_string(),
            status: Status::Held,
        };
        desk.bookings.push(booking.clone());
        (
            StatusCode::CREATED,
            Json(json!({
                "booking": booking,
                "next": format!("confirm with POST /api/bookings/{}/confirm", booking.id)
            })),
        )
    })
}

/// `GET /api/bookings`.
async fn list(State(shared): State<Shared>) -> Answer {
    with_desk(&shared, |desk| {
        (StatusCode::OK, Json(json!({ "bookings": desk.bookings })))
    })
}

/// Runs `work` on booking `id`, or answers 404 for an unknown id.
fn with_booking(shared: &Shared, id: &str, work: impl FnOnce(&mut Booking) -> Answer) -> Answer {
    with_desk(shared, |desk| {
        match desk.bookings.iter_mut().find(|b| b.id == id) {
            Some(booking) => work(booking),
            None => error(StatusCode::NOT_FOUND, format!("no booking {id:?}")),
        }
    })
}

/// `GET /api/bookings/{id}`.
async fn show(State(shared): State<Shared>, Path(id): Path<String>) -> Answer {
    with_booking(&shared, &id, |b| {
        (StatusCode::OK, Json(json!({ "booking": b })))
    })
}

/// `POST /api/bookings/{id}/confirm`: confirms a held booking.
async fn confirm(State(shared): State<Shared>, Path(id): Path<String>) -> Answer {
    with_booking(&shared, &id, |b| match b.status {
        Status::Held => {
            b.status = Status::Confirmed;
            (StatusCode::OK, Json(json!({ "booking": b })))
        }
        Status::Confirmed => error(
            StatusCode::CONFLICT,
            format!("booking {id} is already confirmed"),
        ),
        Status::Cancelled => error(StatusCode::CONFLICT, format!("booking {id} was cancelled")),
    })
}

/// `DELETE /api/bookings/{id}`: cancels a booking and frees its slot.
async fn cancel(State(shared): State<Shared>, Path(id): Path<String>) -> Answer {
    with_booking(&shared, &id, |b| match b.status {
        Status::Cancelled => error(
            StatusCode::CONFLICT,
            format!("booking {id} is already cancelled"),
        ),
        _ => {
            b.status = Status::Cancelled;
            (StatusCode::OK, Json(json!({ "booking": b })))
        }
    })
}
