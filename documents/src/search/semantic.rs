//! Semantic and hybrid search, and similar documents: the dense ranking of documents by their
//! best passage (from `vectors`), its fusion with the BM25 ranking by reciprocal rank, and
//! the page, ids and facets of the ranked candidates, in the shapes keyword search answers.
//!
//! Choices (docs/search.md, "Modes"):
//! - Semantic ranks every document with passages of the query's model by its best passage's
//!   cosine similarity, and keeps the first [`SEMANTIC_CANDIDATES`]: `total` is the size of that
//!   candidate set (after the filters), not of the corpus, since every document is "similar" to
//!   some degree.
//! - Hybrid fuses the top [`FUSION_DEPTH`] of BM25 (documents, the keyword plans as they are)
//!   and the top [`FUSION_DEPTH`] of the dense ranking: `score = Σ 1 / (60 + rank)`; ties go to
//!   the better single rank, then the smaller id. `total` is the size of the union.
//! - Passages are of the cleaned text: with `scope: raw`, semantic still compares the cleaned
//!   passages (its hits say `source: cleaned`), and hybrid fuses BM25 over the raw text with
//!   them (its hits say `raw`, as its keyword half does).
//! - Snippets come from the best passage: escaped like keyword snippets, the query's words
//!   that appear in it marked. A document with no passage yet (hybrid, found by BM25 only)
//!   gets its snippet from the start of its indexed cleaned text.
//! - Filters restrict the scan to the documents that pass them (one query on `documents`),
//!   so the dense ranking is exact under any filter.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use sea_orm::{ConnectionTrait, QueryResult, Value};
use shelf_db::sql::SqlExt;

use crate::error::{DocumentsError, Result};
use crate::sql::stmt;

use super::facets::buckets;
use super::page::status_and_classification;
use super::plan::{filters, prepare, validate};
use super::request::{
    DEFAULT_LIMIT, FacetCount, MAX_LIMIT, MatchMode, QueryVector, SearchFacets, SearchHit,
    SearchIds, SearchMode, SearchPage, SearchRequest, SearchScope,
};
use super::snippets::{MARK_CLOSE_SENTINEL, MARK_OPEN_SENTINEL, SNIPPET_ELLIPSIS, render_snippet};
use super::stop_words::is_stop_word;
use super::vectors::{DocumentMatch, VectorMatrix, current_matrix};

/// Deepest document a semantic search ranks (as keyword search pages the first 1,000 on the
/// index alone).
pub const SEMANTIC_CANDIDATES: usize = 1000;
/// Documents of each ranking that hybrid fuses.
pub const FUSION_DEPTH: usize = 100;
/// The constant of reciprocal rank fusion (Cormack et al.): `1 / (k + rank)`.
pub const RRF_K: f64 = 60.0;
/// Words in a passage snippet.
const SNIPPET_WORDS: usize = 32;
/// Words before the first match in a passage snippet.
const SNIPPET_LEAD: usize = 8;
/// Characters of an indexed text read for a snippet when a document has no passage (an
/// `INTEGER`: PostgreSQL has no `substr(text, int, bigint)`).
const FALLBACK_CHARS: i32 = 2000;

/// A ranked candidate: the document, its score, and its best passage when it has one.
#[derive(Debug, Clone, PartialEq)]
struct Ranked {
    document_id: String,
    score: f64,
    passage_id: Option<i64>,
}

impl From<DocumentMatch> for Ranked {
    /// A document the scan found, by its best passage.
    fn from(m: DocumentMatch) -> Self {
        Ranked {
            document_id: m.document_id,
            score: f64::from(m.score),
            passage_id: Some(m.passage_id),
        }
    }
}

/// The ranked candidates of a semantic or hybrid request, the match mode to report, the
/// matrix and the query's vector (for best passages of documents only BM25 found).
struct Candidates {
    ranked: Vec<Ranked>,
    match_mode: MatchMode,
    matrix: Arc<VectorMatrix>,
    query: QueryVector,
}

/// Checks a dense request and returns its query vector.
fn dense_query(req: &SearchRequest) -> Result<QueryVector> {
    validate(req)?;
    if req.query.trim().is_empty() {
        return Err(DocumentsError::InvalidSearchQuery);
    }
    req.query_vector
        .clone()
        .filter(|q| !q.values.is_empty())
        .ok_or(DocumentsError::EmbeddingUnavailable)
}

/// The documents passing the request's filters, or `None` without filters.
async fn allowed_documents(
    conn: &impl ConnectionTrait,
    req: &SearchRequest,
) -> Result<Option<HashSet<String>>> {
    let (filter_sql, values) = filters(req, conn.get_database_backend());
    if filter_sql.is_empty() {
        return Ok(None);
    }
    let rows = conn
        .query_all_sql(stmt(
            &format!("SELECT d.id AS id FROM documents d WHERE 1 = 1{filter_sql}"),
            values,
        ))
        .await?;
    Ok(Some(
        rows.iter()
            .map(|row| row.try_get::<String>("", "id"))
            .collect::<Result<_, _>>()?,
    ))
}

/// Runs the scan off the async threads: at 100,000 passages it is milliseconds of CPU.
async fn scan(
    matrix: Arc<VectorMatrix>,
    query: Vec<f32>,
    k: usize,
    allowed: Option<HashSet<String>>,
    exclude: Option<String>,
) -> Result<Vec<super::vectors::DocumentMatch>> {
    tokio::task::spawn_blocking(move || {
        matrix.top_documents(&query, k, allowed.as_ref(), exclude.as_deref())
    })
    .await
    .map_err(|e| DocumentsError::corrupt(format!("vector scan: {e}")))?
}

async fn candidates(conn: &impl ConnectionTrait, req: &SearchRequest) -> Result<Candidates> {
    let query = dense_query(req)?;
    let depth = match req.mode {
        SearchMode::Hybrid => FUSION_DEPTH,
        _ => SEMANTIC_CANDIDATES,
    };
    // The keyword half runs beside the dense one (its statements on pooled readers, the scan
    // on a blocking thread): a hybrid search waits for the slower, not for both.
    let dense_half = async {
        let (matrix, allowed) = tokio::try_join!(
            current_matrix(conn, &query.model),
            allowed_documents(conn, req)
        )?;
        let found = scan(matrix.clone(), query.values.clone(), depth, allowed, None).await?;
        Ok::<_, DocumentsError>((matrix, found))
    };
    let keyword_half = async {
        if req.mode == SearchMode::Hybrid {
            keyword_top(conn, req).await.map(Some)
        } else {
            Ok(None)
        }
    };
    let ((matrix, dense), keyword) = tokio::try_join!(dense_half, keyword_half)?;
    let dense: Vec<Ranked> = dense.into_iter().map(Ranked::from).collect();
    let Some((keyword, match_mode)) = keyword else {
        return Ok(Candidates {
            ranked: dense,
            match_mode: MatchMode::Any,
            matrix,
            query,
        });
    };
    let passages: HashMap<&str, i64> = dense
        .iter()
        .filter_map(|r| Some((r.document_id.as_str(), r.passage_id?)))
        .collect();
    let dense_ids: Vec<String> = dense.iter().map(|r| r.document_id.clone()).collect();
    let ranked = fuse(&keyword, &dense_ids)
        .into_iter()
        .map(|(document_id, score)| Ranked {
            passage_id: passages.get(document_id.as_str()).copied(),
            document_id,
            score,
        })
        .collect();
    Ok(Candidates {
        ranked,
        match_mode,
        matrix,
        query,
    })
}

/// The top [`FUSION_DEPTH`] of the keyword ranking, under the same plans (and match mode) as a
/// keyword search. A query with nothing searchable by words (only punctuation) fuses nothing
/// from this side.
async fn keyword_top(
    conn: &impl ConnectionTrait,
    req: &SearchRequest,
) -> Result<(Vec<String>, MatchMode)> {
    let prepared = match prepare(req, conn.get_database_backend()) {
        Ok(prepared) => prepared.with_page(FUSION_DEPTH as u64, 0),
        Err(DocumentsError::InvalidSearchQuery) => return Ok((Vec::new(), MatchMode::Any)),
        Err(e) => return Err(e),
    };
    let (rows, match_mode) = prepared.top(conn, req.effective_mode()).await?;
    let ids = rows
        .iter()
        .map(|row| row.try_get::<String>("", "document_id"))
        .collect::<Result<Vec<_>, _>>()?;
    Ok((ids, match_mode))
}

/// Reciprocal rank fusion of two rankings (best first): each document scores
/// `Σ 1 / (RRF_K + rank)` over the rankings it is in (ranks from 1); best first, ties to the
/// better single rank, then the smaller id.
fn fuse(keyword: &[String], dense: &[String]) -> Vec<(String, f64)> {
    let mut fused: HashMap<&str, (f64, usize)> = HashMap::new();
    for ranking in [keyword, dense] {
        for (index, id) in ranking.iter().enumerate() {
            let rank = index + 1;
            let entry = fused.entry(id.as_str()).or_insert((0.0, usize::MAX));
            entry.0 += 1.0 / (RRF_K + rank as f64);
            entry.1 = entry.1.min(rank);
        }
    }
    let mut out: Vec<(&str, f64, usize)> = fused
        .into_iter()
        .map(|(id, (score, best))| (id, score, best))
        .collect();
    out.sort_by(|a, b| {
        b.1.total_cmp(&a.1)
            .then(a.2.cmp(&b.2))
            .then_with(|| a.0.cmp(b.0))
    });
    out.into_iter()
        .map(|(id, score, _)| (id.to_string(), score))
        .collect()
}

fn page_bounds(req: &SearchRequest) -> (u64, u64) {
    (
        req.limit.unwrap_or(DEFAULT_LIMIT).min(MAX_LIMIT),
        req.offset,
    )
}

fn page_of(ranked: &[Ranked], limit: u64, offset: u64) -> &[Ranked] {
    let start = usize::try_from(offset)
        .unwrap_or(usize::MAX)
        .min(ranked.len());
    let end = start
        .saturating_add(usize::try_from(limit).unwrap_or(usize::MAX))
        .min(ranked.len());
    &ranked[start..end]
}

/// A semantic or hybrid page of hits.
pub(super) async fn results(
    conn: &impl ConnectionTrait,
    req: &SearchRequest,
) -> Result<SearchPage> {
    let found = candidates(conn, req).await?;
    let (limit, offset) = page_bounds(req);
    let mut page = page_of(&found.ranked, limit, offset).to_vec();
    // Documents only BM25 found: their best passage, if they have passages at all.
    let missing: HashSet<String> = page
        .iter()
        .filter(|r| r.passage_id.is_none())
        .map(|r| r.document_id.clone())
        .collect();
    if !missing.is_empty() {
        let best = scan(
            found.matrix.clone(),
            found.query.values.clone(),
            missing.len(),
            Some(missing),
            None,
        )
        .await?;
        let best: HashMap<String, i64> = best
            .into_iter()
            .map(|m| (m.document_id, m.passage_id))
            .collect();
        for r in &mut page {
            if r.passage_id.is_none() {
                r.passage_id = best.get(&r.document_id).copied();
            }
        }
    }
    let source = match req.mode {
        SearchMode::Hybrid => req.scope,
        _ => SearchScope::Cleaned,
    };
    let results = load_hits(conn, &page, source, &query_words(&req.query)).await?;
    Ok(SearchPage {
        results,
        total: found.ranked.len() as u64,
        limit,
        offset,
        match_mode: found.match_mode,
    })
}

/// A semantic or hybrid page of ids.
pub(super) async fn ids(conn: &impl ConnectionTrait, req: &SearchRequest) -> Result<SearchIds> {
    let found = candidates(conn, req).await?;
    let (limit, offset) = page_bounds(req);
    Ok(SearchIds {
        document_ids: page_of(&found.ranked, limit, offset)
            .iter()
            .map(|r| r.document_id.clone())
            .collect(),
        total: found.ranked.len() as u64,
        limit,
        offset,
        match_mode: found.match_mode,
    })
}

/// The facets of a semantic or hybrid search: over its ranked candidates.
pub(super) async fn facets(
    conn: &impl ConnectionTrait,
    req: &SearchRequest,
    bucket_limit: u64,
) -> Result<SearchFacets> {
    let found = candidates(conn, req).await?;
    let ids: Vec<Value> = found
        .ranked
        .iter()
        .map(|r| Value::from(r.document_id.clone()))
        .collect();
    let (classifications, statuses, filenames) = if ids.is_empty() {
        Default::default()
    } else {
        let source = format!(
            "FROM documents d WHERE d.id IN ({})",
            vec!["?"; ids.len()].join(", ")
        );
        buckets(conn, &source, ids, bucket_limit).await?
    };
    let scope = match req.mode {
        SearchMode::Hybrid => req.scope,
        _ => SearchScope::Cleaned,
    };
    Ok(SearchFacets {
        classifications,
        statuses,
        sources: vec![FacetCount {
            value: scope.as_str().to_string(),
            count: found.ranked.len() as u64,
            label: None,
        }],
        filenames,
        match_mode: found.match_mode,
    })
}

/// The documents nearest `document_id` by meaning: the mean of its passages' vectors (of
/// `query.model`, the configured model; `query.values` is ignored) compared with every other
/// document's best passage, best first, at most `limit`. Hits are of the cleaned text, their
/// snippet the start of the best passage, their score its cosine similarity. `NotFound` for an
/// unknown document; empty when it has no passages of that model yet.
pub async fn similar_documents(
    conn: &impl ConnectionTrait,
    document_id: &str,
    model: &str,
    limit: u64,
) -> Result<Vec<SearchHit>> {
    if crate::store::find_document(conn, document_id)
        .await?
        .is_none()
    {
        return Err(DocumentsError::NotFound {
            id: document_id.to_string(),
        });
    }
    let matrix = current_matrix(conn, model).await?;
    let Some(mean) = matrix.document_mean(document_id) else {
        return Ok(Vec::new());
    };
    let limit = usize::try_from(limit.min(MAX_LIMIT)).unwrap_or(usize::MAX);
    let found = scan(matrix, mean, limit, None, Some(document_id.to_string())).await?;
    let ranked: Vec<Ranked> = found.into_iter().map(Ranked::from).collect();
    load_hits(conn, &ranked, SearchScope::Cleaned, &[]).await
}

/// The query's words, lowercased, stop words and single letters (the `s` of "pony's") left
/// out: what a passage snippet marks.
fn query_words(query: &str) -> Vec<String> {
    let mut words: Vec<String> = Vec::new();
    for word in query.split(|c: char| !c.is_alphanumeric()).filter(|w| {
        !w.is_empty() && (w.chars().nth(1).is_some() || w.chars().all(|c| c.is_ascii_digit()))
    }) {
        let word = word.to_lowercase();
        if !is_stop_word(&word) && !words.contains(&word) {
            words.push(word);
        }
    }
    words
}

/// A snippet of a passage: about [`SNIPPET_WORDS`] words from a little before the first word
/// of the query found in it (or from its start), those words marked, the rest escaped.
pub(super) fn passage_snippet(passage: &str, words: &[String]) -> String {
    let tokens: Vec<&str> = passage.split_whitespace().collect();
    let matches = |token: &str| {
        token
            .split(|c: char| !c.is_alphanumeric())
            .any(|part| !part.is_empty() && words.contains(&part.to_lowercase()))
    };
    let first = tokens.iter().position(|t| matches(t)).unwrap_or(0);
    let start = first.saturating_sub(SNIPPET_LEAD);
    let end = (start + SNIPPET_WORDS).min(tokens.len());
    let mut raw = String::new();
    if start > 0 {
        raw.push_str(SNIPPET_ELLIPSIS);
    }
    for (i, token) in tokens[start..end].iter().enumerate() {
        if i > 0 || start > 0 {
            raw.push(' ');
        }
        // Alphanumeric runs are marked when they are query words; the rest is kept as is.
        let mut part = String::new();
        let flush = |part: &mut String, raw: &mut String| {
            if part.is_empty() {
                return;
            }
            if words.contains(&part.to_lowercase()) {
                raw.push(MARK_OPEN_SENTINEL);
                raw.push_str(part);
                raw.push(MARK_CLOSE_SENTINEL);
            } else {
                raw.push_str(part);
            }
            part.clear();
        };
        for c in token.chars() {
            if c == MARK_OPEN_SENTINEL || c == MARK_CLOSE_SENTINEL {
                continue;
            }
            if c.is_alphanumeric() {
                part.push(c);
            } else {
                flush(&mut part, &mut raw);
                raw.push(c);
            }
        }
        flush(&mut part, &mut raw);
    }
    if end < tokens.len() {
        raw.push(' ');
        raw.push_str(SNIPPET_ELLIPSIS);
    }
    render_snippet(&raw)
}

fn in_list(n: usize) -> String {
    vec!["?"; n].join(", ")
}

/// The hits of a page of ranked documents, in its order (documents deleted meanwhile left
/// out): each document's row, its best passage for the snippet (or the start of its indexed
/// text when it has none) and, for a cleaned hit, the run of that passage or of the index.
async fn load_hits(
    conn: &impl ConnectionTrait,
    page: &[Ranked],
    source: SearchScope,
    words: &[String],
) -> Result<Vec<SearchHit>> {
    if page.is_empty() {
        return Ok(Vec::new());
    }
    let ids = || -> Vec<Value> {
        page.iter()
            .map(|r| Value::from(r.document_id.clone()))
            .collect()
    };
    let documents = conn
        .query_all_sql(stmt(
            &format!(
                "SELECT d.id AS document_id, d.filename, d.status, d.created_at, \
                 d.classification, d.classification_label, \
                 (SELECT s.run_id FROM search_documents s WHERE s.pk = d.pk) AS index_run_id, \
                 EXISTS (SELECT 1 FROM document_segments g WHERE g.document_id = d.id) \
                 AS has_transcript FROM documents d WHERE d.id IN ({})",
                in_list(page.len())
            ),
            ids(),
        ))
        .await?;
    let documents: HashMap<String, &QueryResult> = documents
        .iter()
        .map(|row| Ok((row.try_get::<String>("", "document_id")?, row)))
        .collect::<Result<_>>()?;

    let passage_ids: Vec<Value> = page
        .iter()
        .filter_map(|r| r.passage_id.map(Value::from))
        .collect();
    let mut passages: HashMap<String, (String, String)> = HashMap::new();
    if !passage_ids.is_empty() {
        for row in conn
            .query_all_sql(stmt(
                &format!(
                    "SELECT document_id, run_id, text FROM document_passages WHERE id IN ({})",
                    in_list(passage_ids.len())
                ),
                passage_ids,
            ))
            .await?
        {
            passages.insert(
                row.try_get("", "document_id")?,
                (row.try_get("", "run_id")?, row.try_get("", "text")?),
            );
        }
    }
    let without: Vec<Value> = page
        .iter()
        .filter(|r| !passages.contains_key(&r.document_id))
        .map(|r| Value::from(r.document_id.clone()))
        .collect();
    let mut bodies: HashMap<String, String> = HashMap::new();
    if !without.is_empty() {
        let n = without.len();
        let mut values = vec![Value::from(FALLBACK_CHARS)];
        values.extend(without);
        for row in conn
            .query_all_sql(stmt(
                &format!(
                    "SELECT d.id AS document_id, substr(t.body, 1, ?) AS body FROM documents d \
                     JOIN search_documents s ON s.pk = d.pk \
                     JOIN document_texts t ON t.id = s.cleaned_text_id WHERE d.id IN ({})",
                    in_list(n)
                ),
                values,
            ))
            .await?
        {
            bodies.insert(row.try_get("", "document_id")?, row.try_get("", "body")?);
        }
    }

    let mut hits = Vec::with_capacity(page.len());
    for ranked in page {
        let Some(row) = documents.get(&ranked.document_id) else {
            continue;
        };
        let passage = passages.get(&ranked.document_id);
        let text = passage
            .map(|(_, text)| text.as_str())
            .or_else(|| bodies.get(&ranked.document_id).map(String::as_str))
            .unwrap_or("");
        let index_run_id: Option<String> = row.try_get("", "index_run_id")?;
        let run_id = match source {
            SearchScope::Raw => None,
            SearchScope::Cleaned => passage.map(|(run, _)| run.clone()).or(index_run_id),
        };
        hits.push(hit(
            row,
            ranked,
            source,
            run_id,
            passage_snippet(text, words),
        )?);
    }
    Ok(hits)
}

fn hit(
    row: &QueryResult,
    ranked: &Ranked,
    source: SearchScope,
    run_id: Option<String>,
    snippet: String,
) -> Result<SearchHit> {
    let (document_status, classification_code, classification_label) =
        status_and_classification(row, &ranked.document_id)?;
    Ok(SearchHit {
        document_id: ranked.document_id.clone(),
        run_id,
        source,
        filename: row.try_get("", "filename")?,
        document_status,
        created_at: row.try_get("", "created_at")?,
        snippet,
        score: ranked.score,
        classification_code,
        classification_label,
        has_transcript: row.try_get::<bool>("", "has_transcript")?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fusion_follows_hand_computed_reciprocal_ranks() {
        let ids = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        // keyword: a b c; dense: c d a.
        // a: 1/61 + 1/63, b: 1/62, c: 1/63 + 1/61, d: 1/62.
        let fused = fuse(&ids(&["a", "b", "c"]), &ids(&["c", "d", "a"]));
        let names: Vec<&str> = fused.iter().map(|(id, _)| id.as_str()).collect();
        // a and c tie (same sum, both best rank 1): by id; b and d tie (best rank 2): by id.
        assert_eq!(names, ["a", "c", "b", "d"]);
        let expected = 1.0 / 61.0 + 1.0 / 63.0;
        assert!((fused[0].1 - expected).abs() < 1e-12);
        assert!((fused[2].1 - 1.0 / 62.0).abs() < 1e-12);
        // A document second in both beats one first in only one: 2/62 > 1/61.
        let fused = fuse(&ids(&["x", "y"]), &ids(&["z", "y"]));
        assert_eq!(fused[0].0, "y");
        assert!((fused[0].1 - 2.0 / 62.0).abs() < 1e-12);
        assert!(fuse(&[], &[]).is_empty());
    }

    #[test]
    fn passage_snippets_mark_query_words_and_escape_the_rest() {
        let words = query_words("The Horse's <b>saddle</b>");
        assert_eq!(words, ["horse", "saddle"], "single letters are not marked");
        let snippet = passage_snippet(
            "A <saddle> for a horse & rider.",
            &query_words("saddle horse"),
        );
        assert_eq!(
            snippet,
            "A &lt;<mark>saddle</mark>&gt; for a <mark>horse</mark> &amp; rider."
        );
        let long: String = (0..100).map(|i| format!("w{i} ")).collect();
        let snippet = passage_snippet(&long, &query_words("w50"));
        assert!(snippet.starts_with("… w42 "), "{snippet}");
        assert!(snippet.contains("<mark>w50</mark>"));
        assert!(snippet.ends_with(" …"));
        assert_eq!(passage_snippet("x\u{E000}y", &[]), "xy");
    }
}
