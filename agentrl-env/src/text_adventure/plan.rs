//! Seeded world generation and the breadth-first planner used by the generator (to keep only
//! solvable worlds) and by the reference solver.

use std::collections::{HashMap, VecDeque};

use agentrl_core::SeededRng;

use super::command::Command;
use super::world::{Goal, Place, Room, State, World};
use crate::maze::Direction;

/// Room names, drawn without repetition.
const ROOM_NAMES: [&str; 7] = [
    "hall", "kitchen", "cellar", "library", "garden", "attic", "study",
];
/// Names of the items besides the key.
const ITEM_NAMES: [&str; 4] = ["gem", "coin", "book", "lamp"];
/// Longest plan a generated world may need.
pub const MAX_PLAN: usize = 20;
/// Most states the planner explores before giving up.
const MAX_STATES: usize = 50_000;

/// A random world: 3 to 5 rooms on a grid, the key and one or two other items, a chest that is
/// locked half the time, and a goal not met at the start whose plan has at most [`MAX_PLAN`]
/// commands.
pub fn random_world(rng: &mut SeededRng) -> World {
    loop {
        let world = candidate(rng);
        if world.is_consistent()
            && plan(&world, &world.initial()).is_some_and(|p| !p.is_empty() && p.len() <= MAX_PLAN)
        {
            return world;
        }
    }
}

/// One unchecked candidate world.
fn candidate(rng: &mut SeededRng) -> World {
    let room_count = rng.range(3, 5) as usize;
    let mut names: Vec<&str> = ROOM_NAMES.to_vec();
    let mut cells: Vec<(i64, i64)> = vec![(0, 0)];
    let mut rooms = vec![Room {
        name: take_random(&mut names, rng),
        exits: Vec::new(),
    }];
    while rooms.len() < room_count {
        let from = rng.range(0, rooms.len() as i64 - 1) as usize;
        let Some(&direction) = rng.choose(&Direction::ALL) else {
            continue;
        };
        let (x, y) = cells[from];
        let cell = match direction {
            Direction::North => (x, y - 1),
            Direction::South => (x, y + 1),
            Direction::East => (x + 1, y),
            Direction::West => (x - 1, y),
        };
        if cells.contains(&cell) {
            continue;
        }
        let to = rooms.len();
        rooms[from].exits.push((direction.name().into(), to));
        rooms.push(Room {
            name: take_random(&mut names, rng),
            exits: vec![(opposite(direction).name().into(), from)],
        });
        cells.push(cell);
    }
    let mut others: Vec<&str> = ITEM_NAMES.to_vec();
    let mut items = vec!["key".to_string()];
    for _ in 0..rng.range(1, 2) {
        items.push(take_random(&mut others, rng));
    }
    let mut random_room = || rng.range(0, room_count as i64 - 1) as usize;
    let start: Vec<Place> = items.iter().map(|_| Place::Room(random_room())).collect();
    let chest_room = random_room();
    let item = rng.range(0, items.len() as i64 - 1) as usize;
    let goal = if rng.chance(0.5) {
        Goal::PutInChest { item }
    } else {
        Goal::Bring {
            item,
            room: rng.range(0, room_count as i64 - 1) as usize,
        }
    };
    World {
        rooms,
        items,
        start,
        chest_room,
        chest_locked: rng.chance(0.5),
        goal,
    }
}

/// Removes and returns a random name from `names` (which must not be empty).
fn take_random(names: &mut Vec<&str>, rng: &mut SeededRng) -> String {
    let i = rng.range(0, names.len() as i64 - 1) as usize;
    names.swap_remove(i).to_string()
}

/// The direction back.
fn opposite(direction: Direction) -> Direction {
    match direction {
        Direction::North => Direction::South,
        Direction::South => Direction::North,
        Direction::East => Direction::West,
        Direction::West => Direction::East,
    }
}

/// Commands worth trying in `state`: every exit, and every take, drop, open and put that the
/// rules could allow there.
fn candidates(world: &World, state: &State) -> Vec<Command> {
    let mut out: Vec<Command> = world
        .rooms
        .get(state.room)
        .map(|r| {
            r.exits
                .iter()
                .filter_map(|(d, _)| Direction::parse(d))
                .map(Command::Go)
                .collect()
        })
        .unwrap_or_default();
    for (name, place) in world.items.iter().zip(&state.items) {
        match place {
            Place::Room(r) if *r == state.room => out.push(Command::Take(name.clone())),
            Place::Held => {
                out.push(Command::Drop(name.clone()));
                out.push(Command::Put(name.clone(), "chest".into()));
            }
            _ => {}
        }
    }
    out.push(Command::Open("chest".into()));
    out
}

/// A shortest list of commands that takes `start` to a state meeting the goal (breadth-first
/// search over states); `None` when there is none within the search budget.
pub fn plan(world: &World, start: &State) -> Option<Vec<Command>> {
    let mut parent: HashMap<State, Option<(State, Command)>> = HashMap::new();
    parent.insert(start.clone(), None);
    let mut queue = VecDeque::from([start.clone()]);
    while let Some(state) = queue.pop_front() {
        if world.solved(&state) {
            let mut path = Vec::new();
            let mut at = state;
            while let Some(Some((prev, command))) = parent.get(&at) {
                path.push(command.clone());
                at = prev.clone();
            }
            path.reverse();
            return Some(path);
        }
        if parent.len() > MAX_STATES {
            return None;
        }
        for command in candidates(world, &state) {
            let mut next = state.clone();
            if world.apply(&mut next, &command).is_ok() && !parent.contains_key(&next) {
                parent.insert(next.clone(), Some((state.clone(), command)));
                queue.push_back(next);
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_worlds_have_short_plans_that_work() {
        let mut rng = SeededRng::new(5);
        for _ in 0..100 {
            let world = random_world(&mut rng);
            let mut state = world.initial();
            assert!(!world.solved(&state));
            for command in plan(&world, &state).unwrap() {
                world.apply(&mut state, &command).unwrap();
            }
            assert!(world.solved(&state));
        }
    }
}
