//! The shop of one task: a seeded catalogue with one product that meets the instruction and
//! distractors that miss an attribute, an option or the price limit; and the WebShop-style
//! score of a purchase.

use agentrl_core::SeededRng;
use serde::{Deserialize, Serialize};

/// Product categories.
pub const CATEGORIES: [&str; 6] = [
    "t-shirt", "hoodie", "sneakers", "backpack", "jacket", "dress",
];

/// Attributes a product may have (and an instruction may ask for).
pub const ATTRIBUTES: [&str; 10] = [
    "organic",
    "waterproof",
    "slim-fit",
    "lightweight",
    "wool",
    "cotton",
    "leather",
    "vegan",
    "recycled",
    "breathable",
];

/// Sizes.
pub const SIZES: [&str; 5] = ["XS", "S", "M", "L", "XL"];

/// Colours.
pub const COLOURS: [&str; 7] = ["black", "white", "navy", "red", "green", "grey", "beige"];

/// Brands, for product titles.
const BRANDS: [&str; 6] = ["Northwind", "Alpaca", "Birch", "Cobalt", "Dune", "Ember"];

/// A product for sale.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Product {
    /// Id used in its URL (e.g. `p4821`).
    pub id: String,
    /// Title shown in results and on its page.
    pub title: String,
    /// Category.
    pub category: String,
    /// Attributes.
    pub attributes: Vec<String>,
    /// Price in whole dollars.
    pub price: u32,
    /// Sizes offered.
    pub sizes: Vec<String>,
    /// Colours offered.
    pub colours: Vec<String>,
}

/// What the instruction asks for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Wish {
    /// Category.
    pub category: String,
    /// Attributes the product must have.
    pub attributes: Vec<String>,
    /// Size to choose.
    pub size: String,
    /// Colour to choose.
    pub colour: String,
    /// Highest acceptable price in dollars.
    pub max_price: u32,
}

impl Wish {
    /// The instruction text.
    pub fn instruction(&self) -> String {
        format!(
            "i am looking for a {} that is {}, in colour {} and size {}, price at most {} dollars",
            self.category,
            self.attributes.join(" and "),
            self.colour,
            self.size,
            self.max_price
        )
    }
}

/// One task's shop: the catalogue (in listing order) and the wish.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Shop {
    /// Products in listing order.
    pub products: Vec<Product>,
    /// The instruction's request.
    pub wish: Wish,
}

/// A purchase: product and chosen options.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Purchase {
    /// Product id.
    pub product: String,
    /// Chosen size.
    pub size: String,
    /// Chosen colour.
    pub colour: String,
}

/// Picks one of `items` as an owned string.
fn pick(rng: &mut SeededRng, items: &[&str]) -> String {
    rng.choose(items).copied().unwrap_or_default().to_string()
}

/// `count` distinct items of `items`, none in `except`.
fn some(rng: &mut SeededRng, items: &[&str], count: usize, except: &[String]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let pool: Vec<&str> = items
        .iter()
        .copied()
        .filter(|i| !except.iter().any(|e| e == i))
        .collect();
    while out.len() < count.min(pool.len()) {
        let item = pick(rng, &pool);
        if !out.contains(&item) {
            out.push(item);
        }
    }
    out
}

impl Shop {
    /// A random shop in which exactly one product meets the wish.
    pub fn random(rng: &mut SeededRng) -> Shop {
        loop {
            let shop = Self::candidate(rng);
            if shop
                .products
                .iter()
                .filter(|p| shop.score(p, &shop.wish.size, &shop.wish.colour) >= 1.0)
                .count()
                == 1
            {
                return shop;
            }
        }
    }

    /// A random shop that may have no or several matching products.
    fn candidate(rng: &mut SeededRng) -> Shop {
        let wish = Wish {
            category: pick(rng, &CATEGORIES),
            attributes: some(rng, &ATTRIBUTES, 2, &[]),
            size: pick(rng, &SIZES),
            colour: pick(rng, &COLOURS),
            max_price: 10 * rng.range(3, 9) as u32,
        };
        let mut products = Vec::new();
        let cheap = |rng: &mut SeededRng| {
            rng.range(i64::from(wish.max_price) / 3, i64::from(wish.max_price)) as u32
        };
        // The target, then distractors that each miss something.
        let kinds = [0, 1, 1, 2, 2, 3, 3, 3, 4, 4, 4, 5, 5, 5, 5];
        for kind in kinds {
            let mut category = wish.category.clone();
            let mut attributes = wish.attributes.clone();
            let mut price = cheap(rng);
            let count = rng.range(2, 4) as usize;
            let mut sizes = some(rng, &SIZES, count, std::slice::from_ref(&wish.size));
            sizes.push(wish.size.clone());
            let count = rng.range(1, 3) as usize;
            let mut colours = some(rng, &COLOURS, count, std::slice::from_ref(&wish.colour));
            colours.push(wish.colour.clone());
            match kind {
                1 => price = wish.max_price + 5 * rng.range(1, 8) as u32,
                2 if rng.chance(0.5) => colours.retain(|c| *c != wish.colour),
                2 => sizes.retain(|s| *s != wish.size),
                3 => {
                    let slot = rng.range(0, 1) as usize;
                    attributes[slot] = some(rng, &ATTRIBUTES, 1, &wish.attributes).concat();
                }
                4 => {
                    category =
                        some(rng, &CATEGORIES, 1, std::slice::from_ref(&wish.category)).concat()
                }
                5 => {
                    category = pick(rng, &CATEGORIES);
                    attributes = some(rng, &ATTRIBUTES, 2, &[]);
                    price = rng.range(10, 120) as u32;
                }
                _ => {}
            }
            if rng.chance(0.3) {
                let extra = some(rng, &ATTRIBUTES, 1, &attributes);
                attributes.extend(extra);
            }
            let order = |all: &[&str], chosen: &[String]| -> Vec<String> {
                all.iter()
                    .filter(|x| chosen.iter().any(|c| c == *x))
                    .map(|x| x.to_string())
                    .collect()
            };
            let title_words: Vec<String> = attributes.iter().map(|a| capitalise(a)).collect();
            products.push(Product {
                id: format!("p{}", rng.range(1000, 9999)),
                title: format!(
                    "{} {} {}",
                    pick(rng, &BRANDS),
                    title_words.join(" "),
                    capitalise(&category)
                ),
                category,
                attributes,
                price,
                sizes: order(&SIZES, &sizes),
                colours: order(&COLOURS, &colours),
            });
        }
        // Shuffle the listing order.
        for i in (1..products.len()).rev() {
            let j = rng.range(0, i as i64) as usize;
            products.swap(i, j);
        }
        let distinct = |key: fn(&Product) -> &str| {
            let mut keys: Vec<&str> = products.iter().map(key).collect();
            keys.sort_unstable();
            keys.dedup();
            keys.len() == products.len()
        };
        if !distinct(|p| &p.id) || !distinct(|p| &p.title) {
            products.clear(); // rejected by `random`
        }
        Shop { products, wish }
    }

    /// The product with `id`.
    pub fn product(&self, id: &str) -> Option<&Product> {
        self.products.iter().find(|p| p.id == id)
    }

    /// WebShop-style reward of buying `product` in `size` and `colour`: the share of the
    /// requested category, attributes and options matched, times 1 if the price is within the
    /// limit (0 otherwise).
    pub fn score(&self, product: &Product, size: &str, colour: &str) -> f64 {
        let w = &self.wish;
        let offered =
            product.sizes.iter().any(|s| s == size) && product.colours.iter().any(|c| c == colour);
        let matched = usize::from(product.category == w.category)
            + w.attributes
                .iter()
                .filter(|a| product.attributes.contains(a))
                .count()
            + usize::from(offered && size == w.size)
            + usize::from(offered && colour == w.colour);
        let total = 1 + w.attributes.len() + 2;
        let price_ok = if product.price <= w.max_price {
            1.0
        } else {
            0.0
        };
        matched as f64 / total as f64 * price_ok
    }
}

/// `word` with its first letter in upper case.
fn capitalise(word: &str) -> String {
    let mut chars = word.chars();
    match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}
