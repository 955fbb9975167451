//! `sql-analysis` questions: filters, aggregations and joins over a [`Shop`], each with a
//! ground truth computed directly from the rows (no SQL), the reference SQL the solver runs,
//! and the checker for the agent's final answer.

use std::collections::BTreeMap;

use agentrl_core::SeededRng;
use serde::{Deserialize, Serialize};

use super::data::Shop;
use crate::answer::last_number;

/// How far a numeric answer may be from the exact value (answers are asked to 2 decimals).
pub const TOLERANCE: f64 = 0.005 + 1e-9;

/// What a question asks, with its parameters.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Question {
    /// Orders placed in months `from..=to`.
    OrdersInMonths {
        /// First month.
        from: i64,
        /// Last month.
        to: i64,
    },
    /// Total quantity ordered of one product.
    QuantityOfProduct {
        /// Product name.
        product: String,
    },
    /// Total revenue (quantity x price) of orders by customers of one city.
    RevenueOfCity {
        /// City name.
        city: String,
    },
    /// Average price of the products of one category.
    AveragePrice {
        /// Category name.
        category: String,
    },
    /// Number of different customers who ordered from one category.
    CustomersOfCategory {
        /// Category name.
        category: String,
    },
    /// The customer with the highest total spend (a name).
    TopSpender,
    /// The city whose customers placed the most orders (a name).
    BusiestCity,
}

/// The ground truth: a number, or a name out of a set of candidates.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Truth {
    /// An exact value.
    Number(f64),
    /// The right name and every name the answer must not mention instead.
    Name {
        /// The right name.
        name: String,
        /// All names of that kind in the database.
        candidates: Vec<String>,
    },
}

impl Question {
    /// A random question about `shop`; `None` when the drawn one has no unique answer.
    pub fn random(rng: &mut SeededRng, shop: &Shop) -> Option<Self> {
        let product = rng.choose(&shop.products)?.clone();
        let customer = rng.choose(&shop.customers)?.clone();
        Some(match rng.range(0, 6) {
            0 => {
                let from = rng.range(1, 10);
                Question::OrdersInMonths {
                    from,
                    to: rng.range(from + 1, 12),
                }
            }
            1 => Question::QuantityOfProduct {
                product: product.name,
            },
            2 => Question::RevenueOfCity {
                city: customer.city,
            },
            3 => Question::AveragePrice {
                category: product.category,
            },
            4 => Question::CustomersOfCategory {
                category: product.category,
            },
            5 => Question::TopSpender,
            _ => Question::BusiestCity,
        })
    }

    /// The question in words.
    pub fn text(&self) -> String {
        match self {
            Question::OrdersInMonths { from, to } => {
                format!("How many orders were placed in months {from} to {to} (inclusive)?")
            }
            Question::QuantityOfProduct { product } => {
                format!("What is the total quantity ordered of the product '{product}'?")
            }
            Question::RevenueOfCity { city } => format!(
                "What is the total revenue (quantity times product price) of all orders by \
                 customers from {city}?"
            ),
            Question::AveragePrice { category } => format!(
                "What is the average price of the products in the category '{category}', \
                 rounded to 2 decimals?"
            ),
            Question::CustomersOfCategory { category } => format!(
                "How many different customers ordered at least one product in the category \
                 '{category}'?"
            ),
            Question::TopSpender => "Which customer spent the most in total (quantity times \
                                     product price)? Give the name."
                .to_string(),
            Question::BusiestCity => {
                "Customers of which city placed the most orders? Give the city.".to_string()
            }
        }
    }

    /// The answer computed from the rows; `None` when a name question has a tie.
    pub fn truth(&self, shop: &Shop) -> Option<Truth> {
        let revenue =
            |o: &super::data::Order| o.quantity * shop.product(o.product_id).map_or(0, |p| p.price);
        let city_of = |id: i64| {
            shop.customer(id)
                .map(|c| c.city.clone())
                .unwrap_or_default()
        };
        let category_of = |id: i64| {
            shop.product(id)
                .map(|p| p.category.clone())
                .unwrap_or_default()
        };
        let number = |n: i64| Some(Truth::Number(n as f64));
        match self {
            Question::OrdersInMonths { from, to } => number(
                shop.orders
                    .iter()
                    .filter(|o| (*from..=*to).contains(&o.month))
                    .count() as i64,
            ),
            Question::QuantityOfProduct { product } => number(
                shop.orders
                    .iter()
                    .filter(|o| {
                        shop.product(o.product_id)
                            .is_some_and(|p| &p.name == product)
                    })
                    .map(|o| o.quantity)
                    .sum(),
            ),
            Question::RevenueOfCity { city } => number(
                shop.orders
                    .iter()
                    .filter(|o| &city_of(o.customer_id) == city)
                    .map(revenue)
                    .sum(),
            ),
            Question::AveragePrice { category } => {
                let prices: Vec<i64> = shop
                    .products
                    .iter()
                    .filter(|p| &p.category == category)
                    .map(|p| p.price)
                    .collect();
                let sum: i64 = prices.iter().sum();
                (!prices.is_empty()).then(|| Truth::Number(sum as f64 / prices.len() as f64))
            }
            Question::CustomersOfCategory { category } => {
                let mut ids: Vec<i64> = shop
                    .orders
                    .iter()
                    .filter(|o| &category_of(o.product_id) == category)
                    .map(|o| o.customer_id)
                    .collect();
                ids.sort_unstable();
                ids.dedup();
                number(ids.len() as i64)
            }
            Question::TopSpender => {
                let mut spend: BTreeMap<String, i64> = BTreeMap::new();
                for o in &shop.orders {
                    let name = shop.customer(o.customer_id).map(|c| c.name.clone());
                    *spend.entry(name.unwrap_or_default()).or_default() += revenue(o);
                }
                let names = shop.customers.iter().map(|c| c.name.clone()).collect();
                unique_max(spend, names)
            }
            Question::BusiestCity => {
                let mut count: BTreeMap<String, i64> = BTreeMap::new();
                for o in &shop.orders {
                    *count.entry(city_of(o.customer_id)).or_default() += 1;
                }
                let mut cities: Vec<String> =
                    shop.customers.iter().map(|c| c.city.clone()).collect();
                cities.sort();
                cities.dedup();
                unique_max(count, cities)
            }
        }
    }

    /// The SQL the reference solver runs: one row, one column, the answer.
    pub fn reference_sql(&self) -> String {
        let revenue = "SUM(o.quantity * p.price)";
        match self {
            Question::OrdersInMonths { from, to } => {
                format!("SELECT COUNT(*) FROM orders WHERE month BETWEEN {from} AND {to}")
            }
            Question::QuantityOfProduct { product } => format!(
                "SELECT COALESCE(SUM(o.quantity), 0) FROM orders o JOIN products p ON \
                 p.id = o.product_id WHERE p.name = '{product}'"
            ),
            Question::RevenueOfCity { city } => format!(
                "SELECT COALESCE({revenue}, 0) FROM orders o JOIN products p ON p.id = \
                 o.product_id JOIN customers c ON c.id = o.customer_id WHERE c.city = '{city}'"
            ),
            Question::AveragePrice { category } => {
                format!("SELECT ROUND(AVG(price), 2) FROM products WHERE category = '{category}'")
            }
            Question::CustomersOfCategory { category } => format!(
                "SELECT COUNT(DISTINCT o.customer_id) FROM orders o JOIN products p ON p.id = \
                 o.product_id WHERE p.category = '{category}'"
            ),
            Question::TopSpender => format!(
                "SELECT c.name FROM orders o JOIN products p ON p.id = o.product_id JOIN \
                 customers c ON c.id = o.customer_id GROUP BY c.id ORDER BY {revenue} DESC LIMIT 1"
            ),
            Question::BusiestCity => "SELECT c.city FROM orders o JOIN customers c ON c.id = \
                                      o.customer_id GROUP BY c.city ORDER BY COUNT(*) DESC LIMIT 1"
                .to_string(),
        }
    }
}

/// The key with the largest value, unless several share it.
fn unique_max(values: BTreeMap<String, i64>, candidates: Vec<String>) -> Option<Truth> {
    let best = *values.values().max()?;
    let mut top = values.into_iter().filter(|(_, v)| *v == best);
    let (name, _) = top.next()?;
    top.next()
        .is_none()
        .then_some(Truth::Name { name, candidates })
}

/// Whether the final answer `text` gives `truth`: for a number, the last number in the text
/// is within [`TOLERANCE`]; for a name, the text names it (as a whole word, any case) and no
/// other candidate.
pub fn check(truth: &Truth, text: &str) -> bool {
    match truth {
        Truth::Number(expected) => last_number(&without_thousands_commas(text))
            .and_then(|n| n.parse::<f64>().ok())
            .is_some_and(|n| (n - expected).abs() <= TOLERANCE),
        Truth::Name { name, candidates } => {
            let words: Vec<String> = text
                .split(|c: char| !c.is_alphanumeric())
                .filter(|w| !w.is_empty())
                .map(str::to_lowercase)
                .collect();
            let said = |n: &str| words.iter().any(|w| *w == n.to_lowercase());
            said(name) && candidates.iter().filter(|c| *c != name).all(|c| !said(c))
        }
    }
}

/// `text` with commas that separate groups of three digits removed (`1,234.5` -> `1234.5`).
fn without_thousands_commas(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let digit = |i: usize| chars.get(i).is_some_and(char::is_ascii_digit);
    chars
        .iter()
        .enumerate()
        .filter(|&(i, c)| {
            let grouping = *c == ','
                && i > 0
                && digit(i - 1)
                && (1..=3).all(|k| digit(i + k))
                && !digit(i + 4);
            !grouping
        })
        .map(|(_, c)| *c)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checks_numbers_and_names() {
        assert!(check(&Truth::Number(23.665), "about 23.67"));
        assert!(check(&Truth::Number(23.665), "23.66"));
        assert!(!check(&Truth::Number(23.665), "23.68"));
        assert!(check(&Truth::Number(42.0), "The answer is 42."));
        assert!(!check(&Truth::Number(42.0), "42 or 43"));
        assert!(check(&Truth::Number(1234.0), "1,234"));
        assert!(check(&Truth::Number(1234567.0), "It is 1,234,567."));
        assert!(!check(&Truth::Number(1234.0), "1,2345"));
        assert!(check(&Truth::Number(5.0), "3, 4, 5"));
        let truth = Truth::Name {
            name: "Oslo".into(),
            candidates: vec!["Oslo".into(), "Cork".into()],
        };
        assert!(check(&truth, "oslo"));
        assert!(check(&truth, "The city is Oslo."));
        assert!(!check(&truth, "Oslo or Cork"));
        assert!(!check(&truth, "Osloville"));
    }
}
