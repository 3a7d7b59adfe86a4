//! The document domain of Shelf: stored documents and their files, texts produced by runs,
//! the full-text search index and search, filename normalization, accepted formats, and the
//! built-in Dewey labels.
//!
//! Choices this crate makes, stated here because no other document fixes them:
//! - Search terms are ANDed. When that matches nothing and the query has several terms,
//!   [`MatchMode::Auto`] (the default) retries with any term (BM25 ranks documents matching
//!   more terms first) and says so in `match_mode`; `MatchMode::All` never relaxes, and
//!   neither does `phrase: true`.
//! - `created_after`/`created_before` are inclusive; a bare date means midnight UTC; a
//!   date-time without offset is UTC.
//! - `classification_prefix` is a plain string prefix (`636` matches `636` and `636.1`, `6`
//!   matches the whole class).
//! - A name that is only an extension (`.txt`) normalizes to `document.txt`.
//! - Deleting a document whose upload boundary is symlinked is refused before anything is
//!   removed, so no file is orphaned.

pub mod catalog;
pub mod citations;
pub mod codes;
pub mod dewey;
pub mod error;
pub mod extractions;
pub mod filename;
pub mod filter;
pub mod formats;
pub mod ids;
pub mod index;
pub mod model;
pub mod pages;
pub mod passages;
mod paths;
pub mod retention;
pub mod search;
mod sql;
pub mod store;
pub mod texts;

pub use catalog::{document_exists, stored_classifications};
pub use citations::{CitationStrategy, TranscriptCitation, cite};
pub use codes::{ErrorCode, HttpStatus};
pub use error::{DocumentsError, ErrorKind, Result};
pub use extractions::{
    cache_extraction, cache_extraction_statement, cached_extraction, put_segments_statements,
    segments,
};
pub use filename::{extension_of, normalize_filename, stem_of};
pub use filter::{DocumentFilter, DocumentFilterText};
pub use formats::{
    Format, Identified, Kind, check_extension, check_upload_head, check_upload_prefix, format_for,
    identify, is_archive_extension, sniff_archive,
};
pub use ids::{document_id, is_document_id, is_sha256_hex, sha256_file, sha256_hex};
pub use index::{
    document_pk, index_document, index_document_in, index_statements, remove_from_index,
    remove_statement,
};
pub use model::{Deleted, Document, DocumentResults, DocumentStatus, Ingested, SourceKind};
pub use pages::{ListedPage, PageListing, PageRecord, PageSource, PageSummary};
pub use passages::{
    OVERLAP_TOKENS, PASSAGE_TOKENS, Passage, PassageCounts, StoredPassage,
    delete_passages_statement, document_passages, passage_counts, put_passages,
    put_passages_statements, split_passages, split_transcript, stale_documents,
};
pub use paths::{DataDir, STAGING_DIR, TRASH_DIR, UPLOADS_DIR};
pub use retention::{PrunedRunOf, pruned_run_statements};
pub use search::{
    FacetCount, MatchMode, NormalizedQuery, QueryVector, STOP_WORDS, SearchBody, SearchFacets,
    SearchHit, SearchIds, SearchMode, SearchPage, SearchRequest, SearchScope, normalize_query,
    parse_timestamp, search_facets, search_ids, search_results, similar_documents,
};
/// A transcript cue as [`segments`] returns it.
pub use shelf_extractors::Segment;
pub use sql::{format_timestamp, lock_document_statement, now_timestamp};
pub use store::{
    DocumentStore, check_upload_filename, delete_statements, find_document, set_results,
    set_results_statement, status_after_unsuccessful_run_statement, status_statement,
};
pub use texts::{
    ContentPage, TEXT_KIND_CLEANED, TEXT_KIND_INDEXED_CLEANED, TEXT_KIND_INDEXED_RAW,
    TEXT_KIND_RAW, TextRecord, content_page, get_text, latest_succeeded_text, latest_text,
    put_text, put_text_statement, text_chars,
};
