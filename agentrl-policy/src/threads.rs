//! libtorch's CPU thread count, which is kept per OS thread.
//!
//! `tch::set_num_threads` sets the calling thread's OpenMP and MKL counts and a process-wide
//! default, but it does not mark the thread as set up: at the thread's first parallel
//! operation (or `get_num_threads`) libtorch applies that default, which by then may be
//! another thread's later choice. [`set_torch_threads`] sets the thread up first, so the count
//! it sets stays.
//!
//! Work of our own that splits over the cores (sampling a decode step's rows, the update's
//! vocabulary pass) runs on scoped threads through `on_threads`.

/// Sets the calling OS thread's libtorch thread count to `threads` (at least 1) for good: a
/// later call on another thread does not change it. The process-wide default that threads
/// which never set a count take becomes `threads` too.
pub fn set_torch_threads(threads: i32) {
    // The first query on a thread applies the process-wide default and marks the thread set
    // up; the count set after it is then the thread's own.
    let _ = tch::get_num_threads();
    tch::set_num_threads(threads.max(1));
}

/// Runs `work` on the calling thread with `threads` libtorch threads, then gives the thread
/// back the count it had (also when `work` unwinds).
pub fn with_torch_threads<R>(threads: i32, work: impl FnOnce() -> R) -> R {
    /// Restores the thread's count when dropped.
    struct Restore(i32);
    impl Drop for Restore {
        fn drop(&mut self) {
            if tch::get_num_threads() != self.0 {
                set_torch_threads(self.0);
            }
        }
    }
    let own = tch::get_num_threads();
    let _restore = Restore(own);
    if threads.max(1) != own {
        set_torch_threads(threads);
    }
    work()
}

/// Runs `work` on every part, each part but the first on a thread of its own (the calling
/// thread takes the first), and returns when all are done.
pub(crate) fn on_threads<P: Send>(mut parts: impl Iterator<Item = P>, work: impl Fn(P) + Sync) {
    let first = parts.next();
    std::thread::scope(|scope| {
        for part in parts {
            let work = &work;
            scope.spawn(move || work(part));
        }
        if let Some(part) = first {
            work(part);
        }
    });
}

#[cfg(test)]
mod tests {
    use super::{set_torch_threads, with_torch_threads};

    #[test]
    fn work_runs_with_its_count_and_the_thread_gets_its_own_back() {
        std::thread::spawn(|| {
            set_torch_threads(2);
            assert_eq!(with_torch_threads(1, tch::get_num_threads), 1);
            assert_eq!(tch::get_num_threads(), 2);
            let unwound = std::panic::catch_unwind(|| with_torch_threads(1, || panic!("work")));
            assert!(unwound.is_err());
            assert_eq!(tch::get_num_threads(), 2);
        })
        .join()
        .expect("the checks pass");
    }

    #[test]
    fn a_threads_count_survives_another_threads_later_choice() {
        let (set_tx, set_rx) = std::sync::mpsc::channel();
        let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
        let first = std::thread::spawn(move || {
            set_torch_threads(2);
            set_tx.send(()).ok();
            go_rx.recv().ok();
            tch::get_num_threads()
        });
        set_rx.recv().ok();
        // Another thread asks for one thread after the first has set its count.
        std::thread::spawn(|| set_torch_threads(1)).join().ok();
        go_tx.send(()).ok();
        assert_eq!(first.join().ok(), Some(2));
    }
}
