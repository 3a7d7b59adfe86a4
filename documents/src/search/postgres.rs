//! Search's PostgreSQL dialect: the normalized terms as a `tsquery` over the generated
//! `tsvector` columns (GIN-indexed), ranked by `ts_rank_cd`, with `ts_headline` snippets.
//!
//! The rules (terms, match modes, stop words, filters, paging, ties) stay in `query` and `plan`;
//! this one only says how a plan's terms are matched, ranked and highlighted in PostgreSQL.
//! No user text reaches `to_tsquery` as syntax: each term's text is quoted here as one
//! `tsquery` lexeme, which `to_tsquery` only hands to the parser and dictionaries (as it does
//! a document's text), never reads for operators.

use std::borrow::Cow;

use sea_orm::Value;

use super::page;
use super::request::SearchScope;
use super::snippets::{MARK_CLOSE_SENTINEL, MARK_OPEN_SENTINEL, SNIPPET_TOKENS};
use super::stop_words::is_stop_word;

/// `ts_rank_cd`'s normalization: 1 divides the rank by 1 + log(document length), 16 by
/// 1 + log(unique words). BM25 damps long documents too; without these the longest abstracts
/// win the any-term questions. The best of the flags on Cranfield (nDCG@10 0.306 against
/// 0.239 for none, 0.277 for 1 alone; docs/search.md, "PostgreSQL").
const RANK_NORMALIZATION: i32 = 1 | 16;

/// Private-use characters that stand in for `<` and `>` while `ts_headline` reads a body: its
/// parser takes `<b>` for an HTML tag and drops it from the headline, and a snippet must show
/// the source text as it is (escaped by `render_snippet`, like on SQLite).
const ANGLE_OPEN_STANDIN: char = '\u{E002}';
const ANGLE_CLOSE_STANDIN: char = '\u{E003}';

/// Words PostgreSQL's `english` configuration drops besides those on [`super::STOP_WORDS`]
/// (its list is the Snowball one, with these fragments of contractions).
const MORE_ENGLISH_STOP_WORDS: &[&str] = &["don", "s", "t"];

/// A plan's terms as PostgreSQL matches them.
///
/// The `tsvector` columns are built with the `english` configuration, which stems like FTS5's
/// porter tokenizer but drops stop words from the index. So a term made only of stop words
/// cannot be found through it: such terms are checked on a `simple` vector of the body
/// instead (computed for the rows the index already matched, or for every row when nothing
/// else is left, as in "to be or not to be").
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct TsQuery {
    /// `english` (the index) or `simple` (only stop-word terms).
    config: &'static str,
    /// `to_tsquery` input built from quoted lexemes.
    text: String,
    /// Stop-word terms that must also match (all-terms plans), as `simple` `to_tsquery` input.
    stop_words: Option<String>,
}

impl TsQuery {
    /// The query for FTS5 terms (`"wing"`, `"e mail"`) and the text each came from (parallel
    /// lists), joined by AND, or by OR when `any`. The stop-word rule reads the terms' words;
    /// the lexemes are the source texts, so PostgreSQL's parser splits `U.S.A.` or `e-mail`
    /// exactly as it split the documents.
    pub(super) fn new(terms: &[String], sources: &[String], any: bool) -> Self {
        let mut indexed = Vec::new();
        let mut stopped = Vec::new();
        for (term, source) in terms.iter().zip(sources) {
            let words = words_of_term(term);
            if words.is_empty() {
                continue;
            }
            // Hyphens split words as FTS5 splits them: PostgreSQL indexes `e-mail` as the
            // compound and its parts, so the parts' phrase finds `e-mail` and `e mail` alike.
            let phrase = lexeme(&source.replace('-', " "));
            if words.iter().all(|w| is_english_stop_word(w)) {
                stopped.push(phrase);
            } else {
                indexed.push(phrase);
            }
        }
        let join = |parts: &[String]| parts.join(if any { " | " } else { " & " });
        if indexed.is_empty() {
            return TsQuery {
                config: "simple",
                text: join(&stopped),
                stop_words: None,
            };
        }
        // Any-term plans already leave out stop words (their content terms); a quoted
        // stop-word phrase among them would match nearly every document anyway.
        let stop_words = (!any && !stopped.is_empty()).then(|| join(&stopped));
        TsQuery {
            config: "english",
            text: join(&indexed),
            stop_words,
        }
    }

    /// The vector the query is matched and ranked against.
    fn vector(&self, table: &str) -> String {
        if self.config == "english" {
            format!("{table}.tsv")
        } else {
            format!("to_tsvector('simple', {table}.body)")
        }
    }

    /// The query functions for a FROM list (each evaluated once, not per row): `q` is the
    /// query, `qs` the stop-word terms. Their values are [`Self::values`], in order.
    fn query_items(&self) -> String {
        let mut items = format!("to_tsquery('{}', ?) AS q", self.config);
        if self.stop_words.is_some() {
            items.push_str(", to_tsquery('simple', ?) AS qs");
        }
        items
    }

    /// The values of [`Self::query_items`].
    pub(super) fn values(&self) -> Vec<Value> {
        let mut values = vec![Value::from(self.text.clone())];
        if let Some(stop_words) = &self.stop_words {
            values.push(stop_words.clone().into());
        }
        values
    }

    /// The match condition over `table` (uses the GIN index for `english`).
    fn condition(&self, table: &str) -> String {
        let mut cond = format!("{} @@ q", self.vector(table));
        if self.stop_words.is_some() {
            cond.push_str(&format!(" AND to_tsvector('simple', {table}.body) @@ qs"));
        }
        cond
    }

    /// `FROM … WHERE …` of the matching rows of `table` joined to their documents, with the
    /// filters appended.
    pub(super) fn source_clause(&self, table: &str, filter_sql: &str) -> String {
        format!(
            "FROM {}, {table} JOIN documents d ON d.pk = {table}.rowid WHERE {}{filter_sql}",
            self.query_items(),
            self.condition(table)
        )
    }

    /// Counts matches on the index alone (no filters, so no join).
    pub(super) fn count_sql(&self, table: &str) -> String {
        format!(
            "SELECT count(*) AS n FROM {}, {table} WHERE {}",
            self.query_items(),
            self.condition(table)
        )
    }

    /// The ranked page, as the SQLite statement shapes it: ranked and cut in a CTE first, then
    /// only the page rows get their snippets (`ts_headline` re-parses a whole body, the
    /// costliest part). `bm25_score` holds the negated `ts_rank_cd` so that ordering and the
    /// API's score (higher is better) are shared with SQLite's BM25. Values: [`Self::values`],
    /// the filters, limit, offset, then [`Self::snippet_values`] when `with_snippets`.
    pub(super) fn page_sql(
        &self,
        table: &str,
        scope: SearchScope,
        filter_sql: &str,
        with_snippets: bool,
    ) -> String {
        let score = format!(
            "CAST(-ts_rank_cd({}, q, {}) AS DOUBLE PRECISION)",
            self.vector(table),
            RANK_NORMALIZATION
        );
        let ranked = page::ranked_cte(table, &score, &self.source_clause(table, filter_sql));
        if !with_snippets {
            return page::select_ids(&ranked);
        }
        let config = self.config;
        page::select_hits(
            &ranked,
            table,
            scope,
            &format!("ts_headline('{config}', translate({table}.body, '<>', ?), q, ?)"),
            &format!(
                "JOIN {table} ON {table}.rowid = page.rid \
                 JOIN documents d ON d.pk = page.rid, to_tsquery('{config}', ?) AS q"
            ),
        )
    }

    /// The snippet values of [`Self::page_sql`]: the angle-bracket stand-ins, the
    /// `ts_headline` options, and the query again. One fragment of about [`SNIPPET_TOKENS`]
    /// words around the best match, like FTS5's `snippet()`; `ShortWord=0` because the
    /// default trims words of up to three letters from the fragment's ends; the highlight
    /// sentinels are the ones `render_snippet` turns into `<mark>`.
    pub(super) fn snippet_values(&self) -> Vec<Value> {
        let options = format!(
            "StartSel={MARK_OPEN_SENTINEL}, StopSel={MARK_CLOSE_SENTINEL}, MaxFragments=1, \
             MaxWords={SNIPPET_TOKENS}, MinWords={}, ShortWord=0",
            SNIPPET_TOKENS / 2
        );
        vec![
            format!("{ANGLE_OPEN_STANDIN}{ANGLE_CLOSE_STANDIN}").into(),
            options.into(),
            self.text.clone().into(),
        ]
    }
}

/// Puts back the angle brackets of a `ts_headline` snippet, for `render_snippet` to escape.
pub(super) fn restore_angles(snippet: &str) -> Cow<'_, str> {
    if snippet.contains([ANGLE_OPEN_STANDIN, ANGLE_CLOSE_STANDIN]) {
        Cow::Owned(
            snippet
                .replace(ANGLE_OPEN_STANDIN, "<")
                .replace(ANGLE_CLOSE_STANDIN, ">"),
        )
    } else {
        Cow::Borrowed(snippet)
    }
}

/// Whether the `english` configuration drops `word` (then it is matched on `simple`).
fn is_english_stop_word(word: &str) -> bool {
    is_stop_word(word)
        || MORE_ENGLISH_STOP_WORDS
            .iter()
            .any(|w| w.eq_ignore_ascii_case(word))
}

/// The words of a term `normalize_query` built: a double-quoted FTS5 string whose words are
/// separated by single spaces (words never hold whitespace) and whose `"` are doubled.
fn words_of_term(term: &str) -> Vec<String> {
    let inner = term
        .strip_prefix('"')
        .and_then(|t| t.strip_suffix('"'))
        .unwrap_or(term);
    inner
        .replace("\"\"", "\"")
        .split(' ')
        .filter(|w| !w.is_empty())
        .map(str::to_string)
        .collect()
}

/// Text as one quoted `tsquery` lexeme (`'e-mail'`, `'state of the art'`): `to_tsquery`
/// parses its inside like document text, joining the words it finds as a phrase (`<->`, with
/// the distances of dropped stop words). Only `'` and `\` mean anything inside quotes; both
/// are escaped.
fn lexeme(text: &str) -> String {
    format!("'{}'", text.replace('\\', "\\\\").replace('\'', "''"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn query(text: &str, any: bool) -> TsQuery {
        let q = super::super::normalize_query(text, false).expect("query");
        TsQuery::new(&q.terms, &q.sources, any)
    }

    #[test]
    fn terms_become_quoted_lexemes_of_their_source_text() {
        let q = query("e-mail Horse", false);
        assert_eq!(q.config, "english");
        assert_eq!(q.text, "'e mail' & 'Horse'");
        assert_eq!(q.stop_words, None);
        assert_eq!(query("wing lift", true).text, "'wing' | 'lift'");
        let q = query("a'b\\c OR (x)", false);
        assert_eq!(q.text, "'a''b\\\\c' & '(x)'");
        assert_eq!(q.stop_words.as_deref(), Some("'OR'"));
        assert_eq!(words_of_term("\"say \"\"x\"\"\""), vec!["say", "\"x\""]);
    }

    #[test]
    fn stop_word_terms_are_matched_on_simple() {
        // Only stop words: the index cannot find them; `simple` matches every word.
        let q = query("to be or", false);
        assert_eq!(
            (q.config, q.text.as_str()),
            ("simple", "'to' & 'be' & 'or'")
        );
        // All terms with stop words: the index for the rest, `simple` for the stop words.
        let q = query("the wing it's", false);
        assert_eq!((q.config, q.text.as_str()), ("english", "'wing'"));
        assert_eq!(q.stop_words.as_deref(), Some("'the' & 'it''s'"));
        assert_eq!(q.values().len(), 2);
        // Any-term plans leave them out.
        assert_eq!(query("the wing it's", true).stop_words, None);
        // A phrase with a content word keeps its stop words (`<->` distances).
        let q = query("\"state of the art\"", false);
        assert_eq!(q.text, "'state of the art'");
        assert_eq!(q.stop_words, None);
    }

    #[test]
    fn angle_brackets_come_back() {
        assert_eq!(restore_angles("\u{E002}b\u{E003}x"), "<b>x");
        assert!(matches!(restore_angles("plain"), Cow::Borrowed(_)));
    }
}
