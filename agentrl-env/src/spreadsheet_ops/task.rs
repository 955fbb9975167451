//! `spreadsheet-ops` tasks: a generated inventory sheet and one job on it (a look-up or an
//! update), the sheet the job should leave behind and the answer it asks for, all computed
//! from the rows without SQL.

use agentrl_core::{Error, Result, SeededRng, Split, Task};
use agentrl_tools::Cell;
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::SPREADSHEET_OPS_ID;
use crate::session::{draw_in_split, split_of_text};

/// Item names (unique within a sheet).
const ITEMS: [&str; 20] = [
    "bolt", "nut", "screw", "washer", "hinge", "nail", "drill", "saw", "hammer", "wrench", "glue",
    "tape", "rope", "chain", "pliers", "clamp", "brush", "paint", "ladder", "bucket",
];
/// Item categories.
const CATEGORIES: [&str; 3] = ["hardware", "tools", "supplies"];
/// The header row.
pub const HEADERS: [&str; 4] = ["Item", "Category", "Stock", "Price"];
/// The name of the task's sheet.
pub const SHEET: &str = "inventory";

/// One inventory row.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Item {
    /// Item name (column A).
    pub name: String,
    /// Category (column B).
    pub category: String,
    /// Units in stock (column C).
    pub stock: i64,
    /// Unit price (column D).
    pub price: i64,
}

/// What the agent must do.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Job {
    /// Answer the stock (or, with `price`, the price) of an item.
    LookUp {
        /// The item.
        item: String,
        /// Ask for the price instead of the stock.
        price: bool,
    },
    /// Answer the total stock of a category.
    CategoryTotal {
        /// The category.
        category: String,
    },
    /// Set an item's stock.
    SetStock {
        /// The item.
        item: String,
        /// The new stock.
        stock: i64,
    },
    /// Add received units to an item's stock.
    Restock {
        /// The item.
        item: String,
        /// Units received.
        received: i64,
    },
    /// Append a new item row.
    AddItem {
        /// The new row.
        item: Item,
    },
    /// Write the total stock of all items into a cell.
    WriteTotal {
        /// The cell, e.g. `F2`.
        cell: String,
    },
}

/// One task: the sheet's items and the job.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SheetTask {
    /// The items, rows 2.. of the sheet.
    pub items: Vec<Item>,
    /// The job.
    pub job: Job,
}

impl SheetTask {
    /// A random task: 5-12 items and one job.
    pub fn random(rng: &mut SeededRng) -> Self {
        let mut names: Vec<&str> = ITEMS.to_vec();
        for i in 0..names.len() {
            let j = rng.range(i as i64, names.len() as i64 - 1) as usize;
            names.swap(i, j);
        }
        let count = rng.range(5, 12) as usize;
        let item = |name: &str, rng: &mut SeededRng| Item {
            name: name.to_string(),
            category: rng
                .choose(&CATEGORIES)
                .copied()
                .unwrap_or_default()
                .to_string(),
            stock: rng.range(0, 200),
            price: rng.range(1, 99),
        };
        let items: Vec<Item> = names[..count].iter().map(|n| item(n, rng)).collect();
        let target = items[rng.range(0, count as i64 - 1) as usize].clone();
        let job = match rng.range(0, 5) {
            0 => Job::LookUp {
                item: target.name,
                price: rng.chance(0.5),
            },
            1 => Job::CategoryTotal {
                category: target.category,
            },
            2 => Job::SetStock {
                item: target.name,
                stock: rng.range(0, 300),
            },
            3 => Job::Restock {
                item: target.name,
                received: rng.range(1, 100),
            },
            4 => Job::AddItem {
                item: item(names[count], rng),
            },
            _ => Job::WriteTotal {
                cell: format!(
                    "{}{}",
                    ["F", "G", "H"][rng.range(0, 2) as usize],
                    rng.range(1, 3)
                ),
            },
        };
        SheetTask { items, job }
    }

    /// The instruction shown to the agent.
    pub fn text(&self) -> String {
        match &self.job {
            Job::LookUp { item, price: false } => format!("How many units of {item} are in stock?"),
            Job::LookUp { item, price: true } => format!("What is the price of {item}?"),
            Job::CategoryTotal { category } => {
                format!("What is the total stock of all items in the category {category}?")
            }
            Job::SetStock { item, stock } => format!("Set the stock of {item} to {stock}."),
            Job::Restock { item, received } => {
                format!("We received {received} more units of {item}; update its stock.")
            }
            Job::AddItem { item } => format!(
                "Add a new item as a row after the last one: {}, category {}, stock {}, price {}.",
                item.name, item.category, item.stock, item.price
            ),
            Job::WriteTotal { cell } => {
                format!(
                    "Write the total stock of all items (the sum of column C) into cell {cell}."
                )
            }
        }
    }

    /// The sheet before the job: the header row, then one row per item.
    pub fn initial_rows(&self) -> Vec<Vec<Cell>> {
        let header = HEADERS.iter().map(|h| Cell::text(*h)).collect();
        std::iter::once(header)
            .chain(self.items.iter().map(row_of))
            .collect()
    }

    /// The sheet the job should leave behind.
    pub fn expected_rows(&self) -> Vec<Vec<Cell>> {
        let mut rows = self.initial_rows();
        let row_of_item = |name: &str| {
            self.items
                .iter()
                .position(|i| i.name == name)
                .map(|i| i + 1)
        };
        match &self.job {
            Job::LookUp { .. } | Job::CategoryTotal { .. } => {}
            Job::SetStock { item, stock } => {
                if let Some(r) = row_of_item(item) {
                    rows[r][2] = Cell::Number(*stock as f64);
                }
            }
            Job::Restock { item, received } => {
                if let Some(r) = row_of_item(item) {
                    rows[r][2] = Cell::Number((self.items[r - 1].stock + received) as f64);
                }
            }
            Job::AddItem { item } => rows.push(row_of(item)),
            Job::WriteTotal { cell } => {
                if let Ok(at) = agentrl_tools::spreadsheet::CellRef::parse(cell) {
                    let total: i64 = self.items.iter().map(|i| i.stock).sum();
                    let row = at.row as usize - 1;
                    if rows.len() <= row {
                        rows.resize(row + 1, Vec::new());
                    }
                    if rows[row].len() <= at.column {
                        rows[row].resize(at.column + 1, Cell::Empty);
                    }
                    rows[row][at.column] = Cell::Number(total as f64);
                }
            }
        }
        rows
    }

    /// The number a look-up asks for; `None` for an update.
    pub fn expected_answer(&self) -> Option<i64> {
        let item = |name: &str| self.items.iter().find(|i| i.name == name);
        match &self.job {
            Job::LookUp { item: name, price } => {
                item(name).map(|i| if *price { i.price } else { i.stock })
            }
            Job::CategoryTotal { category } => Some(
                self.items
                    .iter()
                    .filter(|i| &i.category == category)
                    .map(|i| i.stock)
                    .sum(),
            ),
            _ => None,
        }
    }

    /// Task `index` of `split` for generator `seed`: candidates drawn from
    /// `SeededRng::from_parts(&[seed, split, index, attempt])` until one falls in `split`
    /// (test iff the stable hash of the task's JSON is divisible by 5).
    pub fn generate(seed: u64, split: Split, index: u64) -> Self {
        draw_in_split(seed, split, index, |rng| {
            Some(SheetTask::random(rng)).filter(|t| split_of_text(&json!(t).to_string()) == split)
        })
    }

    /// The task with id `{split}-{index}`, whose data is this task as JSON plus its text.
    pub fn to_task(&self, split: Split, index: u64) -> Task {
        let mut data = json!(self);
        data["text"] = json!(self.text());
        Task {
            env_id: SPREADSHEET_OPS_ID.to_string(),
            id: format!("{split}-{index}"),
            split,
            data,
        }
    }

    /// The task behind a [`Task`] made by [`SheetTask::to_task`].
    pub fn from_task(task: &Task) -> Result<Self> {
        let bad =
            |why: String| Error::env(SPREADSHEET_OPS_ID, format!("task `{}`: {why}", task.id));
        if task.env_id != SPREADSHEET_OPS_ID {
            return Err(bad(format!("belongs to env `{}`", task.env_id)));
        }
        let parsed: SheetTask =
            serde_json::from_value(task.data.clone()).map_err(|e| bad(format!("bad data: {e}")))?;
        if parsed.items.is_empty() {
            return Err(bad("the sheet has no items".to_string()));
        }
        Ok(parsed)
    }
}

/// The sheet row of `item`.
fn row_of(item: &Item) -> Vec<Cell> {
    vec![
        Cell::text(&item.name),
        Cell::text(&item.category),
        Cell::Number(item.stock as f64),
        Cell::Number(item.price as f64),
    ]
}
