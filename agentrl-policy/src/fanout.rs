//! Sends each request of a batch to the backend chosen for it, all backends at once, and puts
//! the answers back in request order (shared by the router and cross-policy sampling).

use std::sync::Arc;

use agentrl_core::{Error, Generation, GenerationRequest, Policy, Result};
use tokio::task::JoinSet;

/// Calls `backends[choice[i]]` with `requests[i]`, grouped per backend, concurrently; the
/// answer keeps the order of `requests`. `done(backend, rows)` runs when a backend's call ends
/// (also on error), e.g. to release outstanding-request counts.
pub(crate) async fn fan_out(
    backends: &[Arc<dyn Policy>],
    choice: &[usize],
    requests: Vec<GenerationRequest>,
    done: Arc<dyn Fn(usize, usize) + Send + Sync>,
) -> Result<Vec<Generation>> {
    let n = requests.len();
    let mut groups: Vec<(Vec<usize>, Vec<GenerationRequest>)> = (0..backends.len())
        .map(|_| (Vec::new(), Vec::new()))
        .collect();
    for (i, (request, &b)) in requests.into_iter().zip(choice).enumerate() {
        groups[b].0.push(i);
        groups[b].1.push(request);
    }
    let mut set = JoinSet::new();
    for (b, (positions, batch)) in groups.into_iter().enumerate() {
        if batch.is_empty() {
            continue;
        }
        let backend = backends[b].clone();
        let done = done.clone();
        set.spawn(async move {
            /// Runs `done` when dropped, so counts are released even if the task is cancelled.
            struct Release(Arc<dyn Fn(usize, usize) + Send + Sync>, usize, usize);
            impl Drop for Release {
                fn drop(&mut self) {
                    (self.0)(self.1, self.2);
                }
            }
            let _release = Release(done, b, batch.len());
            let rows = batch.len();
            let result = backend.generate(batch).await;
            (b, rows, positions, result)
        });
    }
    let mut out: Vec<Option<Generation>> = vec![None; n];
    while let Some(joined) = set.join_next().await {
        let (b, rows, positions, result) =
            joined.map_err(|e| Error::Policy(format!("backend task failed: {e}")))?;
        let generations = result?;
        if generations.len() != rows {
            return Err(Error::Policy(format!(
                "backend {b} answered {} of {rows} requests",
                generations.len()
            )));
        }
        for (p, g) in positions.into_iter().zip(generations) {
            out[p] = Some(g);
        }
    }
    Ok(out.into_iter().flatten().collect())
}
