//! Progress bars (hidden when stderr is not a terminal; progress is also logged).

use indicatif::{ProgressBar, ProgressStyle};

/// A progress bar of `len` steps labelled `label`.
pub fn bar(len: u64, label: &str) -> ProgressBar {
    let bar = ProgressBar::new(len);
    if let Ok(style) =
        ProgressStyle::with_template("{prefix:>5} [{bar:30}] {pos}/{len} {elapsed_precise} {msg}")
    {
        bar.set_style(style.progress_chars("=> "));
    }
    bar.set_prefix(label.to_string());
    bar
}
