//! Text-adventure worlds: rooms with exits, portable items, a chest that may be locked, a goal;
//! the episode state and the rules that commands follow.

use serde::{Deserialize, Serialize};

use super::command::Command;
use crate::maze::Direction;

/// A room and its exits.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Room {
    /// Room name (e.g. `hall`).
    pub name: String,
    /// Exits as `(direction name, index of the room it leads to)`.
    pub exits: Vec<(String, usize)>,
}

/// Where an item is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Place {
    /// On the floor of a room (by index).
    Room(usize),
    /// Carried by the agent.
    Held,
    /// Inside the chest.
    Chest,
}

/// What the agent must achieve.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Goal {
    /// Put the item (by index) in the chest.
    PutInChest {
        /// Index of the item.
        item: usize,
    },
    /// Drop the item (by index) in the room (by index).
    Bring {
        /// Index of the item.
        item: usize,
        /// Index of the room.
        room: usize,
    },
}

/// The fixed part of a world: map, items and their starting places, chest and goal.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct World {
    /// The rooms; the agent starts in room 0.
    pub rooms: Vec<Room>,
    /// Item names; item 0 is the key.
    pub items: Vec<String>,
    /// Where each item starts.
    pub start: Vec<Place>,
    /// Room of the chest.
    pub chest_room: usize,
    /// Whether the chest starts locked (the key opens it).
    pub chest_locked: bool,
    /// The goal.
    pub goal: Goal,
}

/// The changing part of an episode.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct State {
    /// Room the agent is in.
    pub room: usize,
    /// Where each item is.
    pub items: Vec<Place>,
    /// Whether the chest is open.
    pub chest_open: bool,
}

impl World {
    /// Whether all indices are in range, exits lead to rooms and names are unique.
    pub fn is_consistent(&self) -> bool {
        let n = self.rooms.len();
        let room_ok = |r: usize| r < n;
        let place_ok = |p: &Place| !matches!(p, Place::Room(r) if !room_ok(*r));
        let goal_ok = match self.goal {
            Goal::PutInChest { item } => item < self.items.len(),
            Goal::Bring { item, room } => item < self.items.len() && room_ok(room),
        };
        let unique = |names: Vec<&String>| {
            let mut sorted = names.clone();
            sorted.sort();
            sorted.dedup();
            sorted.len() == names.len()
        };
        n > 0
            && room_ok(self.chest_room)
            && goal_ok
            && self.items.first().is_some_and(|k| k == "key")
            && self.start.len() == self.items.len()
            && self.start.iter().all(place_ok)
            && unique(self.items.iter().collect())
            && unique(self.rooms.iter().map(|r| &r.name).collect())
            && self.rooms.iter().all(|r| {
                r.exits
                    .iter()
                    .all(|(d, to)| room_ok(*to) && Direction::parse(d).is_some())
            })
    }

    /// The state at the start of an episode.
    pub fn initial(&self) -> State {
        State {
            room: 0,
            items: self.start.clone(),
            chest_open: false,
        }
    }

    /// Whether `state` meets the goal.
    pub fn solved(&self, state: &State) -> bool {
        match self.goal {
            Goal::PutInChest { item } => state.items.get(item) == Some(&Place::Chest),
            Goal::Bring { item, room } => state.items.get(item) == Some(&Place::Room(room)),
        }
    }

    /// The goal in words, e.g. `put the gem in the chest`.
    pub fn goal_text(&self) -> String {
        let name = |i: usize| self.items.get(i).map_or("?", String::as_str);
        match self.goal {
            Goal::PutInChest { item } => format!("put the {} in the chest", name(item)),
            Goal::Bring { item, room } => {
                let room = self.rooms.get(room).map_or("?", |r| r.name.as_str());
                format!("bring the {} to the {room}", name(item))
            }
        }
    }

    /// What the agent sees in its room, e.g. `hall. Exits: north, east. Here: key, chest (locked).`
    pub fn look(&self, state: &State) -> String {
        let Some(room) = self.rooms.get(state.room) else {
            return "nowhere".to_string();
        };
        let exits: Vec<&str> = room.exits.iter().map(|(d, _)| d.as_str()).collect();
        let mut here: Vec<String> = self
            .items
            .iter()
            .zip(&state.items)
            .filter(|(_, p)| **p == Place::Room(state.room))
            .map(|(name, _)| name.clone())
            .collect();
        if self.chest_room == state.room {
            here.push(format!("chest ({})", self.chest_status(state)));
        }
        let here = if here.is_empty() {
            "nothing".to_string()
        } else {
            here.join(", ")
        };
        format!("{}. Exits: {}. Here: {here}.", room.name, exits.join(", "))
    }

    /// `open`, `closed` or `locked`.
    fn chest_status(&self, state: &State) -> &'static str {
        match (state.chest_open, self.chest_locked) {
            (true, _) => "open",
            (false, true) => "locked",
            (false, false) => "closed",
        }
    }

    /// The index of the item called `name`, or why there is no such item.
    fn item_named(&self, name: &str) -> Result<usize, String> {
        self.items
            .iter()
            .position(|i| i == name)
            .ok_or_else(|| format!("there is no {name}"))
    }

    /// Applies `command` to `state`: `Ok` with what happened, or `Err` with why it could not
    /// be done (the state is then unchanged).
    pub fn apply(&self, state: &mut State, command: &Command) -> Result<String, String> {
        match command {
            Command::Look => Ok(self.look(state)),
            Command::Inventory => {
                let held: Vec<&str> = self
                    .items
                    .iter()
                    .zip(&state.items)
                    .filter(|(_, p)| **p == Place::Held)
                    .map(|(n, _)| n.as_str())
                    .collect();
                Ok(if held.is_empty() {
                    "you carry nothing".to_string()
                } else {
                    format!("you carry: {}", held.join(", "))
                })
            }
            Command::Go(direction) => {
                let room = self.rooms.get(state.room).ok_or("you are nowhere")?;
                let to = room
                    .exits
                    .iter()
                    .find(|(d, _)| d == direction.name())
                    .map(|(_, to)| *to)
                    .ok_or_else(|| format!("no exit to the {}", direction.name()))?;
                state.room = to;
                Ok(self.look(state))
            }
            Command::Take(name) => {
                let i = self.item_named(name)?;
                if state.items[i] != Place::Room(state.room) {
                    return Err(format!("the {name} is not here"));
                }
                state.items[i] = Place::Held;
                Ok(format!("taken: {name}"))
            }
            Command::Drop(name) => {
                let i = self.held_item(state, name)?;
                state.items[i] = Place::Room(state.room);
                Ok(format!("dropped: {name}"))
            }
            Command::Open(name) => {
                if name != "chest" {
                    return Err(format!("the {name} cannot be opened"));
                }
                self.chest_here(state)?;
                if state.chest_open {
                    return Err("the chest is already open".into());
                }
                if self.chest_locked && state.items.first() != Some(&Place::Held) {
                    return Err("the chest is locked; you need the key".into());
                }
                state.chest_open = true;
                Ok("the chest is open".into())
            }
            Command::Put(name, container) => {
                if container != "chest" {
                    return Err(format!("you cannot put things in the {container}"));
                }
                let i = self.held_item(state, name)?;
                self.chest_here(state)?;
                if !state.chest_open {
                    return Err("the chest is closed".into());
                }
                state.items[i] = Place::Chest;
                Ok(format!("the {name} is in the chest"))
            }
        }
    }

    /// The index of item `name` if the agent carries it.
    fn held_item(&self, state: &State, name: &str) -> Result<usize, String> {
        let i = self.item_named(name)?;
        match state.items.get(i) {
            Some(Place::Held) => Ok(i),
            _ => Err(format!("you do not carry the {name}")),
        }
    }

    /// `Ok` when the chest is in the agent's room.
    fn chest_here(&self, state: &State) -> Result<(), String> {
        if self.chest_room == state.room {
            Ok(())
        } else {
            Err("there is no chest here".into())
        }
    }
}
