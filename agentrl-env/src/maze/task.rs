//! Maze tasks: seeded generation with the split rule, and reading a maze back from a task.

use agentrl_core::{Error, Result, Split, Task};
use serde_json::json;

use super::MAZE_ID;
use super::grid::Grid;
use crate::session::{draw_in_split, split_of_text};

/// The split a maze belongs to: test iff the stable hash of its rows joined by `/` is
/// divisible by 5.
pub fn split_of(grid: &Grid) -> Split {
    split_of_text(&grid.rows().join("/"))
}

/// Maze `index` of `split` for generator `seed`: candidates drawn from
/// `SeededRng::from_parts(&[seed, split, index, attempt])` until one falls in `split`.
pub fn generate(seed: u64, split: Split, index: u64) -> Grid {
    draw_in_split(seed, split, index, |rng| {
        Some(Grid::random(rng)).filter(|grid| split_of(grid) == split)
    })
}

/// The task for `grid`, with id `{split}-{index}` and the rows as data.
pub fn to_task(grid: &Grid, split: Split, index: u64) -> Task {
    let shortest = grid.shortest_path(grid.start).map_or(0, |p| p.len());
    Task {
        env_id: MAZE_ID.to_string(),
        id: format!("{split}-{index}"),
        split,
        data: json!({ "rows": grid.rows(), "shortest_path": shortest }),
    }
}

/// The maze of a task made by `to_task`; an error unless the rows form a solvable maze.
pub fn grid_of(task: &Task) -> Result<Grid> {
    let bad = |why: &str| Error::env(MAZE_ID, format!("task `{}`: {why}", task.id));
    if task.env_id != MAZE_ID {
        return Err(bad(&format!("belongs to env `{}`", task.env_id)));
    }
    let rows: Option<Vec<&str>> = task
        .data
        .get("rows")
        .and_then(|r| r.as_array())
        .and_then(|a| a.iter().map(|r| r.as_str()).collect());
    let rows = rows.ok_or_else(|| bad("data has no string array `rows`"))?;
    Grid::from_rows(&rows)
        .ok_or_else(|| bad("rows do not form a solvable maze with one S and one G"))
}
