//! Reading an OKF bundle out of the database a page at a time. [`OkfWalk`] yields one
//! rendered concept at a time: it pages through the distinct Dewey codes in use, and for each
//! code reads the metadata of the documents filed under it (ids, titles, filenames, tags: no
//! texts) to give them unique slugs and `## Related` links, then reads one cleaned text per
//! concept it yields. Only the current code's metadata and the index entries (paths and
//! titles) are held. Skipped documents are read by their own keyset-paged query.
//!
//! A concept's slug is decided among *all* processed documents with its code, whatever the
//! filter, so `GET /documents/{id}/okf` and every bundle put a document at the same path.

use std::collections::{BTreeMap, VecDeque};

use sea_orm::DatabaseConnection;
use serde::Serialize;
use shelf_documents::catalog::{
    ConceptFilter, concept_codes, concept_count, concept_members, unprocessed_page,
};
use shelf_documents::{Document, TEXT_KIND_CLEANED, dewey, find_document, latest_succeeded_text};
// A concept's text is a cleaned text of a run whose work stands: one that succeeded or that a
// succeeded retry replayed (the walk then reads the exact text with `succeeded_run_ids`,
// which follows whole retry chains).
use shelf_engine::subject_sql::{run_succeeded_or_replayed, succeeded_run_ids};

use super::OKF_VERSION;
use super::render::{
    ConceptInput, INDEX_FILE, IndexBuilder, MAX_RELATED, RelatedLink, assign_slugs, base_slug,
    concept_dir, render_concept,
};
use crate::error::AppError;
use crate::shelf::Shelf;

/// Codes read per query while walking.
const CODE_PAGE: u64 = 200;
/// Skipped documents read per query.
pub const SKIPPED_PAGE: u64 = 500;
/// At most this many documents with an unusable code are reported by one walk.
const MAX_INVALID: usize = 1000;

/// Which documents a bundle holds.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OkfFilter {
    /// Plain string prefix of the Dewey code (`636` matches `636` and `636.1`). Unclassified
    /// documents never match a prefix.
    pub classification_prefix: Option<String>,
    /// Only documents carrying this tag (ASCII case-insensitive).
    pub tag: Option<String>,
    /// At most this many concepts; `None` for all (the CLI, which streams them to disk).
    pub limit: Option<u64>,
}

/// One file of a bundle, its path relative to the bundle root.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct OkfFile {
    pub path: String,
    pub content: String,
}

/// Why a document is not in a bundle. The API serves it as it is, as `OkfSkipReasonOut`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
#[schema(as = OkfSkipReasonOut, description = "Why a document is not in the bundle.")]
pub enum SkipReason {
    /// No run has written a cleaned text yet.
    NoCleanedOutput,
    /// Cleaned, but not classified.
    NoClassification,
    /// The stored code is not a Dewey code, so it has no folder.
    InvalidClassification,
}

// A document left out of a bundle. The API serves it as it is, as the `OkfSkippedOut`
// schema, so its doc comments are that schema's text: this one is a plain comment because the
// published schema has no description.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[schema(as = OkfSkippedOut)]
pub struct OkfSkipped {
    pub document_id: String,
    pub filename: String,
    pub reason: SkipReason,
}

/// A rendered concept with what the index needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OkfConcept {
    pub document_id: String,
    pub title: String,
    pub file: OkfFile,
}

/// The JSON bundle of `GET /export/okf`, served as it is (as `OkfBundleOut`): these doc
/// comments are the published schema's text.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
#[schema(as = OkfBundleOut, description = "An OKF v0.1 bundle.")]
pub struct OkfBundle {
    /// `0.1`.
    pub okf_version: &'static str,
    /// RFC 3339, also in the root `index.md`.
    pub generated_at: String,
    /// Concept files in `files` (index files not counted).
    pub concepts: u64,
    /// Path → content: concept files and an `index.md` per folder (the root's carries
    /// `okf_version`).
    pub files: BTreeMap<String, String>,
    /// Ids of matching documents left out (no cleaned output or no classification), newest
    /// first, at most `limit`.
    pub skipped: Vec<String>,
    /// The same documents with filename and reason.
    pub skipped_documents: Vec<OkfSkipped>,
    /// True when `limit` left matching concepts or skipped documents out.
    pub truncated: bool,
}

impl OkfFilter {
    /// The filter as the documents catalog takes it.
    fn concepts(&self) -> ConceptFilter<'_> {
        ConceptFilter {
            classification_prefix: self.classification_prefix.as_deref(),
            tag: self.tag.as_deref(),
        }
    }
}

fn has_tag(tags: &[String], tag: &str) -> bool {
    tags.iter().any(|t| t.eq_ignore_ascii_case(tag))
}

/// A processed document filed under the code being walked.
#[derive(Debug, Clone)]
struct Member {
    id: String,
    filename: String,
    title: Option<String>,
    tags: Vec<String>,
    slug: String,
}

impl Member {
    fn display_title(&self) -> String {
        concept_title(self.title.as_deref(), &self.filename)
    }
}

/// A concept's title: the classifier's, else the source filename.
fn concept_title(title: Option<&str>, filename: &str) -> String {
    title
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .unwrap_or(filename)
        .to_string()
}

/// Every processed document (cleaned output and this code) filed under `code`, newest first,
/// with its unique slug.
async fn group(db: &DatabaseConnection, code: &str) -> Result<Vec<Member>, AppError> {
    let mut members: Vec<Member> = concept_members(db, code, run_succeeded_or_replayed)
        .await?
        .into_iter()
        .map(|m| Member {
            slug: base_slug(m.title.as_deref(), &m.filename),
            id: m.id,
            filename: m.filename,
            title: m.title,
            tags: m.tags,
        })
        .collect();
    let pairs: Vec<(String, String)> = members
        .iter()
        .map(|m| (m.id.clone(), m.slug.clone()))
        .collect();
    let slugs = assign_slugs(&pairs);
    for m in &mut members {
        if let Some(slug) = slugs.get(&m.id) {
            m.slug.clone_from(slug);
        }
    }
    Ok(members)
}

/// Related links for `members[i]`: the others, newest first, bounded.
fn related(members: &[Member], i: usize) -> Vec<RelatedLink> {
    members
        .iter()
        .enumerate()
        .filter(|(j, _)| *j != i)
        .take(MAX_RELATED)
        .map(|(_, m)| RelatedLink {
            title: m.display_title(),
            slug: m.slug.clone(),
        })
        .collect()
}

fn concept_input(doc: &Document, code: &str, text: String) -> ConceptInput {
    ConceptInput {
        document_id: doc.id.clone(),
        title: concept_title(doc.title.as_deref(), &doc.filename),
        summary: doc.summary.clone(),
        tags: doc.tags.clone(),
        timestamp: doc.updated_at.clone(),
        dewey_code: code.to_string(),
        dewey_label: doc
            .classification_label
            .clone()
            .or_else(|| dewey::label(code).map(str::to_string))
            .unwrap_or_default(),
        source_filename: doc.filename.clone(),
        classification_confidence: doc.classification_confidence,
        text,
    }
}

/// Renders one planned concept; `None` when the document or its text vanished meanwhile.
async fn render(
    db: &DatabaseConnection,
    code: &str,
    slug: &str,
    related: &[RelatedLink],
    id: &str,
) -> Result<Option<OkfConcept>, AppError> {
    let Some(doc) = find_document(db, id).await? else {
        return Ok(None);
    };
    let Some(text) =
        latest_succeeded_text(db, id, TEXT_KIND_CLEANED, &succeeded_run_ids(id)).await?
    else {
        return Ok(None);
    };
    let Some(dir) = concept_dir(code) else {
        return Ok(None);
    };
    let input = concept_input(&doc, code, text.body);
    Ok(Some(OkfConcept {
        document_id: doc.id.clone(),
        title: input.title.clone(),
        file: OkfFile {
            path: format!("{dir}/{slug}.md"),
            content: render_concept(&input, related),
        },
    }))
}

struct Planned {
    id: String,
    code: String,
    slug: String,
    related: Vec<RelatedLink>,
}

/// Yields a bundle's concepts one by one, ordered by Dewey code, then newest first.
pub struct OkfWalk {
    db: DatabaseConnection,
    filter: OkfFilter,
    after_code: Option<String>,
    codes: VecDeque<String>,
    codes_exhausted: bool,
    planned: VecDeque<Planned>,
    index: IndexBuilder,
    planned_total: u64,
    truncated: bool,
    invalid: Vec<OkfSkipped>,
}

impl OkfWalk {
    pub fn new(db: DatabaseConnection, filter: OkfFilter) -> OkfWalk {
        OkfWalk {
            db,
            filter,
            after_code: None,
            codes: VecDeque::new(),
            codes_exhausted: false,
            planned: VecDeque::new(),
            index: IndexBuilder::new(),
            planned_total: 0,
            truncated: false,
            invalid: Vec::new(),
        }
    }

    /// The next concept, or `None` when the walk is done.
    pub async fn next(&mut self) -> Result<Option<OkfConcept>, AppError> {
        loop {
            if let Some(p) = self.planned.pop_front() {
                if let Some(concept) = render(&self.db, &p.code, &p.slug, &p.related, &p.id).await?
                {
                    self.index.add(&p.code, &p.slug, &concept.title);
                    return Ok(Some(concept));
                }
                continue;
            }
            let remaining = self
                .filter
                .limit
                .map_or(u64::MAX, |l| l.saturating_sub(self.planned_total));
            let Some(code) = self.next_code().await? else {
                return Ok(None);
            };
            if remaining == 0 {
                self.truncated = true;
                return Ok(None);
            }
            self.plan(code, remaining).await?;
        }
    }

    /// True when the limit left matching concepts out.
    pub fn truncated(&self) -> bool {
        self.truncated
    }

    /// Documents whose stored code is not a Dewey code (seen so far).
    pub fn invalid(&self) -> &[OkfSkipped] {
        &self.invalid
    }

    /// How many concepts were yielded.
    pub fn concepts(&self) -> u64 {
        self.index.concepts()
    }

    /// The `index.md` files of everything yielded, the root's first.
    pub fn finish(self, generated_at: &str, skipped: u64) -> Vec<OkfFile> {
        self.index
            .finish(generated_at, skipped)
            .into_iter()
            .map(|(path, content)| OkfFile { path, content })
            .collect()
    }

    async fn next_code(&mut self) -> Result<Option<String>, AppError> {
        if self.codes.is_empty() && !self.codes_exhausted {
            let codes = concept_codes(
                &self.db,
                &self.filter.concepts(),
                self.after_code.as_deref(),
                CODE_PAGE,
                run_succeeded_or_replayed,
            )
            .await?;
            self.codes_exhausted = (codes.len() as u64) < CODE_PAGE;
            self.codes.extend(codes);
            if let Some(last) = self.codes.back() {
                self.after_code = Some(last.clone());
            }
        }
        Ok(self.codes.pop_front())
    }

    async fn plan(&mut self, code: String, remaining: u64) -> Result<(), AppError> {
        let members = group(&self.db, &code).await?;
        let matching: Vec<Member> = members
            .into_iter()
            .filter(|m| {
                self.filter
                    .tag
                    .as_deref()
                    .is_none_or(|t| has_tag(&m.tags, t))
            })
            .collect();
        if !dewey::is_valid_code(&code) {
            for m in matching {
                if self.invalid.len() < MAX_INVALID {
                    self.invalid.push(OkfSkipped {
                        document_id: m.id,
                        filename: m.filename,
                        reason: SkipReason::InvalidClassification,
                    });
                }
            }
            return Ok(());
        }
        let take = usize::try_from(remaining).unwrap_or(usize::MAX);
        if matching.len() > take {
            self.truncated = true;
        }
        let chosen: Vec<Member> = matching.into_iter().take(take).collect();
        for (i, m) in chosen.iter().enumerate() {
            self.planned.push_back(Planned {
                id: m.id.clone(),
                code: code.clone(),
                slug: m.slug.clone(),
                related: related(&chosen, i),
            });
        }
        self.planned_total += chosen.len() as u64;
        Ok(())
    }
}

/// Keyset position in the skipped listing: `(created_at, id)` of the last row read.
pub type SkippedCursor = (String, String);

/// A page of the documents the filter matches that cannot be concepts, newest first.
pub async fn skipped_page(
    db: &DatabaseConnection,
    filter: &OkfFilter,
    after: Option<&SkippedCursor>,
    limit: u64,
) -> Result<(Vec<OkfSkipped>, Option<SkippedCursor>), AppError> {
    let rows = unprocessed_page(
        db,
        &filter.concepts(),
        after.map(|(created_at, id)| (created_at.as_str(), id.as_str())),
        limit,
        run_succeeded_or_replayed,
    )
    .await?;
    let mut out = Vec::with_capacity(rows.len());
    let mut cursor = None;
    for row in rows {
        out.push(OkfSkipped {
            document_id: row.id.clone(),
            filename: row.filename,
            reason: if row.cleaned {
                SkipReason::NoClassification
            } else {
                SkipReason::NoCleanedOutput
            },
        });
        cursor = Some((row.created_at, row.id));
    }
    Ok((out, cursor))
}

/// How many concepts the filter matches (before `limit`), for progress.
pub async fn count(db: &DatabaseConnection, filter: &OkfFilter) -> Result<u64, AppError> {
    Ok(concept_count(db, &filter.concepts(), run_succeeded_or_replayed).await?)
}

impl Shelf {
    /// One document's concept at its bundle path. `NotFound` when the document is missing or
    /// unprocessed (no cleaned output, no classification, or a code that is not Dewey).
    pub async fn okf_concept(&self, id: &str) -> Result<OkfFile, AppError> {
        let doc = find_document(&self.db, id)
            .await?
            .ok_or_else(|| AppError::NotFound(format!("Document not found: {id}")))?;
        let unprocessed = || {
            AppError::NotFound(format!(
                "Document {id} has no OKF concept yet: it needs a cleaned output and a classification"
            ))
        };
        let code = doc
            .classification
            .clone()
            .filter(|c| dewey::is_valid_code(c))
            .ok_or_else(unprocessed)?;
        let members = group(&self.db, &code).await?;
        let i = members
            .iter()
            .position(|m| m.id == doc.id)
            .ok_or_else(unprocessed)?;
        let related = related(&members, i);
        let slug = members[i].slug.clone();
        render(&self.db, &code, &slug, &related, id)
            .await?
            .map(|c| c.file)
            .ok_or_else(unprocessed)
    }

    /// A bundle in memory, for the API: at most `filter.limit` concepts (the caller bounds
    /// it) and as many skipped documents, plus every `index.md`.
    pub async fn okf_bundle(&self, filter: OkfFilter) -> Result<OkfBundle, AppError> {
        let limit = filter.limit.unwrap_or(100);
        let mut walk = OkfWalk::new(self.db.clone(), filter.clone());
        let mut files = BTreeMap::new();
        while let Some(concept) = walk.next().await? {
            files.insert(concept.file.path, concept.file.content);
        }
        let (mut skipped, _) =
            skipped_page(&self.db, &filter, None, limit.saturating_add(1)).await?;
        let mut truncated = walk.truncated() || skipped.len() as u64 > limit;
        skipped.truncate(usize::try_from(limit).unwrap_or(usize::MAX));
        for s in walk.invalid() {
            if skipped.len() as u64 >= limit {
                truncated = true;
                break;
            }
            skipped.push(s.clone());
        }
        let generated_at = shelf_documents::now_timestamp();
        let concepts = walk.concepts();
        for index in walk.finish(&generated_at, skipped.len() as u64) {
            files.insert(index.path, index.content);
        }
        debug_assert!(files.contains_key(INDEX_FILE));
        Ok(OkfBundle {
            okf_version: OKF_VERSION,
            generated_at,
            concepts,
            files,
            skipped: skipped.iter().map(|s| s.document_id.clone()).collect(),
            skipped_documents: skipped,
            truncated,
        })
    }

    /// How many concepts `filter` matches before its limit.
    pub async fn okf_count(&self, filter: &OkfFilter) -> Result<u64, AppError> {
        count(&self.db, filter).await
    }

    /// A page of skipped documents (see [`skipped_page`]).
    pub async fn okf_skipped(
        &self,
        filter: &OkfFilter,
        after: Option<&SkippedCursor>,
        limit: u64,
    ) -> Result<(Vec<OkfSkipped>, Option<SkippedCursor>), AppError> {
        skipped_page(&self.db, filter, after, limit).await
    }

    /// A walk over `filter`'s concepts, for streaming them somewhere.
    pub fn okf_walk(&self, filter: OkfFilter) -> OkfWalk {
        OkfWalk::new(self.db.clone(), filter)
    }
}
