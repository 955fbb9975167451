//! A background task that runs a sweep on shared state at a fixed period until the state is gone.

use std::sync::{Arc, Weak};
use std::time::Duration;

use tokio::task::JoinHandle;

/// Runs `sweep` on `shared` every `period` (missed ticks are delayed, not bunched) and stops
/// once the last strong reference to `shared` is dropped.
pub(crate) fn spawn_sweeper<T: Send + Sync + 'static>(
    shared: &Arc<T>,
    period: Duration,
    sweep: impl Fn(&Arc<T>) + Send + 'static,
) -> JoinHandle<()> {
    let weak: Weak<T> = Arc::downgrade(shared);
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(period);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            let Some(shared) = weak.upgrade() else { break };
            sweep(&shared);
        }
    })
}
