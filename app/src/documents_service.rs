//! The document operations the API adds to [`Shelf`]: listing, lookup, deletion, bounded
//! content pages, page records, uploads, facets, the classification table and the audit trail. Thin calls
//! into the document store, so the CLI can use the same ones.

use std::collections::BTreeMap;

use shelf_documents::pages::page_listing;
use shelf_documents::{
    ContentPage, Deleted, Document, DocumentFilter, PageListing, SearchFacets, SearchRequest,
    content_page, dewey, stored_classifications,
};
use shelf_engine::subject_sql::{delete_runs_of, run_created_order, succeeded_run_ids};

use crate::audit::{self, AuditPage, DenialEvent};
use crate::error::AppError;
use crate::shelf::Shelf;
use crate::uploads::{UploadError, UploadSink};

impl Shelf {
    /// A page of the documents `filter` lets through, newest first, with their total count.
    pub async fn list_documents(
        &self,
        filter: &DocumentFilter,
        limit: u64,
        offset: u64,
    ) -> Result<(Vec<Document>, u64), AppError> {
        Ok(self.documents.list(filter, limit, offset).await?)
    }

    pub async fn document(&self, id: &str) -> Result<Document, AppError> {
        Ok(self.documents.get(id).await?)
    }

    /// Deletes a document, its runs, texts and index rows, and the upload files it owns.
    pub async fn delete_document(&self, id: &str) -> Result<Deleted, AppError> {
        Ok(self.documents.delete(id, delete_runs_of(id)).await?)
    }

    /// A page of the latest cleaned output. Without `limit`, and never more than,
    /// `SHELF_API_MAX_CONTENT_CHARS` characters: the full text is an export's job.
    pub async fn content(
        &self,
        id: &str,
        offset: u64,
        limit: Option<u64>,
    ) -> Result<ContentPage, AppError> {
        let cap = self.settings.api.max_content_chars as u64;
        let limit = limit.map_or(cap, |l| l.min(cap));
        Ok(content_page(&self.db, id, offset, limit, &succeeded_run_ids(id)).await?)
    }

    /// The page records of the document's latest run that recorded pages (text omitted, its
    /// length given), `limit` of them from `offset`, optionally only failed pages and pages
    /// with an error or warnings. The caller bounds `limit`.
    pub async fn pages(
        &self,
        id: &str,
        limit: u64,
        offset: u64,
        failures_only: bool,
    ) -> Result<PageListing, AppError> {
        Ok(page_listing(
            &self.db,
            id,
            limit,
            offset,
            failures_only,
            run_created_order,
        )
        .await?)
    }

    /// Starts an upload capped at `SHELF_API_MAX_UPLOAD_BYTES`; the filename is checked now.
    /// Refused while a volume is below `SHELF_MIN_FREE_BYTES`.
    pub fn begin_upload(&self, filename: &str) -> Result<UploadSink, UploadError> {
        self.admit_new_work()?;
        UploadSink::begin(
            self.documents.clone(),
            filename,
            self.settings.api.max_upload_bytes,
        )
    }

    pub async fn search_facets(
        &self,
        request: &SearchRequest,
        facet_limit: Option<u64>,
    ) -> Result<SearchFacets, AppError> {
        let request = self.with_query_vector(request).await?;
        Ok(shelf_documents::search_facets(&self.db, &request, facet_limit).await?)
    }

    /// Documents nearest to `id` by meaning (its passages against theirs, with this process's
    /// embedding model), nearest first; `embedding_unavailable` without a model.
    pub async fn similar_documents(
        &self,
        id: &str,
        limit: u64,
    ) -> Result<Vec<shelf_documents::SearchHit>, AppError> {
        let Some(embeddings) = &self.embeddings else {
            return Err(AppError::Documents(
                shelf_documents::DocumentsError::EmbeddingUnavailable,
            ));
        };
        Ok(shelf_documents::similar_documents(&self.db, id, embeddings.identity(), limit).await?)
    }

    /// The built-in Dewey classes and divisions, plus every finer code a classifier wrote to a
    /// document (with its stored label).
    pub async fn classifications(&self) -> Result<BTreeMap<String, String>, AppError> {
        let mut all = dewey::all();
        for (code, stored) in stored_classifications(&self.db).await? {
            if all.contains_key(&code) || !dewey::is_valid_code(&code) {
                continue;
            }
            if let Some(label) = stored.or_else(|| dewey::label(&code).map(str::to_string)) {
                all.insert(code, label);
            }
        }
        Ok(all)
    }

    /// Stores denied requests, pruning rows past `SHELF_API_AUDIT_RETENTION_DAYS`.
    pub async fn record_denials(&self, events: &[DenialEvent]) -> Result<(), AppError> {
        audit::record(&self.db, events, self.settings.api.audit_retention_days).await
    }

    /// A page of audit rows, newest first.
    pub async fn audit_events(&self, limit: u64, offset: u64) -> Result<AuditPage, AppError> {
        audit::list(&self.db, limit, offset).await
    }
}
