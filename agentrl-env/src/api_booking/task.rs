//! Booking tasks: seeded generation with the split rule, and reading a world back from a task.

use agentrl_core::{Error, Result, Split, Task};
use serde_json::json;

use super::API_BOOKING_ID;
use super::world::World;
use crate::session::{draw_in_split, split_of_text};

/// The split a world belongs to: test iff the stable hash of its JSON is divisible by 5.
pub fn split_of(world: &World) -> Split {
    split_of_text(&serde_json::to_string(world).unwrap_or_default())
}

/// World `index` of `split` for generator `seed`: candidates drawn from
/// `SeededRng::from_parts(&[seed, split, index, attempt])` until one falls in `split`.
pub fn generate(seed: u64, split: Split, index: u64) -> World {
    draw_in_split(seed, split, index, |rng| {
        Some(World::random(rng)).filter(|world| split_of(world) == split)
    })
}

/// The task for `world`, with id `{split}-{index}`, the world and the expected room as data.
pub fn to_task(world: &World, split: Split, index: u64) -> Task {
    Task {
        env_id: API_BOOKING_ID.to_string(),
        id: format!("{split}-{index}"),
        split,
        data: json!({ "world": world, "expected_room": world.answer().map(|r| r.id.clone()) }),
    }
}

/// The world of a task made by `to_task`; an error unless it parses and has an answer.
pub fn world_of(task: &Task) -> Result<World> {
    let bad = |why: String| Error::env(API_BOOKING_ID, format!("task `{}`: {why}", task.id));
    if task.env_id != API_BOOKING_ID {
        return Err(bad(format!("belongs to env `{}`", task.env_id)));
    }
    let data = task.data.get("world").cloned().unwrap_or_default();
    let world: World =
        serde_json::from_value(data).map_err(|e| bad(format!("bad `world`: {e}")))?;
    if world.answer().is_none() {
        return Err(bad("no room answers the request".into()));
    }
    Ok(world)
}
