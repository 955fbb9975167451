//! Plumbing shared by the [`http`](crate::http) and [`browser`](crate::browser) tools: the
//! allowlist of base URLs and size- and time-limited fetching.

mod allowlist;
mod fetch;

pub use allowlist::UrlAllowlist;
pub use fetch::{Fetched, WebLimits, fetch, web_client};
