//! `cargo xtask chaos`: runs that must survive faults. `--kill-resume N` kills a training run
//! with SIGKILL N times and checks that resuming gives the uninterrupted run's weights
//! ([`kill_resume`]); without it, a training run on env servers behind a controller survives
//! servers killed, delayed and dropped responses and a hanging tool ([`fleet`]).

pub mod fleet;
pub mod kill_resume;

use std::ffi::OsString;

use crate::Result;

/// Dispatches `cargo xtask chaos [--kill-resume N ...]`.
pub fn cmd_chaos(args: &[OsString]) -> Result<()> {
    let root = crate::repo_root()?;
    if args.iter().any(|a| a == "--kill-resume") {
        let exe = crate::build_agentrl(&root)?;
        kill_resume::run_kill_resume(&root, &exe, args)
    } else {
        fleet::run_fleet(&root, args)
    }
}
