//! The C allocator's settings for training. libtorch allocates and frees tensors of tens to
//! hundreds of MiB at every step (activations, logits, gradients). glibc serves blocks past
//! its mmap threshold (32 MiB at most) with fresh `mmap`s and unmaps them on free, so the
//! kernel zeroes every page of them again at the next step: about a sixth of an RL step of
//! SmolLM2-135M on 2 CPU cores went to page faults and page clearing.
//! [`keep_freed_memory`] has glibc serve them from its heap and keep freed memory for reuse;
//! resident memory then stays at its peak instead of breathing with each step.
//!
//! It also gives every thread the one heap (glibc's arena limit of 1). With several arenas,
//! memory freed by the rollout thread (KV caches, prefill activations) stays in its arena, out
//! of the learner thread's reach, so the process held both threads' peaks at once: SmolLM2's
//! fp32 step peaked at 4.6-4.8 GB with per-thread arenas and at 3.9 GB with one, and its
//! update got faster (8.7-9.0 s against 9.6-11.2 s). Small blocks still come from each
//! thread's own cache without a lock.

/// Environment variables with which a user already chose glibc's behaviour (then
/// [`keep_freed_memory`] leaves it alone), and this project's own opt-out.
const USER_SETTINGS: [&str; 4] = [
    "MALLOC_MMAP_MAX_",
    "MALLOC_TRIM_THRESHOLD_",
    "MALLOC_ARENA_MAX",
    "AGENTRL_SYSTEM_MALLOC",
];

/// Has glibc's `malloc` keep large freed blocks for reuse (no `mmap` per block, no trimming of
/// the heap below 2 GiB) in one heap for all threads; returns whether it did. Call it first thing in `main`, before any
/// thread starts. Does nothing when one of `USER_SETTINGS` is set, or off glibc.
pub fn keep_freed_memory() -> bool {
    if USER_SETTINGS.iter().any(|v| std::env::var_os(v).is_some()) {
        return false;
    }
    set_glibc_options()
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn set_glibc_options() -> bool {
    // SAFETY: mallopt only changes allocator parameters; it is called before other threads
    // exist (see `keep_freed_memory`), and the values are within glibc's accepted ranges.
    unsafe {
        libc::mallopt(libc::M_MMAP_MAX, 0) == 1
            && libc::mallopt(libc::M_TRIM_THRESHOLD, i32::MAX) == 1
            && libc::mallopt(libc::M_ARENA_MAX, 1) == 1
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn set_glibc_options() -> bool {
    false
}
