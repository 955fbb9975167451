//! Plumbing shared by the [`http`](crate::http) and [`browser`](crate::browser) tools: the
//! allowlist of base URLs, name resolution that refuses internal addresses, and size- and
//! time-limited fetching.

mod allowlist;
mod fetch;
mod resolve;

pub use allowlist::UrlAllowlist;
pub use fetch::{Fetched, WebLimits, fetch, web_client};
