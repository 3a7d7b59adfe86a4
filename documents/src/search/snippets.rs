//! Snippets: the sentinels around highlights, kept out of indexed text so no source can
//! forge one, and the HTML-escaped rendering with `<mark>` tags.

use std::borrow::Cow;

/// Tokens of context in a snippet.
pub const SNIPPET_TOKENS: u32 = 24;

/// Private-use characters FTS5 puts around highlights before escaping; they are stripped
/// from indexed bodies so source text can never forge a highlight.
pub(super) const MARK_OPEN_SENTINEL: char = '\u{E000}';
pub(super) const MARK_CLOSE_SENTINEL: char = '\u{E001}';
pub(super) const SNIPPET_ELLIPSIS: &str = "…";

/// Removes the snippet sentinel characters from text about to be indexed.
pub fn strip_snippet_sentinels(text: &str) -> Cow<'_, str> {
    if text.contains([MARK_OPEN_SENTINEL, MARK_CLOSE_SENTINEL]) {
        Cow::Owned(
            text.chars()
                .filter(|c| *c != MARK_OPEN_SENTINEL && *c != MARK_CLOSE_SENTINEL)
                .collect(),
        )
    } else {
        Cow::Borrowed(text)
    }
}

/// HTML-escapes a raw FTS5 snippet and turns the sentinels into `<mark>` tags.
pub fn render_snippet(raw: &str) -> String {
    let mut out = String::with_capacity(raw.len() + 16);
    for c in raw.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#x27;"),
            MARK_OPEN_SENTINEL => out.push_str("<mark>"),
            MARK_CLOSE_SENTINEL => out.push_str("</mark>"),
            other => out.push(other),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snippets_escape_markup_and_keep_marks() {
        let raw = format!(
            "<script>alert(\"x\")</script> {MARK_OPEN_SENTINEL}horse{MARK_CLOSE_SENTINEL} & 'co'"
        );
        assert_eq!(
            render_snippet(&raw),
            "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; <mark>horse</mark> &amp; &#x27;co&#x27;"
        );
        assert_eq!(strip_snippet_sentinels("a\u{E000}b\u{E001}c"), "abc");
        assert!(matches!(strip_snippet_sentinels("plain"), Cow::Borrowed(_)));
    }
}
