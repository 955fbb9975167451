//! Cutting rows of different lengths into padded batches: the search both the learner's
//! micro-batches and the policy engine's prefill passes use.

use std::ops::Range;

/// The runs (index ranges, in order) that ascending `lengths` are cut into, each run becoming
/// one padded batch (rows × its longest row): the cut with the fewest padded tokens plus
/// `run_cost` tokens per run, with at most `max_rows` rows (0: no limit) and at most
/// `max_padded_tokens` padded tokens in each (a longer row gets a run of its own). A
/// shortest-path search over the cut points, `O(n²)` for `n` rows.
///
/// ```
/// use agentrl_core::packing::length_runs;
///
/// // Three short rows and two long ones: two batches.
/// assert_eq!(length_runs(&[3, 4, 5, 50, 60], 0, 1_000, 64), [0..3, 3..5]);
/// ```
pub fn length_runs(
    lengths: &[usize],
    max_rows: usize,
    max_padded_tokens: usize,
    run_cost: usize,
) -> Vec<Range<usize>> {
    let n = lengths.len();
    // cost[j]: the cheapest packing of the first j rows; cut[j]: where its last run starts.
    let mut cost = vec![usize::MAX; n + 1];
    let mut cut = vec![0; n + 1];
    cost[0] = 0;
    for end in 1..=n {
        let longest = lengths[end - 1];
        for start in (0..end).rev() {
            let rows = end - start;
            let padded = rows * longest;
            if rows > 1 && ((max_rows != 0 && rows > max_rows) || padded > max_padded_tokens) {
                break;
            }
            let total = cost[start].saturating_add(padded).saturating_add(run_cost);
            if total < cost[end] {
                cost[end] = total;
                cut[end] = start;
            }
        }
    }
    let mut runs = Vec::new();
    let mut end = n;
    while end > 0 {
        runs.push(cut[end]..end);
        end = cut[end];
    }
    runs.reverse();
    runs
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::SeededRng;

    const RUN_COST: usize = 64;

    /// The cost [`length_runs`] minimises, of the runs ending at `ends`.
    fn packing_cost(lengths: &[usize], ends: &[usize]) -> usize {
        let mut start = 0;
        ends.iter()
            .map(|&end| {
                let cost = (end - start) * lengths[end - 1] + RUN_COST;
                start = end;
                cost
            })
            .sum()
    }

    #[test]
    fn length_runs_are_the_cheapest_cut_within_the_limits() {
        // Every way to cut ten sorted lengths (2^9), checked against the search's answer.
        let mut rng = SeededRng::new(7);
        for _ in 0..40 {
            let mut lengths: Vec<usize> = (0..10).map(|_| rng.range(1, 300) as usize).collect();
            lengths.sort();
            let (max_rows, budget) = (4, 900);
            let found: Vec<usize> = length_runs(&lengths, max_rows, budget, RUN_COST)
                .into_iter()
                .map(|run| run.end)
                .collect();
            let fits = |ends: &[usize]| {
                let mut start = 0;
                ends.iter().all(|&end| {
                    let rows = end - start;
                    let ok = rows == 1 || (rows <= max_rows && rows * lengths[end - 1] <= budget);
                    start = end;
                    ok
                })
            };
            assert_eq!(found.last(), Some(&lengths.len()));
            assert!(fits(&found), "{lengths:?} cut at {found:?}");
            let best = (0u32..1 << 9)
                .map(|cuts| {
                    let mut ends: Vec<usize> =
                        (1..10).filter(|i| cuts >> (i - 1) & 1 == 1).collect();
                    ends.push(10);
                    ends
                })
                .filter(|ends| fits(ends))
                .map(|ends| packing_cost(&lengths, &ends))
                .min();
            assert_eq!(Some(packing_cost(&lengths, &found)), best, "{lengths:?}");
        }
    }

    #[test]
    fn no_rows_no_runs_and_equal_rows_stay_together() {
        assert!(length_runs(&[], 0, 100, RUN_COST).is_empty());
        assert_eq!(length_runs(&[7; 12], 0, 1_000, RUN_COST), vec![0..12]);
        // A run cost of zero never pays for padding.
        assert_eq!(length_runs(&[1, 2, 3], 0, 1_000, 0), [0..1, 1..2, 2..3]);
    }
}
