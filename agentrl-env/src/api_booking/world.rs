//! The booking world of one task: meeting rooms, slots already taken, the guest's request and
//! the room that answers it (the cheapest free room that fits).

use agentrl_core::SeededRng;
use serde::{Deserialize, Serialize};

/// Weekdays that can be booked.
pub const DAYS: [&str; 5] = ["Mon", "Tue", "Wed", "Thu", "Fri"];

/// First and last bookable hour.
pub const HOURS: (u32, u32) = (9, 17);

/// Room features a request may ask for.
pub const FEATURES: [&str; 3] = ["projector", "whiteboard", "video"];

/// First names and surnames of guests.
const FIRST: [&str; 8] = ["Ann", "Bo", "Chen", "Dara", "Eli", "Femi", "Gus", "Hana"];
const LAST: [&str; 8] = [
    "Lee", "Moss", "Nagy", "Ortiz", "Park", "Quinn", "Rossi", "Sato",
];

/// A meeting room.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Room {
    /// Id such as `R3`.
    pub id: String,
    /// Seats.
    pub capacity: u32,
    /// Features such as `projector`.
    pub features: Vec<String>,
    /// Price per hour in whole euros (distinct across rooms).
    pub price: u32,
}

/// A taken slot: room, day and hour.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Slot {
    /// Room id.
    pub room: String,
    /// Day (one of [`DAYS`]).
    pub day: String,
    /// Starting hour.
    pub hour: u32,
}

/// What the guest asks for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Request {
    /// Guest name the booking is made for.
    pub guest: String,
    /// People to seat.
    pub people: u32,
    /// Feature the room must have.
    pub feature: String,
    /// Day.
    pub day: String,
    /// Starting hour (one hour long).
    pub hour: u32,
}

/// One task's world.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct World {
    /// The rooms.
    pub rooms: Vec<Room>,
    /// Slots booked by others before the episode.
    pub taken: Vec<Slot>,
    /// The request.
    pub request: Request,
}

impl World {
    /// A random world in which the request has an answer.
    pub fn random(rng: &mut SeededRng) -> World {
        loop {
            let world = Self::candidate(rng);
            if world.answer().is_some() {
                return world;
            }
        }
    }

    /// A random world that may have no answer.
    fn candidate(rng: &mut SeededRng) -> World {
        let count = rng.range(5, 8) as usize;
        let mut prices: Vec<u32> = Vec::new();
        let mut rooms = Vec::new();
        for i in 0..count {
            let mut price = 20 + 5 * rng.range(0, 36) as u32;
            while prices.contains(&price) {
                price += 5;
            }
            prices.push(price);
            let features = FEATURES
                .iter()
                .filter(|_| rng.chance(0.5))
                .map(|f| f.to_string())
                .collect();
            rooms.push(Room {
                id: format!("R{}", i + 1),
                capacity: 2 * rng.range(1, 6) as u32,
                features,
                price,
            });
        }
        let pick = |rng: &mut SeededRng, items: &[&str]| {
            rng.choose(items).copied().unwrap_or_default().to_string()
        };
        let first = pick(rng, &FIRST);
        let request = Request {
            guest: format!("{first} {}", pick(rng, &LAST)),
            people: rng.range(2, 10) as u32,
            feature: pick(rng, &FEATURES),
            day: pick(rng, &DAYS),
            hour: rng.range(i64::from(HOURS.0), i64::from(HOURS.1)) as u32,
        };
        let mut taken = Vec::new();
        for room in &rooms {
            // The requested slot is often taken, so checking availability matters.
            if rng.chance(0.45) {
                taken.push(Slot {
                    room: room.id.clone(),
                    day: request.day.clone(),
                    hour: request.hour,
                });
            }
            for _ in 0..rng.range(0, 3) {
                let slot = Slot {
                    room: room.id.clone(),
                    day: pick(rng, &DAYS),
                    hour: rng.range(i64::from(HOURS.0), i64::from(HOURS.1)) as u32,
                };
                if !taken.contains(&slot) {
                    taken.push(slot);
                }
            }
        }
        World {
            rooms,
            taken,
            request,
        }
    }

    /// Whether `room` is taken on `day` at `hour` before the episode.
    pub fn is_taken(&self, room: &str, day: &str, hour: u32) -> bool {
        self.taken
            .iter()
            .any(|s| s.room == room && s.day == day && s.hour == hour)
    }

    /// The room that answers the request: the cheapest free room that seats everyone and has
    /// the feature.
    pub fn answer(&self) -> Option<&Room> {
        let r = &self.request;
        self.rooms
            .iter()
            .filter(|room| room.capacity >= r.people && room.features.contains(&r.feature))
            .filter(|room| !self.is_taken(&room.id, &r.day, r.hour))
            .min_by_key(|room| room.price)
    }
}
