//! Shop tasks: seeded generation with the split rule, and reading a shop back from a task.

use agentrl_core::{Error, Result, Split, Task};
use serde_json::json;

use super::WEB_SHOP_ID;
use super::catalog::Shop;
use crate::session::{draw_in_split, split_of_text};

/// The split a shop belongs to: test iff the stable hash of its JSON is divisible by 5.
pub fn split_of(shop: &Shop) -> Split {
    split_of_text(&serde_json::to_string(shop).unwrap_or_default())
}

/// Shop `index` of `split` for generator `seed`: candidates drawn from
/// `SeededRng::from_parts(&[seed, split, index, attempt])` until one falls in `split`.
pub fn generate(seed: u64, split: Split, index: u64) -> Shop {
    draw_in_split(seed, split, index, |rng| {
        Some(Shop::random(rng)).filter(|shop| split_of(shop) == split)
    })
}

/// The task for `shop`, with id `{split}-{index}`, the shop and its instruction as data.
pub fn to_task(shop: &Shop, split: Split, index: u64) -> Task {
    Task {
        env_id: WEB_SHOP_ID.to_string(),
        id: format!("{split}-{index}"),
        split,
        data: json!({ "instruction": shop.wish.instruction(), "shop": shop }),
    }
}

/// The shop of a task made by `to_task`; an error unless it parses.
pub fn shop_of(task: &Task) -> Result<Shop> {
    let bad = |why: String| Error::env(WEB_SHOP_ID, format!("task `{}`: {why}", task.id));
    if task.env_id != WEB_SHOP_ID {
        return Err(bad(format!("belongs to env `{}`", task.env_id)));
    }
    let data = task.data.get("shop").cloned().unwrap_or_default();
    serde_json::from_value(data).map_err(|e| bad(format!("bad `shop`: {e}")))
}
