//! `negotiation` tasks: seeded item counts, private per-seat values (each worth 10 in all, with
//! a split worth at least 6 to both) and the opening seat; the split rule and reading a task back.

use agentrl_core::{Error, Result, SeededRng, Split, Task};
use serde_json::{Value, json};

use super::NEGOTIATION_ID;
use super::deal::{Deal, Seat, Split3, TOTAL_VALUE};
use crate::session::split_of_text;

/// Proposals allowed per negotiation.
pub const MAX_PROPOSALS: u32 = 8;

/// Per-unit values for `counts` summing to [`TOTAL_VALUE`], drawn from `rng` (`None` when
/// the draw does not add up).
fn values(rng: &mut SeededRng, counts: &Split3) -> Option<Split3> {
    let a = rng.range(0, i64::from(TOTAL_VALUE / counts[0])) as u32;
    let left = TOTAL_VALUE - a * counts[0];
    let b = rng.range(0, i64::from(left / counts[1])) as u32;
    let left = left - b * counts[1];
    left.is_multiple_of(counts[2])
        .then_some([a, b, left / counts[2]])
}

/// The task data of `deal`.
fn data(deal: &Deal) -> Value {
    json!({
        "counts": deal.counts,
        "values": { "alice": deal.values[0], "bob": deal.values[1] },
        "first": deal.first.name(),
        "max_proposals": deal.max_proposals,
    })
}

/// Deal `index` of `split` for generator `seed`: candidates drawn from
/// `SeededRng::from_parts(&[seed, split, index, attempt])` until one has a split worth at
/// least 6 to both seats and falls in `split`.
pub fn generate(seed: u64, split: Split, index: u64) -> Deal {
    let mut attempt: u64 = 0;
    loop {
        attempt = attempt.wrapping_add(1);
        let mut rng = SeededRng::from_parts(&[seed, split as u64, index, attempt]);
        let counts = [0; 3].map(|_| rng.range(1, 4) as u32);
        let (Some(a), Some(b)) = (values(&mut rng, &counts), values(&mut rng, &counts)) else {
            continue;
        };
        let first = if rng.chance(0.5) {
            Seat::Alice
        } else {
            Seat::Bob
        };
        let deal = Deal {
            counts,
            values: [a, b],
            first,
            max_proposals: MAX_PROPOSALS,
        };
        let fair = deal
            .splits()
            .iter()
            .any(|k| deal.value(Seat::Alice, k) >= 6 && deal.value(Seat::Bob, &deal.rest(k)) >= 6);
        if fair && a != b && split_of_text(&data(&deal).to_string()) == split {
            return deal;
        }
    }
}

/// The task for `deal`, with id `{split}-{index}`.
pub fn to_task(deal: &Deal, split: Split, index: u64) -> Task {
    Task {
        env_id: NEGOTIATION_ID.to_string(),
        id: format!("{split}-{index}"),
        split,
        data: data(deal),
    }
}

/// Three numbers from 0 to 10 at `key` of `value` (larger counts would make the split
/// search needlessly slow, and values are at most 10 anyway).
fn triple(value: &Value, key: &str) -> Option<Split3> {
    let list = value.get(key)?.as_array()?;
    let nums: Option<Vec<u32>> = list
        .iter()
        .map(|v| v.as_u64().and_then(|n| u32::try_from(n).ok()))
        .collect();
    let nums = nums?;
    (nums.len() == 3 && nums.iter().all(|&n| n <= TOTAL_VALUE)).then(|| [nums[0], nums[1], nums[2]])
}

/// The deal of a task made by [`to_task`]; an error when the data is not such a deal.
pub fn deal_of(task: &Task) -> Result<Deal> {
    let bad = |why: &str| Error::env(NEGOTIATION_ID, format!("task `{}`: {why}", task.id));
    if task.env_id != NEGOTIATION_ID {
        return Err(bad(&format!("belongs to env `{}`", task.env_id)));
    }
    let counts = triple(&task.data, "counts")
        .ok_or_else(|| bad("`counts` must be 3 counts from 0 to 10"))?;
    let values = task.data.get("values").ok_or_else(|| bad("no `values`"))?;
    let alice = triple(values, "alice").ok_or_else(|| bad("`values.alice` must be 3 values"))?;
    let bob = triple(values, "bob").ok_or_else(|| bad("`values.bob` must be 3 values"))?;
    let first = task
        .data
        .get("first")
        .and_then(Value::as_str)
        .and_then(Seat::parse);
    let first = first.ok_or_else(|| bad("`first` must be alice or bob"))?;
    let max_proposals = task.data.get("max_proposals").and_then(Value::as_u64);
    let max_proposals = max_proposals
        .and_then(|n| u32::try_from(n).ok())
        .filter(|n| (1..=50).contains(n))
        .ok_or_else(|| bad("`max_proposals` must be 1..=50"))?;
    let deal = Deal {
        counts,
        values: [alice, bob],
        first,
        max_proposals,
    };
    for seat in Seat::BOTH {
        if deal.value(seat, &counts) != TOTAL_VALUE {
            return Err(bad(&format!(
                "{}'s values do not add up to {TOTAL_VALUE}",
                seat.name()
            )));
        }
    }
    Ok(deal)
}
