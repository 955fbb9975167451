//! Text-adventure tasks: seeded generation with the split rule, and reading a world back.

use agentrl_core::{Error, Result, Split, Task};
use serde_json::json;

use super::TEXT_ADVENTURE_ID;
use super::plan::{plan, random_world};
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
        Some(random_world(rng)).filter(|world| split_of(world) == split)
    })
}

/// The task for `world`, with id `{split}-{index}`; data holds the world and the goal text.
pub fn to_task(world: &World, split: Split, index: u64) -> Task {
    Task {
        env_id: TEXT_ADVENTURE_ID.to_string(),
        id: format!("{split}-{index}"),
        split,
        data: json!({ "goal": world.goal_text(), "world": world }),
    }
}

/// The world of a task made by `to_task`; an error unless it is consistent and solvable.
pub fn world_of(task: &Task) -> Result<World> {
    let bad = |why: String| Error::env(TEXT_ADVENTURE_ID, format!("task `{}`: {why}", task.id));
    if task.env_id != TEXT_ADVENTURE_ID {
        return Err(bad(format!("belongs to env `{}`", task.env_id)));
    }
    let value = task
        .data
        .get("world")
        .ok_or_else(|| bad("data has no `world`".into()))?;
    let world: World =
        serde_json::from_value(value.clone()).map_err(|e| bad(format!("bad world: {e}")))?;
    if !world.is_consistent() || plan(&world, &world.initial()).is_none() {
        return Err(bad("the world is inconsistent or cannot be solved".into()));
    }
    Ok(world)
}
