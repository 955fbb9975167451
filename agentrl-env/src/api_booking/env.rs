//! The `api-booking` session: it runs the booking service on 127.0.0.1 (started at the first
//! reset, stopped when the session is dropped) and offers the `http` tool, allowed only under
//! the service's `/api/`. A text reply without tool calls ends the episode and is checked.

use agentrl_core::{Env, Error, Message, Observation, Result, Step, Task};
use agentrl_tools::{HttpTool, WebLimits};
use async_trait::async_trait;

use super::API_BOOKING_ID;
use super::service::{Booking, Desk, Shared, Status, lock, router};
use super::task::world_of;
use super::world::World;
use crate::local_server::Served;
use crate::session::{continue_step, final_step, invalid_step, run_tool_calls, wrong_role};

/// What to do instead of a malformed action.
const HINT: &str = "call the http tool, or reply with a short text when the booking is confirmed";

/// Whether the service's state holds the right booking: one confirmed booking, for the
/// request's guest, day and hour, in the expected room.
pub fn check(desk: &Desk) -> bool {
    let r = &desk.world.request;
    let Some(room) = desk.world.answer() else {
        return false;
    };
    let confirmed: Vec<_> = desk
        .bookings
        .iter()
        .filter(|b| b.status == Status::Confirmed)
        .collect();
    let right =
        |b: &Booking| b.room == room.id && b.day == r.day && b.hour == r.hour && b.guest == r.guest;
    matches!(confirmed.as_slice(), [b] if right(b))
}

/// The task statement for `world` with the service at `api` (ending in `/api`).
fn statement(world: &World, api: &str) -> String {
    let r = &world.request;
    format!(
        "You handle meeting-room bookings through the REST API at {api} (JSON; use the http tool).\n\
         GET {api}/rooms -> rooms with id, capacity, features, price (per hour)\n\
         GET {api}/availability?day=DAY&hour=H -> free_rooms of that one-hour slot\n\
         POST {api}/bookings {{\"room_id\", \"day\", \"hour\", \"guest\"}} -> a held booking with its id\n\
         POST {api}/bookings/ID/confirm -> confirms a held booking; DELETE {api}/bookings/ID cancels one\n\
         Request: {} needs a room for {} people with feature \"{}\" on {} at {}:00. Book the cheapest room \
         that fits and is free, for guest \"{}\", and confirm it. Reply with a short text (no tool \
         call) when done.",
        r.guest, r.people, r.feature, r.day, r.hour, r.guest
    )
}

/// One `api-booking` session, without turn limit (the factory adds it).
pub struct ApiBookingEnv {
    shared: Shared,
    running: Option<Served>,
    ctx: agentrl_core::ToolContext,
}

impl Default for ApiBookingEnv {
    fn default() -> Self {
        Self::new()
    }
}

impl ApiBookingEnv {
    /// A session whose service starts at the first reset.
    pub fn new() -> Self {
        ApiBookingEnv {
            shared: Shared::default(),
            running: None,
            ctx: agentrl_core::ToolContext::default(),
        }
    }

    /// The service's base URL (`http://127.0.0.1:PORT`), once it runs.
    pub fn base_url(&self) -> Option<String> {
        self.running.as_ref().map(|r| r.server.base_url())
    }

    /// A copy of the service's state for the episode in progress.
    pub fn desk(&self) -> Option<Desk> {
        lock(&self.shared).clone()
    }
}

#[async_trait]
impl Env for ApiBookingEnv {
    fn id(&self) -> &str {
        API_BOOKING_ID
    }

    async fn reset(&mut self, task: &Task) -> Result<Observation> {
        let world = world_of(task)?;
        let shared = self.shared.clone();
        let running = Served::ensure(
            &mut self.running,
            API_BOOKING_ID,
            || router(shared),
            "/api/",
            |allow| HttpTool::new(allow, WebLimits::default()),
        )
        .await?;
        let tools = running.tools.specs();
        let text = statement(&world, &format!("{}/api", running.server.base_url()));
        *lock(&self.shared) = Some(Desk::new(world));
        Ok(Observation {
            messages: vec![Message::user(text)],
            tools,
        })
    }

    async fn step(&mut self, action: &Message) -> Result<Step> {
        let Some(running) = self
            .running
            .as_ref()
            .filter(|_| lock(&self.shared).is_some())
        else {
            return Err(Error::env(API_BOOKING_ID, "step called outside an episode"));
        };
        if let Some(reason) = wrong_role(action) {
            return Ok(invalid_step(&reason, HINT));
        }
        if action.tool_calls.is_empty() {
            if action.text().trim().is_empty() {
                return Ok(invalid_step("empty message", HINT));
            }
            let desk = lock(&self.shared).take();
            let success = desk.as_ref().is_some_and(check);
            return Ok(final_step(Vec::new(), success, Default::default()));
        }
        let (messages, info) =
            run_tool_calls(API_BOOKING_ID, &running.tools, &self.ctx, action, || false).await?;
        Ok(continue_step(messages, info))
    }
}
