//! Maze grids: seeded generation of solvable mazes, moves, breadth-first search, rendering and
//! the round trip to and from task rows.

use std::collections::VecDeque;

use agentrl_core::SeededRng;

/// Smallest side length of a generated maze.
const MIN_SIDE: i64 = 5;
/// Largest side length of a generated maze.
const MAX_SIDE: i64 = 7;
/// Probability that a cell of a generated maze is a wall.
const WALL_PROB: f64 = 0.3;
/// Shortest path length a generated maze must have, at least.
const MIN_PATH: usize = 4;
/// Shortest path length a generated maze may have, at most.
pub const MAX_PATH: usize = 20;

/// A compass direction the agent can move in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// One row up.
    North,
    /// One row down.
    South,
    /// One column right.
    East,
    /// One column left.
    West,
}

impl Direction {
    /// All directions, in the order search tries them.
    pub const ALL: [Direction; 4] = [
        Direction::North,
        Direction::South,
        Direction::East,
        Direction::West,
    ];

    /// The lowercase name used by the `move` tool.
    pub fn name(self) -> &'static str {
        match self {
            Direction::North => "north",
            Direction::South => "south",
            Direction::East => "east",
            Direction::West => "west",
        }
    }

    /// The direction called `name`, if any.
    pub fn parse(name: &str) -> Option<Direction> {
        Direction::ALL.into_iter().find(|d| d.name() == name)
    }

    /// Row and column offsets of one step.
    fn delta(self) -> (i64, i64) {
        match self {
            Direction::North => (-1, 0),
            Direction::South => (1, 0),
            Direction::East => (0, 1),
            Direction::West => (0, -1),
        }
    }
}

/// A cell position, `(row, column)`.
pub type Pos = (usize, usize);

/// A rectangular maze with walls, a start and a goal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grid {
    width: usize,
    height: usize,
    walls: Vec<bool>,
    /// Where the agent starts.
    pub start: Pos,
    /// Where the agent must go.
    pub goal: Pos,
}

impl Grid {
    /// A random solvable maze whose shortest path has `MIN_PATH..=MAX_PATH` moves.
    pub fn random(rng: &mut SeededRng) -> Grid {
        loop {
            let height = rng.range(MIN_SIDE, MAX_SIDE) as usize;
            let width = rng.range(MIN_SIDE, MAX_SIDE) as usize;
            let walls: Vec<bool> = (0..width * height).map(|_| rng.chance(WALL_PROB)).collect();
            let open: Vec<Pos> = (0..width * height)
                .filter(|&i| !walls[i])
                .map(|i| (i / width, i % width))
                .collect();
            let (Some(&start), Some(&goal)) = (rng.choose(&open), rng.choose(&open)) else {
                continue;
            };
            let grid = Grid {
                width,
                height,
                walls,
                start,
                goal,
            };
            let length = grid.shortest_path(start).map(|p| p.len());
            if length.is_some_and(|n| (MIN_PATH..=MAX_PATH).contains(&n)) {
                return grid;
            }
        }
    }

    /// Parses rows of `#` (wall), `.` (open), `S` (start) and `G` (goal); `None` unless the
    /// rows are non-empty, of equal length, with exactly one `S` and one `G`, and solvable.
    pub fn from_rows(rows: &[&str]) -> Option<Grid> {
        let height = rows.len();
        let width = rows.first()?.len();
        if width == 0 || rows.iter().any(|r| r.len() != width) {
            return None;
        }
        let (mut walls, mut start, mut goal) = (Vec::new(), Vec::new(), Vec::new());
        for (r, row) in rows.iter().enumerate() {
            for (c, b) in row.bytes().enumerate() {
                match b {
                    b'#' => walls.push(true),
                    b'.' => walls.push(false),
                    b'S' => {
                        walls.push(false);
                        start.push((r, c));
                    }
                    b'G' => {
                        walls.push(false);
                        goal.push((r, c));
                    }
                    _ => return None,
                }
            }
        }
        let ([start], [goal]) = (start.as_slice(), goal.as_slice()) else {
            return None;
        };
        let grid = Grid {
            width,
            height,
            walls,
            start: *start,
            goal: *goal,
        };
        grid.shortest_path(grid.start).map(|_| grid)
    }

    /// The rows in the `from_rows` format.
    pub fn rows(&self) -> Vec<String> {
        (0..self.height)
            .map(|r| {
                (0..self.width)
                    .map(|c| match (r, c) {
                        p if p == self.start => 'S',
                        p if p == self.goal => 'G',
                        p => self.cell_char(p),
                    })
                    .collect()
            })
            .collect()
    }

    /// The maze as the agent sees it with itself at `agent`: `A` you, `G` goal, `#` wall.
    pub fn render(&self, agent: Pos) -> String {
        let rows: Vec<String> = (0..self.height)
            .map(|r| {
                (0..self.width)
                    .map(|c| match (r, c) {
                        p if p == agent => 'A',
                        p if p == self.goal => 'G',
                        p => self.cell_char(p),
                    })
                    .collect()
            })
            .collect();
        rows.join("\n")
    }

    /// `#` for a wall, `.` otherwise.
    fn cell_char(&self, (r, c): Pos) -> char {
        if self.walls[r * self.width + c] {
            '#'
        } else {
            '.'
        }
    }

    /// The cell one step from `from` in `direction`, unless that is a wall or off the grid.
    pub fn step(&self, from: Pos, direction: Direction) -> Option<Pos> {
        let (dr, dc) = direction.delta();
        let r = usize::try_from(from.0 as i64 + dr).ok()?;
        let c = usize::try_from(from.1 as i64 + dc).ok()?;
        (r < self.height && c < self.width && !self.walls[r * self.width + c]).then_some((r, c))
    }

    /// A shortest sequence of moves from `from` to the goal (breadth-first search), if any.
    pub fn shortest_path(&self, from: Pos) -> Option<Vec<Direction>> {
        let index = |(r, c): Pos| r * self.width + c;
        if from.0 >= self.height || from.1 >= self.width {
            return None;
        }
        let mut came_from: Vec<Option<(Pos, Direction)>> = vec![None; self.walls.len()];
        let mut seen = vec![false; self.walls.len()];
        seen[index(from)] = true;
        let mut queue = VecDeque::from([from]);
        while let Some(pos) = queue.pop_front() {
            if pos == self.goal {
                let mut path = Vec::new();
                let mut at = pos;
                while let Some((prev, dir)) = came_from[index(at)] {
                    path.push(dir);
                    at = prev;
                }
                path.reverse();
                return Some(path);
            }
            for dir in Direction::ALL {
                if let Some(next) = self.step(pos, dir)
                    && !seen[index(next)]
                {
                    seen[index(next)] = true;
                    came_from[index(next)] = Some((pos, dir));
                    queue.push_back(next);
                }
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_moves_and_searches() {
        let grid = Grid::from_rows(&["S.#", "#.#", "..G"]).unwrap();
        assert_eq!(grid.step((0, 0), Direction::South), None);
        assert_eq!(grid.step((0, 0), Direction::North), None);
        assert_eq!(grid.step((0, 0), Direction::East), Some((0, 1)));
        let path = grid.shortest_path(grid.start).unwrap();
        assert_eq!(path.len(), 4);
        assert_eq!(grid.render((1, 1)), "..#\n#A#\n..G");
        assert_eq!(grid.rows(), vec!["S.#", "#.#", "..G"]);
    }

    #[test]
    fn rejects_bad_rows() {
        for rows in [
            &["S#", "#G"][..],
            &["SG", "G."],
            &["S.", "x G"],
            &[],
            &["S..G", ".."],
        ] {
            assert!(Grid::from_rows(rows).is_none(), "{rows:?}");
        }
    }

    #[test]
    fn random_mazes_are_solvable_within_bounds() {
        let mut rng = SeededRng::new(9);
        for _ in 0..200 {
            let grid = Grid::random(&mut rng);
            let n = grid.shortest_path(grid.start).unwrap().len();
            assert!((MIN_PATH..=MAX_PATH).contains(&n));
            let rows = grid.rows();
            let refs: Vec<&str> = rows.iter().map(String::as_str).collect();
            assert_eq!(Grid::from_rows(&refs).unwrap(), grid);
        }
    }
}
