//! Poison-tolerant locking of the std mutexes that env sessions and the protocol services share.

use std::sync::{Mutex, MutexGuard};

/// Locks `m`, recovering the data if a holder panicked (the guarded states are small and each
/// critical section updates them in one go, so a panic leaves nothing half-written).
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}
