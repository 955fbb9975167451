//! Rendering ranked search hits as the text the model reads, within a character budget.

use super::index::SearchHit;

/// The hits as numbered entries (`1. Title [id]` then the snippet, indented), with a header;
/// whole entries are dropped from the end, with a note saying how many, so the text stays
/// within `max_chars` characters.
pub fn render_hits(query: &str, hits: &[SearchHit], max_chars: usize) -> String {
    if hits.is_empty() {
        return cut(&format!("no documents match `{query}`"), max_chars);
    }
    let header = format!("{} results for `{query}`:", hits.len());
    let entries: Vec<String> = hits
        .iter()
        .enumerate()
        .map(|(i, h)| format!("\n{}. {} [{}]\n   {}", i + 1, h.title, h.id, h.snippet))
        .collect();
    let mut out = header;
    for (shown, entry) in entries.iter().enumerate() {
        let left_after = entries.len() - shown - 1;
        let note = omitted_note(left_after, max_chars);
        if chars(&out) + chars(entry) + chars(&note) <= max_chars {
            out.push_str(entry);
            continue;
        }
        let note = omitted_note(entries.len() - shown, max_chars);
        if shown == 0 {
            // Not even one whole entry fits: show as much of the first one as the budget allows.
            let room = max_chars.saturating_sub(chars(&out) + chars(&note));
            out.push_str(&cut(entry, room));
        }
        out.push_str(&note);
        return cut(&out, max_chars);
    }
    out
}

/// The note saying that `omitted` entries were left out (empty when none were).
fn omitted_note(omitted: usize, max_chars: usize) -> String {
    if omitted == 0 {
        String::new()
    } else {
        format!("\n({omitted} more results not shown: output limit of {max_chars} characters)")
    }
}

/// Number of characters of `s`.
fn chars(s: &str) -> usize {
    s.chars().count()
}

/// The first `max_chars` characters of `s`.
fn cut(s: &str, max_chars: usize) -> String {
    s.chars().take(max_chars).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hit(n: usize) -> SearchHit {
        SearchHit {
            id: format!("d{n}"),
            title: format!("Title {n}"),
            snippet: "some words of the body".into(),
            score: 1.0,
        }
    }

    #[test]
    fn drops_whole_entries_to_fit() {
        let hits: Vec<SearchHit> = (1..=5).map(hit).collect();
        let full = render_hits("q", &hits, 10_000);
        assert!(full.starts_with("5 results for `q`:\n1. Title 1 [d1]\n   some words"));
        assert!(full.contains("5. Title 5 [d5]"));
        let short = render_hits("q", &hits, 150);
        assert!(short.chars().count() <= 150, "{short}");
        assert!(short.contains("1. Title 1") && !short.contains("5. Title 5"));
        assert!(short.contains("more results not shown"), "{short}");
        let tiny = render_hits("q", &hits, 10);
        assert_eq!(tiny.chars().count(), 10);
        assert_eq!(render_hits("q", &[], 100), "no documents match `q`");
    }
}
