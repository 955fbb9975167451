//! The imperfect `maze` demonstrator: the reference solver, or, as a habit decided once per
//! task, a beeline walker that heads straight for the goal and never searches for a path.

use agentrl_core::{Message, Result, SeededRng, Task};

use super::grid::{Direction, Grid, Pos};
use super::{MAZE_ID, call_move, grid_of, position_after, unreadable_task};
use crate::demonstrator::{
    DemonstratorKnobs, KnobDoc, PerTaskChoice, probability_knob, reject_unknown_knobs,
};
use crate::factory::Solver;

/// Knob: probability of walking straight at the goal on a task.
const BEELINE_PROB: &str = "beeline_prob";

/// The knobs of [`MazeDemonstrator::from_knobs`] (name, doc).
pub const MAZE_DEMONSTRATOR_KNOBS: &[KnobDoc] = &[(
    BEELINE_PROB,
    "probability of walking straight at G on a task (each move closes the larger of the \
     row and column gaps, pushing into any wall in the way) instead of a shortest path \
     (default 0)",
)];

/// A demonstrator for supervised warm starts whose mistake is a habit, so that a cloned
/// policy keeps it under greedy decoding and RL has something to unlearn.
///
/// Once per task (on its first turn) it decides, with probability `beeline_prob`, to make a
/// beeline: each move closes the larger of the row and column gaps to `G` (rows on a tie),
/// and when a wall is in the way it keeps pushing into it until the turn limit ends the
/// episode. Such a walk fails wherever a wall stands in its way. Otherwise it plays like
/// [`super::MazeExpert`].
#[derive(Debug, Clone)]
pub struct MazeDemonstrator {
    /// Probability of the beeline on a task.
    pub beeline_prob: f64,
    /// Source of all its random choices.
    pub rng: SeededRng,
    /// For the task in progress (by id): whether it makes a beeline.
    plan: PerTaskChoice<bool>,
}

impl MazeDemonstrator {
    /// A demonstrator making beelines with probability `beeline_prob`, seeded by `seed`.
    pub fn new(seed: u64, beeline_prob: f64) -> Self {
        MazeDemonstrator {
            beeline_prob,
            rng: SeededRng::new(seed),
            plan: PerTaskChoice::default(),
        }
    }

    /// The demonstrator that `knobs` describe (see [`MAZE_DEMONSTRATOR_KNOBS`]), seeded by
    /// `seed`; a missing knob turns its habit off, and an unknown knob or a value outside
    /// `[0, 1]` is an [`Error::Config`](agentrl_core::Error::Config) naming the knob.
    pub fn from_knobs(seed: u64, knobs: &DemonstratorKnobs) -> Result<Self> {
        reject_unknown_knobs(MAZE_ID, knobs, MAZE_DEMONSTRATOR_KNOBS)?;
        let beeline = probability_knob(MAZE_ID, knobs, BEELINE_PROB, 0.0)?;
        Ok(MazeDemonstrator::new(seed, beeline))
    }

    /// Whether to make a beeline on `task`: decided on the first turn, remembered after.
    fn makes_beeline(&mut self, task: &Task, history: &[Message]) -> bool {
        self.plan
            .decide(task, history, || self.rng.chance(self.beeline_prob))
    }
}

impl Solver for MazeDemonstrator {
    fn act(&mut self, task: &Task, history: &[Message]) -> Message {
        let grid = match grid_of(task) {
            Ok(g) => g,
            Err(e) => return unreadable_task(&e),
        };
        let pos = position_after(&grid, history);
        let direction = if self.makes_beeline(task, history) {
            beeline_move(&grid, pos)
        } else {
            grid.shortest_path(pos).and_then(|p| p.first().copied())
        };
        match direction {
            Some(direction) => call_move(direction, history),
            None => Message::assistant("I am at the goal."),
        }
    }
}

/// The beeline's move from `pos`: toward the goal along the axis with the larger gap (rows
/// on a tie), whether or not a wall is in the way. `None` at the goal.
fn beeline_move(grid: &Grid, pos: Pos) -> Option<Direction> {
    let toward = |from: usize, to: usize, less: Direction, more: Direction| {
        (from != to).then_some(if to < from { less } else { more })
    };
    let vertical = toward(pos.0, grid.goal.0, Direction::North, Direction::South);
    let horizontal = toward(pos.1, grid.goal.1, Direction::West, Direction::East);
    if pos.0.abs_diff(grid.goal.0) >= pos.1.abs_diff(grid.goal.1) {
        vertical.or(horizontal)
    } else {
        horizontal.or(vertical)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::demonstrator::test_support::{
        assert_knob_error, assert_reference_without_knobs_and_repeatable, play, success_rates,
    };
    use crate::factory::SolverEpisode;
    use crate::maze::Maze;
    use serde_json::json;

    /// Episodes of the demonstrator with `knobs` and `seed` on the first `n` train tasks.
    async fn episodes(knobs: serde_json::Value, seed: u64, n: u64) -> Vec<SolverEpisode> {
        play(&Maze::default(), knobs, seed, n).await
    }

    #[test]
    fn beelines_close_the_larger_gap_and_push_into_walls() {
        let grid = Grid::from_rows(&["S.#..", "..#..", ".#..G", "....."]).unwrap();
        assert_eq!(beeline_move(&grid, (0, 0)), Some(Direction::East));
        assert_eq!(
            beeline_move(&grid, (0, 1)),
            Some(Direction::East),
            "into the wall"
        );
        assert_eq!(beeline_move(&grid, (0, 3)), Some(Direction::South));
        assert_eq!(
            beeline_move(&grid, (1, 3)),
            Some(Direction::South),
            "rows on a tie"
        );
        assert_eq!(beeline_move(&grid, (3, 4)), Some(Direction::North));
        assert_eq!(beeline_move(&grid, (2, 2)), Some(Direction::East));
        assert_eq!(beeline_move(&grid, grid.goal), None);
    }

    #[tokio::test]
    async fn beelines_fail_where_a_wall_is_in_the_way() {
        let rate = |knob: f64| async move {
            success_rates(
                &episodes(json!({ BEELINE_PROB: knob }), 1, 50).await,
                |_| true,
            )
            .0
        };
        let (off, half, on) = (rate(0.0).await, rate(0.5).await, rate(1.0).await);
        assert_eq!(off, 1.0);
        assert!(on < 0.5, "beelines: {on}");
        assert!(on + 0.1 < half && half < off - 0.1, "{off} {half} {on}");
    }

    #[tokio::test]
    async fn without_knobs_it_is_the_reference_solver_and_seeds_repeat() {
        let knobs = json!({ BEELINE_PROB: 0.5 });
        assert_reference_without_knobs_and_repeatable(&Maze::default(), knobs).await;
    }

    #[test]
    fn bad_knobs_name_the_env_and_the_knob() {
        for (knobs, knob) in [
            (json!({ "beeline": 0.5 }), "`beeline`"),
            (json!({ BEELINE_PROB: 1.5 }), "`beeline_prob`"),
            (json!({ BEELINE_PROB: "often" }), "`beeline_prob`"),
        ] {
            let knobs = knobs.as_object().cloned().unwrap_or_default();
            assert_knob_error(MazeDemonstrator::from_knobs(0, &knobs), "maze", knob);
        }
    }
}
