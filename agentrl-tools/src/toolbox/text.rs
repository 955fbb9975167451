//! Character-safe text shortening for tool outputs and error messages.

/// Cuts `text` to at most `max` characters (on a char boundary) and appends
/// `\n…[truncated N chars]` saying how many were dropped.
pub(crate) fn truncate_output(mut text: String, max: usize) -> String {
    if let Some((cut, _)) = text.char_indices().nth(max) {
        let dropped = text[cut..].chars().count();
        text.truncate(cut);
        text.push_str(&format!("\n…[truncated {dropped} chars]"));
    }
    text
}

/// The first `max` characters of `text`, with `…` when something was cut.
pub(crate) fn excerpt(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn truncates_on_char_boundaries() {
        assert_eq!(
            truncate_output("héllo".into(), 2),
            "hé\n…[truncated 3 chars]"
        );
        assert_eq!(truncate_output("héllo".into(), 5), "héllo");
        assert_eq!(excerpt("ééé", 2), "éé…");
        assert_eq!(excerpt("ab", 2), "ab");
    }
}
