//! The generated shop database of a `sql-analysis` task: customers, products and orders, drawn
//! from a seeded generator, kept in the task as plain rows and loaded into SQLite per session.

use agentrl_core::SeededRng;
use rusqlite::Connection;
use serde::{Deserialize, Serialize};

/// First names customers are drawn from (unique within a database).
const NAMES: [&str; 24] = [
    "Ada", "Ben", "Cleo", "Dev", "Eva", "Finn", "Gus", "Hana", "Ivo", "Jin", "Kai", "Lena", "Mira",
    "Noor", "Omar", "Pia", "Quin", "Rosa", "Sami", "Tara", "Uma", "Vic", "Wen", "Yara",
];
/// Cities customers live in.
const CITIES: [&str; 6] = ["Oslo", "Lyon", "Porto", "Graz", "Turku", "Cork"];
/// Products with their category.
const PRODUCTS: [(&str, &str); 14] = [
    ("atlas", "books"),
    ("novel", "books"),
    ("cookbook", "books"),
    ("chess", "games"),
    ("puzzle", "games"),
    ("dice", "games"),
    ("rake", "garden"),
    ("hose", "garden"),
    ("seeds", "garden"),
    ("kettle", "kitchen"),
    ("pan", "kitchen"),
    ("knife", "kitchen"),
    ("kite", "toys"),
    ("yoyo", "toys"),
];

/// The schema shown to the agent (and used to create the tables).
pub const SCHEMA: &str = concat!(
    "CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT, city TEXT, joined INTEGER);\n",
    "CREATE TABLE products (id INTEGER PRIMARY KEY, name TEXT, category TEXT, price INTEGER);\n",
    "CREATE TABLE orders (id INTEGER PRIMARY KEY, customer_id INTEGER REFERENCES customers(id), ",
    "product_id INTEGER REFERENCES products(id), quantity INTEGER, month INTEGER);"
);

/// A customer row.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Customer {
    /// Primary key.
    pub id: i64,
    /// Unique first name.
    pub name: String,
    /// Home city.
    pub city: String,
    /// Year the customer joined.
    pub joined: i64,
}

/// A product row.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Product {
    /// Primary key.
    pub id: i64,
    /// Unique name.
    pub name: String,
    /// Category.
    pub category: String,
    /// Unit price (whole currency units).
    pub price: i64,
}

/// An order row.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Order {
    /// Primary key.
    pub id: i64,
    /// Who ordered.
    pub customer_id: i64,
    /// What was ordered.
    pub product_id: i64,
    /// Units ordered.
    pub quantity: i64,
    /// Month of the order, 1 to 12.
    pub month: i64,
}

/// All rows of one task's database.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Shop {
    /// The `customers` table.
    pub customers: Vec<Customer>,
    /// The `products` table.
    pub products: Vec<Product>,
    /// The `orders` table.
    pub orders: Vec<Order>,
}

impl Shop {
    /// A random shop: 6-12 customers, 5-10 products, 20-45 orders.
    pub fn random(rng: &mut SeededRng) -> Self {
        let count = rng_range(rng, 6, 12);
        let customers = pick(rng, NAMES.len(), count)
            .into_iter()
            .enumerate()
            .map(|(i, n)| Customer {
                id: i as i64 + 1,
                name: NAMES[n].to_string(),
                city: pick_one(rng, &CITIES).to_string(),
                joined: rng.range(2015, 2024),
            })
            .collect::<Vec<_>>();
        let count = rng_range(rng, 5, 10);
        let products = pick(rng, PRODUCTS.len(), count)
            .into_iter()
            .enumerate()
            .map(|(i, p)| Product {
                id: i as i64 + 1,
                name: PRODUCTS[p].0.to_string(),
                category: PRODUCTS[p].1.to_string(),
                price: rng.range(2, 60),
            })
            .collect::<Vec<_>>();
        let orders = (0..rng_range(rng, 20, 45))
            .map(|i| Order {
                id: i as i64 + 1,
                customer_id: rng.range(1, customers.len() as i64),
                product_id: rng.range(1, products.len() as i64),
                quantity: rng.range(1, 5),
                month: rng.range(1, 12),
            })
            .collect();
        Shop {
            customers,
            products,
            orders,
        }
    }

    /// The customer with `id`.
    pub fn customer(&self, id: i64) -> Option<&Customer> {
        self.customers.iter().find(|c| c.id == id)
    }

    /// The product with `id`.
    pub fn product(&self, id: i64) -> Option<&Product> {
        self.products.iter().find(|p| p.id == id)
    }

    /// Creates the tables of [`SCHEMA`] in `conn` and inserts every row.
    pub fn load(&self, conn: &Connection) -> rusqlite::Result<()> {
        conn.execute_batch(SCHEMA)?;
        for c in &self.customers {
            conn.execute(
                "INSERT INTO customers VALUES (?1, ?2, ?3, ?4)",
                (c.id, &c.name, &c.city, c.joined),
            )?;
        }
        for p in &self.products {
            conn.execute(
                "INSERT INTO products VALUES (?1, ?2, ?3, ?4)",
                (p.id, &p.name, &p.category, p.price),
            )?;
        }
        for o in &self.orders {
            conn.execute(
                "INSERT INTO orders VALUES (?1, ?2, ?3, ?4, ?5)",
                (o.id, o.customer_id, o.product_id, o.quantity, o.month),
            )?;
        }
        Ok(())
    }
}

/// A uniform count in `lo..=hi`.
fn rng_range(rng: &mut SeededRng, lo: usize, hi: usize) -> usize {
    rng.range(lo as i64, hi as i64) as usize
}

/// One element of a non-empty slice.
fn pick_one<'a>(rng: &mut SeededRng, items: &'a [&'a str]) -> &'a str {
    rng.choose(items).copied().unwrap_or_default()
}

/// `k` distinct indices below `n`, in drawing order (partial Fisher-Yates).
fn pick(rng: &mut SeededRng, n: usize, k: usize) -> Vec<usize> {
    let mut all: Vec<usize> = (0..n).collect();
    for i in 0..k.min(n) {
        let j = rng_range(rng, i, n - 1);
        all.swap(i, j);
    }
    all.truncate(k.min(n));
    all
}
