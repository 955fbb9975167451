//! `web-shop`: a WebShop-like shop site served on 127.0.0.1 (search, result pages, product
//! pages with size and colour, buy), driven through the `browser` tool; the reward is the share
//! of requested attributes and options the purchase matches, times a price condition.

mod catalog;
mod demonstrator;
mod env;
mod site;
mod task;

use agentrl_core::{Env, Message, Result, Split, Task, ToolCall};
use serde_json::{Value, json};

pub use catalog::{ATTRIBUTES, CATEGORIES, COLOURS, Product, Purchase, SIZES, Shop, Wish};
pub use demonstrator::{SHOP_DEMONSTRATOR_KNOBS, shop_demonstrator};
pub use env::{WebShopEnv, reward};
pub use site::{PAGE_SIZE, Store};
pub use task::{generate, shop_of, split_of};

use crate::demonstrator::{DemonstratorKnobs, KnobDoc};
use crate::factory::{EnvFactory, Solver};
use crate::transcript::exchanges;
use crate::wrappers::TurnLimit;

/// Registry id of the env.
pub const WEB_SHOP_ID: &str = "web-shop";

/// Steps allowed per episode.
pub const WEB_SHOP_MAX_TURNS: usize = 30;

/// The `web-shop` factory; `seed` selects the task set (default `0`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WebShop {
    /// Seed of the task generator.
    pub seed: u64,
}

impl WebShop {
    /// The factory for the task set of `seed`.
    pub fn new(seed: u64) -> Self {
        WebShop { seed }
    }
}

impl EnvFactory for WebShop {
    fn id(&self) -> &str {
        WEB_SHOP_ID
    }

    fn description(&self) -> &str {
        "find and buy the product an instruction describes on a local shop site with a text browser"
    }

    fn task(&self, split: Split, index: u64) -> Task {
        task::to_task(&generate(self.seed, split, index), split, index)
    }

    fn make(&self) -> Box<dyn Env> {
        Box::new(TurnLimit::new(WebShopEnv::new(), WEB_SHOP_MAX_TURNS))
    }

    fn max_turns(&self) -> usize {
        WEB_SHOP_MAX_TURNS
    }

    /// The expert is deterministic, so `seed` is not used.
    fn solver(&self, _seed: u64) -> Box<dyn Solver> {
        Box::new(ShopExpert)
    }

    fn demonstrator_knobs(&self) -> &[KnobDoc] {
        SHOP_DEMONSTRATOR_KNOBS
    }

    /// See [`shop_demonstrator`].
    fn demonstrator(&self, knobs: &DemonstratorKnobs, seed: u64) -> Result<Box<dyn Solver>> {
        Ok(Box::new(shop_demonstrator(seed, knobs)?))
    }
}

/// The reference solver, which browses like a careful shopper: it searches for the wanted
/// category and attributes, opens results whose title and price fit (not seen before), reads
/// the product page, buys with the wanted options when they are offered, else goes back, and
/// moves to the next result page when this one has no candidate left.
#[derive(Debug, Clone, Copy, Default)]
pub struct ShopExpert;

/// A `browser` call.
fn browse(history: &[Message], args: Value) -> Message {
    let id = format!("call_{}", history.len());
    Message::assistant_tool_calls(None, vec![ToolCall::new(id, "browser", &args)])
}

/// The value after `prefix` on the line of `page` that starts with it.
fn line_value<'a>(page: &'a str, prefix: &str) -> Option<&'a str> {
    page.lines().find_map(|l| l.trim().strip_prefix(prefix))
}

/// Whether `title` names the wanted category and attributes.
fn title_fits(title: &str, wish: &Wish) -> bool {
    let lower = title.to_lowercase();
    let words: Vec<&str> = lower.split_whitespace().collect();
    words.contains(&wish.category.as_str())
        && wish.attributes.iter().all(|a| words.contains(&a.as_str()))
}

/// The options of field `name` in a page's form listing (`  size = "M" (options: S | M)`).
fn options<'a>(page: &'a str, name: &str) -> Vec<&'a str> {
    let prefix = format!("{name} = ");
    line_value(page, &prefix)
        .and_then(|rest| rest.split_once("(options: "))
        .map(|(_, list)| list.trim_end_matches(')').split(" | ").collect())
        .unwrap_or_default()
}

/// The next action on the results page `page`, skipping products whose titles are in `seen`.
fn on_results(history: &[Message], page: &str, wish: &Wish, seen: &[&str]) -> Message {
    let mut next = None;
    for line in page.lines() {
        let Some((number, rest)) = line
            .split_once("] ")
            .and_then(|(n, r)| Some((n.split_once('[')?.1.parse::<u64>().ok()?, r)))
        else {
            continue;
        };
        if rest.starts_with("Next page") {
            next = Some(number);
        }
        let Some((title, price)) = rest.rsplit_once(" | $") else {
            continue;
        };
        let price: u32 = price.trim().parse().unwrap_or(u32::MAX);
        if price <= wish.max_price && title_fits(title, wish) && !seen.contains(&title.trim()) {
            return browse(history, json!({"action": "click", "link": number}));
        }
    }
    match next {
        Some(number) => browse(history, json!({"action": "click", "link": number})),
        None => Message::assistant("No product in this shop fits the instruction."),
    }
}

impl Solver for ShopExpert {
    fn act(&mut self, task: &Task, history: &[Message]) -> Message {
        next_action(task, history, false)
    }
}

/// The next action of the scripted shoppers on `task` after `history`. With `settle`, it buys
/// the first product it opens (see [`shop_demonstrator`]) instead of going back when the page
/// does not offer the wanted size or colour.
fn next_action(task: &Task, history: &[Message], settle: bool) -> Message {
    let shop = match shop_of(task) {
        Ok(s) => s,
        Err(e) => return Message::assistant(format!("I cannot read this task: {e}")),
    };
    let wish = &shop.wish;
    let calls = exchanges(history, "browser");
    let pages: Vec<&str> = calls
        .iter()
        .filter_map(|x| x.answer)
        .filter(|a| a.starts_with("URL: "))
        .collect();
    let Some(page) = pages.last() else {
        let statement = history.first().map(Message::text).unwrap_or("");
        let url = statement
            .split_once("Shop at ")
            .and_then(|(_, r)| r.split_whitespace().next())
            .unwrap_or("");
        return browse(history, json!({"action": "open", "url": url}));
    };
    let title = line_value(page, "Title: ").unwrap_or("");
    if title == "Web Shop" {
        let query = format!("{} {}", wish.attributes.join(" "), wish.category);
        return browse(
            history,
            json!({"action": "submit", "form": 1, "fields": {"q": query}}),
        );
    }
    if title.starts_with("Results for ") {
        let seen: Vec<&str> = pages
            .iter()
            .filter(|p| p.contains("(POST /buy)"))
            .filter_map(|p| line_value(p, "Title: "))
            .collect();
        return on_results(history, page, wish, &seen);
    }
    let price: u32 = line_value(page, "Price: $")
        .and_then(|p| p.parse().ok())
        .unwrap_or(u32::MAX);
    let category = line_value(page, "Category: ").unwrap_or("");
    let features: Vec<&str> = line_value(page, "Features: ")
        .unwrap_or("")
        .split(", ")
        .collect();
    let (sizes, colours) = (options(page, "size"), options(page, "colour"));
    let fits = price <= wish.max_price
        && category == wish.category
        && wish
            .attributes
            .iter()
            .all(|a| features.contains(&a.as_str()))
        && sizes.contains(&wish.size.as_str())
        && colours.contains(&wish.colour.as_str());
    // The wanted option where it is offered, else (when settling) the first one offered.
    let pick = |offered: &[&str], wanted: &str| {
        let wanted = offered.contains(&wanted).then_some(wanted);
        wanted.or(offered.first().copied()).map(str::to_string)
    };
    if fits || settle {
        let chosen = (pick(&sizes, &wish.size), pick(&colours, &wish.colour));
        if let (Some(size), Some(colour)) = chosen {
            let fields = json!({"size": size, "colour": colour});
            return browse(
                history,
                json!({"action": "submit", "form": 1, "fields": fields}),
            );
        }
    }
    browse(history, json!({"action": "back"}))
}
