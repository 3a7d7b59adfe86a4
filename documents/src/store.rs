//! The document store: content-addressed ingest of uploads and in-place imports, lookup,
//! listing, deletion with owned-file cleanup, and the statements that update a document's
//! status and classifier results.

use shelf_db::Database;
use shelf_db::SqlFragment;
use shelf_db::sql::SqlExt;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use sea_orm::{ConnectionTrait, DatabaseConnection, QueryResult, Statement, Value};

use crate::dewey;
use crate::error::{DocumentsError, Result};
use crate::filename::{extension_of, normalize_filename};
use crate::filter::DocumentFilter;
use crate::formats::{check_extension, identify};
use crate::ids::is_document_id;
use crate::ids::{SNIFF_BYTES, document_id, is_sha256_hex, sha256_reader};
use crate::model::{Deleted, Document, DocumentResults, DocumentStatus, Ingested, SourceKind};
use crate::paths::{
    DataDir, PAGE_IMAGES_DIR, STAGING_DIR, TRASH_DIR, UPLOADS_DIR, blocking, check_no_symlinks,
    check_no_symlinks_now, join_all, owned_upload_components,
};
use crate::sql::{
    begin_immediate, get_u64, lock_document, lock_document_statement, now_timestamp, stmt, to_i64,
};

/// Columns of `documents` read into a [`Document`].
const DOCUMENT_COLUMNS: &str = "pk, id, filename, extension, sha256, byte_size, storage_path, \
     source_kind, status, classification, classification_label, classification_confidence, \
     title, summary, tags, suggested_stem, created_at, updated_at";

/// Documents in the database plus their files under the data directory.
#[derive(Debug, Clone)]
pub struct DocumentStore {
    pub db: DatabaseConnection,
    pub data_dir: PathBuf,
    /// The write path of uploads (on a SQLite file, the writer thread, started by the first).
    database: Database,
}

impl DocumentStore {
    /// A store over a migrated database and a data directory.
    pub fn new(db: DatabaseConnection, data_dir: impl Into<PathBuf>) -> Self {
        Self {
            database: Database::new(db.clone()),
            db,
            data_dir: data_dir.into(),
        }
    }

    /// `<data_dir>/uploads`.
    pub fn uploads_dir(&self) -> PathBuf {
        DataDir::new(&self.data_dir).uploads()
    }

    /// `<data_dir>/uploads/.staging`, where callers write incoming uploads.
    pub fn staging_dir(&self) -> PathBuf {
        DataDir::new(&self.data_dir).staging()
    }

    /// `<data_dir>/page-images/<id>`, where OCR keeps a document's page images.
    pub fn page_images_dir(&self, id: &str) -> PathBuf {
        DataDir::new(&self.data_dir).document_page_images(id)
    }

    /// Creates a document's page-image directory and returns it, refusing (`InvalidPath`) an
    /// id that is not a document id and a symlinked `page-images` or `page-images/<id>`,
    /// before and after creating it.
    pub async fn create_page_images_dir(&self, id: &str) -> Result<PathBuf> {
        if !is_document_id(id) {
            return Err(DocumentsError::InvalidPath {
                detail: "not a document id".into(),
            });
        }
        check_no_symlinks(&self.data_dir, &[PAGE_IMAGES_DIR, id]).await?;
        let dir = self.page_images_dir(id);
        tokio::fs::create_dir_all(&dir).await?;
        check_no_symlinks(&self.data_dir, &[PAGE_IMAGES_DIR, id]).await?;
        Ok(dir)
    }

    /// Creates the staging directory after checking that neither it nor `uploads` is a
    /// symlink, and returns a fresh, unused path in it for one incoming upload.
    pub async fn new_staging_path(&self) -> Result<PathBuf> {
        let store = self.clone();
        blocking(move || store.new_staging_path_now()).await
    }

    /// [`new_staging_path`](Self::new_staging_path) on the calling thread (for code already on
    /// the blocking pool).
    pub fn new_staging_path_now(&self) -> Result<PathBuf> {
        check_no_symlinks_now(&self.data_dir, &[UPLOADS_DIR, STAGING_DIR])?;
        let dir = self.staging_dir();
        std::fs::create_dir_all(&dir)?;
        check_no_symlinks_now(&self.data_dir, &[UPLOADS_DIR, STAGING_DIR])?;
        Ok(dir.join(format!("upload-{:016x}.part", fastrand::u64(..))))
    }

    /// Ingests an upload the caller already wrote under `<data_dir>/uploads/.staging/`.
    ///
    /// Validates the extension and the first 8 KiB, then either returns the existing
    /// document with identical bytes (`duplicate: true`, the staged file is deleted) or moves
    /// the file to `<data_dir>/uploads/<id>/<normalized filename>` and inserts the row. On any
    /// failure the staged file is deleted and no row or stored file is left behind.
    pub async fn ingest_upload(
        &self,
        staged: &Path,
        filename: &str,
        sha256_hex: &str,
        byte_size: u64,
    ) -> Result<Ingested> {
        // On a task of its own, not in the caller's future: a request dropped between the
        // file's move and the row's commit (a client that went away) would otherwise leave the
        // moved file without a row, or the staged file behind. Detached, the ingest ends one
        // way or the other, with its cleanup.
        let (store, staged) = (self.clone(), staged.to_path_buf());
        let (filename, sha256_hex) = (filename.to_string(), sha256_hex.to_string());
        let task = tokio::spawn(async move {
            let outcome = store
                .ingest_upload_inner(&staged, &filename, &sha256_hex, byte_size)
                .await;
            let keep_staged = matches!(&outcome, Ok(ingested) if !ingested.duplicate);
            if !keep_staged {
                remove_file_if_exists(&staged).await;
            }
            outcome
        });
        task.await.map_err(|e| {
            DocumentsError::Io(std::io::Error::other(format!(
                "the upload's ingest task ended: {e}"
            )))
        })?
    }

    async fn ingest_upload_inner(
        &self,
        staged: &Path,
        filename: &str,
        sha256_hex: &str,
        byte_size: u64,
    ) -> Result<Ingested> {
        let name = normalize_filename(filename);
        let extension = extension_of(&name);
        check_extension(extension.as_deref())?;

        if byte_size == 0 {
            return Err(DocumentsError::EmptyFile);
        }
        if !is_sha256_hex(sha256_hex) {
            return Err(DocumentsError::corrupt(
                "upload digest is not a SHA-256 hex",
            ));
        }
        let sha256 = sha256_hex.to_ascii_lowercase();
        let id = document_id(&sha256);
        // The staged file's checks in one trip to the blocking pool; they say what it is.
        let format = {
            let (staged, data_dir, id, name) = (
                staged.to_path_buf(),
                self.data_dir.clone(),
                id.clone(),
                name.clone(),
            );
            blocking(move || {
                let meta = std::fs::symlink_metadata(&staged)?;
                if meta.file_type().is_symlink() || !meta.is_file() {
                    return Err(DocumentsError::InvalidPath {
                        detail: "staged upload is not a regular file".into(),
                    });
                }
                if meta.len() != byte_size {
                    return Err(DocumentsError::corrupt(format!(
                        "staged upload has {} bytes, caller said {byte_size}",
                        meta.len()
                    )));
                }
                let found = identify(extension.as_deref(), &read_head_now(&staged)?, &staged)?;
                check_no_symlinks_now(&data_dir, &[UPLOADS_DIR, &id, &name])?;
                Ok(found.format)
            })
            .await
        }?;

        // The duplicate check, the file's move into its directory and the row, as one write
        // transaction (on SQLite one hand-off to the writer thread); the document is read back
        // once it has committed.
        let doc_dir = join_all(&self.data_dir, &[UPLOADS_DIR, &id]);
        let now = now_timestamp();
        let storage_path = format!("{UPLOADS_DIR}/{id}/{name}");
        let insert = NewDocument {
            id: &id,
            filename: &name,
            extension: format.extension,
            sha256: &sha256,
            byte_size,
            storage_path: &storage_path,
            source_kind: SourceKind::Upload,
            created_at: &now,
        }
        .insert_statement();
        let lock = lock_document_statement(self.database.backend(), &id);
        let exists = stmt("SELECT 1 FROM documents WHERE id = ?", [id.clone().into()]);
        // Set once the row is known not to exist: from then on the directory is this upload's.
        let ours = Arc::new(AtomicBool::new(false));
        let inserted = {
            let (data_dir, staged, ours) =
                (self.data_dir.clone(), staged.to_path_buf(), ours.clone());
            let (id, name) = (id.clone(), name.clone());
            self.database
                .write(move |tx| {
                    Box::pin(async move {
                        if let Some(lock) = &lock {
                            tx.execute(lock).await?;
                        }
                        if tx.query_i64(&exists).await?.is_some() {
                            return Ok(false);
                        }
                        ours.store(true, Ordering::SeqCst);
                        // A rename and a directory, under the write lock: brief, and on
                        // SQLite on the writer thread (see `Database::write`).
                        place_upload_now(&data_dir, &id, &name, &staged)?;
                        tx.execute(&insert).await?;
                        Ok::<_, DocumentsError>(true)
                    })
                })
                .await
        };
        let outcome = match inserted {
            Ok(inserted) => find_document(&self.db, &id)
                .await
                .and_then(|found| {
                    found.ok_or_else(|| DocumentsError::corrupt("inserted document vanished"))
                })
                .map(|document| Ingested {
                    document,
                    duplicate: !inserted,
                }),
            Err(err) => Err(err),
        };
        if outcome.is_err() && ours.load(Ordering::SeqCst) {
            discard_upload_dir(&doc_dir, &id).await;
        }
        outcome
    }

    /// Ingests a local file in place (no copy): `source_kind = "import"`, `storage_path` the
    /// canonical absolute path. Refuses symlinks and anything but a regular file; hashes the
    /// file streaming; validates and deduplicates like [`ingest_upload`](Self::ingest_upload).
    /// The caller checks that `path` lies under the import root.
    pub async fn ingest_path(&self, path: &Path) -> Result<Ingested> {
        let meta = match tokio::fs::symlink_metadata(path).await {
            Ok(meta) => meta,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
                return Err(DocumentsError::InvalidPath {
                    detail: "file does not exist".into(),
                });
            }
            Err(err) => return Err(err.into()),
        };
        if meta.file_type().is_symlink() {
            return Err(DocumentsError::InvalidPath {
                detail: "file is a symlink".into(),
            });
        }
        if !meta.is_file() {
            return Err(DocumentsError::InvalidPath {
                detail: "not a regular file".into(),
            });
        }
        let raw_name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let name = normalize_filename(&raw_name);
        let extension = extension_of(&name);
        check_extension(extension.as_deref())?;

        let canonical = tokio::fs::canonicalize(path).await?;
        let Some(storage_path) = canonical.to_str().map(str::to_owned) else {
            return Err(DocumentsError::InvalidPath {
                detail: "path is not valid UTF-8".into(),
            });
        };
        let digest = {
            let canonical = canonical.clone();
            tokio::task::spawn_blocking(move || {
                let file = std::fs::File::open(&canonical)?;
                if !file.metadata()?.is_file() {
                    return Err(std::io::Error::other("not a regular file"));
                }
                sha256_reader(file)
            })
            .await
            .map_err(|err| DocumentsError::corrupt(format!("hash task failed: {err}")))??
        };
        // Checked on the bytes hashed, not the metadata read earlier: the file may have changed.
        if digest.byte_size == 0 {
            return Err(DocumentsError::EmptyFile);
        }
        let format = identify_blocking(extension, digest.head, &canonical).await?;

        let id = document_id(&digest.sha256_hex);
        let txn = begin_immediate(&self.db).await?;
        lock_document(&txn, &id).await?;
        if let Some(existing) = find_document(&txn, &id).await? {
            txn.rollback().await?;
            return Ok(Ingested {
                document: existing,
                duplicate: true,
            });
        }
        let now = now_timestamp();
        let row = NewDocument {
            id: &id,
            filename: &name,
            extension: format.extension,
            sha256: &digest.sha256_hex,
            byte_size: digest.byte_size,
            storage_path: &storage_path,
            source_kind: SourceKind::Import,
            created_at: &now,
        };
        let document = row.insert(&txn).await?;
        txn.commit().await?;
        Ok(Ingested {
            document,
            duplicate: false,
        })
    }

    /// The path of a document's bytes, after checking the file is still a regular file of
    /// the recorded size (`SourceChanged` otherwise). Owned uploads are also checked against
    /// the `uploads/<id>/` boundary.
    pub async fn open_source(&self, doc: &Document) -> Result<PathBuf> {
        let path = match doc.source_kind {
            SourceKind::Upload => {
                let Some(components) = owned_upload_components(&doc.id, &doc.storage_path) else {
                    return Err(DocumentsError::corrupt(format!(
                        "document {} has an invalid storage path",
                        doc.id
                    )));
                };
                check_no_symlinks(&self.data_dir, &components).await?;
                join_all(&self.data_dir, &components)
            }
            SourceKind::Import => {
                let path = PathBuf::from(&doc.storage_path);
                let safe = path.is_absolute()
                    && path
                        .components()
                        .all(|c| matches!(c, Component::RootDir | Component::Normal(_)));
                if !safe {
                    return Err(DocumentsError::corrupt(format!(
                        "document {} has an invalid storage path",
                        doc.id
                    )));
                }
                path
            }
        };
        let changed = |detail: &str| DocumentsError::SourceChanged {
            id: doc.id.clone(),
            detail: detail.to_string(),
        };
        let meta = match tokio::fs::symlink_metadata(&path).await {
            Ok(meta) => meta,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
                return Err(changed("the source file is missing"));
            }
            Err(err) => return Err(err.into()),
        };
        if meta.file_type().is_symlink() || !meta.is_file() {
            return Err(changed("the source is no longer a regular file"));
        }
        if meta.len() != doc.byte_size {
            return Err(changed("the source file changed size"));
        }
        Ok(path)
    }

    /// One document (`NotFound` when absent).
    pub async fn get(&self, id: &str) -> Result<Document> {
        find_document(&self.db, id)
            .await?
            .ok_or_else(|| DocumentsError::NotFound { id: id.to_string() })
    }

    /// A page of the documents `filter` lets through, newest first (then by id), with their
    /// total count. A reversed window is `InvalidSearchWindow`.
    pub async fn list(
        &self,
        filter: &DocumentFilter,
        limit: u64,
        offset: u64,
    ) -> Result<(Vec<Document>, u64)> {
        filter.check()?;
        let (conditions, values) = filter.sql(self.db.get_database_backend());
        let sql = format!(
            "SELECT {DOCUMENT_COLUMNS} FROM documents d WHERE 1 = 1{conditions} \
             ORDER BY d.created_at DESC, d.id ASC LIMIT ? OFFSET ?"
        );
        let mut page_values = values.clone();
        page_values.extend([to_i64(limit).into(), to_i64(offset).into()]);
        let rows = self.db.query_all_sql(stmt(&sql, page_values)).await?;
        let documents = rows.iter().map(document_from_row).collect::<Result<_>>()?;
        let total = match self
            .db
            .query_one_sql(stmt(
                &format!("SELECT count(*) AS n FROM documents d WHERE 1 = 1{conditions}"),
                values,
            ))
            .await?
        {
            Some(row) => get_u64(&row, "n")?,
            None => 0,
        };
        Ok((documents, total))
    }

    /// Deletes a document with everything that depends on it, in one IMMEDIATE transaction:
    /// first `dependents` (other owners' statements removing rows that hang on the document:
    /// the app passes the engine's `subject_sql::delete_runs_of(id)`, so its runs, stages,
    /// parts and events go), then its search rows, texts, page records and the row itself. Owned upload files and kept page images are removed
    /// afterwards; their boundaries are checked first, so a symlinked `uploads` or
    /// `page-images` directory refuses the delete (`InvalidPath`) before anything is removed.
    /// Nothing is ever created for non-upload documents.
    pub async fn delete(&self, id: &str, dependents: Vec<Statement>) -> Result<Deleted> {
        let doc = self.get(id).await?;
        let owned = match doc.source_kind {
            SourceKind::Upload => {
                let Some(components) = owned_upload_components(&doc.id, &doc.storage_path) else {
                    return Err(DocumentsError::InvalidPath {
                        detail: "stored upload path is outside its uploads directory".into(),
                    });
                };
                check_no_symlinks(&self.data_dir, &components).await?;
                check_no_symlinks(&self.data_dir, &[UPLOADS_DIR, TRASH_DIR]).await?;
                true
            }
            SourceKind::Import => false,
        };
        // Every document may have page images; a symlinked boundary refuses the delete
        // before anything is removed, like the upload boundary.
        let page_images = is_document_id(id);
        if page_images {
            check_no_symlinks(&self.data_dir, &[PAGE_IMAGES_DIR, id]).await?;
        }

        let txn = begin_immediate(&self.db).await?;
        lock_document(&txn, id).await?;
        let Some(row) = txn
            .query_one_sql(stmt(
                "SELECT pk FROM documents WHERE id = ?",
                [id.to_string().into()],
            ))
            .await?
        else {
            txn.rollback().await?;
            return Err(DocumentsError::NotFound { id: id.to_string() });
        };
        let pk: i64 = row.try_get("", "pk")?;
        // The dependents first: run retention locks a document's runs, then deletes their
        // texts and page records; taking the locks in that same order here means the two wait
        // for each other instead of deadlocking on PostgreSQL.
        for statement in dependents.into_iter().chain(delete_statements(id, pk)) {
            txn.execute_sql(statement).await?;
        }

        // Move the owned directory aside while holding the write lock, so that a concurrent
        // re-upload of the same bytes (which waits for the lock) never loses its new file.
        let doc_dir = join_all(&self.data_dir, &[UPLOADS_DIR, id]);
        let mut trashed: Option<PathBuf> = None;
        if owned && path_exists(&doc_dir).await? {
            let trash_dir = join_all(&self.data_dir, &[UPLOADS_DIR, TRASH_DIR]);
            let aside = async {
                tokio::fs::create_dir_all(&trash_dir).await?;
                check_no_symlinks(&self.data_dir, &[UPLOADS_DIR, TRASH_DIR]).await?;
                let target = trash_dir.join(format!("{id}-{:016x}", fastrand::u64(..)));
                tokio::fs::rename(&doc_dir, &target).await?;
                Ok::<_, DocumentsError>(target)
            }
            .await;
            match aside {
                Ok(target) => trashed = Some(target),
                Err(err) => {
                    txn.rollback().await?;
                    return Err(err);
                }
            }
        }
        if let Err(err) = txn.commit().await {
            if let Some(target) = &trashed
                && let Err(restore) = tokio::fs::rename(target, &doc_dir).await
            {
                tracing::error!(document_id = %id, error = %restore, "restoring upload failed");
            }
            return Err(err.into());
        }

        if page_images && let Err(err) = remove_dir_all_if_exists(&self.page_images_dir(id)).await {
            tracing::warn!(document_id = %id, error = %err, "removing page images failed");
        }
        let removed_files = match trashed {
            Some(target) => match remove_dir_all_if_exists(&target).await {
                Ok(()) => true,
                Err(err) => {
                    tracing::warn!(document_id = %id, error = %err, "removing upload failed");
                    false
                }
            },
            None => false,
        };
        Ok(Deleted {
            id: id.to_string(),
            removed_files,
        })
    }

    /// Writes classifier results (see [`set_results`]).
    pub async fn set_results(&self, document_id: &str, results: &DocumentResults) -> Result<()> {
        set_results(&self.db, document_id, results).await
    }
}

/// The statements that remove a document and the rows of this crate depending on it (search
/// rows, texts, segments, page records, the row). Run them inside one transaction, after the
/// statements removing other owners' rows that hang on the document (its runs: see
/// [`DocumentStore::delete`] for the lock order).
pub fn delete_statements(document_id: &str, pk: i64) -> Vec<Statement> {
    vec![
        // The index first, while the texts it reads are there (the texts' own trigger would
        // take it out too, one text at a time).
        crate::index::remove_statement(pk),
        stmt(
            "DELETE FROM document_texts WHERE document_id = ?",
            [document_id.to_string().into()],
        ),
        stmt(
            "DELETE FROM document_segments WHERE document_id = ?",
            [document_id.to_string().into()],
        ),
        stmt(
            "DELETE FROM document_pages WHERE document_id = ?",
            [document_id.to_string().into()],
        ),
        crate::passages::delete_passages_statement(document_id),
        // The cache holds the document's text: it goes with the document.
        stmt(
            "DELETE FROM extraction_cache WHERE sha256 = (SELECT sha256 FROM documents WHERE pk = ?)",
            [pk.into()],
        ),
        stmt("DELETE FROM documents WHERE pk = ?", [pk.into()]),
    ]
}

/// One document by id, inside any connection or transaction.
pub async fn find_document(conn: &impl ConnectionTrait, id: &str) -> Result<Option<Document>> {
    let sql = format!("SELECT {DOCUMENT_COLUMNS} FROM documents WHERE id = ?");
    let row = conn
        .query_one_sql(stmt(&sql, [id.to_string().into()]))
        .await?;
    row.as_ref().map(document_from_row).transpose()
}

/// Writes classifier and summarizer results to a document (all result columns are replaced).
/// A missing label defaults to the built-in Dewey label of the code. `NotFound` when the
/// document does not exist. Composable into a caller's transaction.
pub async fn set_results(
    conn: &impl ConnectionTrait,
    document_id: &str,
    results: &DocumentResults,
) -> Result<()> {
    let updated = conn
        .execute_sql(set_results_statement(document_id, results)?)
        .await?;
    if updated.rows_affected() == 0 {
        return Err(DocumentsError::NotFound {
            id: document_id.to_string(),
        });
    }
    Ok(())
}

/// The `UPDATE` of [`set_results`], for a caller that commits it elsewhere (and knows the
/// document exists).
pub fn set_results_statement(document_id: &str, results: &DocumentResults) -> Result<Statement> {
    let code = results
        .classification_code
        .as_deref()
        .map(str::trim)
        .filter(|c| !c.is_empty());
    let label = results
        .classification_label
        .clone()
        .or_else(|| code.and_then(dewey::label).map(str::to_string));
    let tags = serde_json::to_string(&results.tags)
        .map_err(|err| DocumentsError::corrupt(format!("tags: {err}")))?;
    let confidence = results.classification_confidence.filter(|c| c.is_finite());
    Ok(stmt(
        "UPDATE documents SET classification = ?, classification_label = ?, \
         classification_confidence = ?, title = ?, summary = ?, tags = ?, \
         suggested_stem = ?, updated_at = ? WHERE id = ?",
        [
            code.map(str::to_string).into(),
            label.into(),
            confidence.into(),
            results.title.clone().into(),
            results.summary.clone().into(),
            tags.into(),
            results.suggested_stem.clone().into(),
            now_timestamp().into(),
            document_id.to_string().into(),
        ],
    ))
}

/// `UPDATE` setting a document's status (no-op for an unknown id).
pub fn status_statement(document_id: &str, status: DocumentStatus) -> Statement {
    stmt(
        "UPDATE documents SET status = ?, updated_at = ? WHERE id = ?",
        [
            status.as_str().into(),
            now_timestamp().into(),
            document_id.to_string().into(),
        ],
    )
}

/// `UPDATE` setting a document's status after a run of it failed or was canceled: the run
/// leaves the document as it was, so `ready` while an earlier run of it succeeded (its results
/// stand, and what reads the document reads that run), else `otherwise` (`failed` after a
/// failure, `ingested` after a cancel). `succeeded_before` is the condition "the document has
/// a succeeded run" (the engine's `subject_sql::has_succeeded_run(document_id)`), checked
/// inside this one statement.
pub fn status_after_unsuccessful_run_statement(
    document_id: &str,
    otherwise: DocumentStatus,
    succeeded_before: &SqlFragment,
) -> Statement {
    let mut update = SqlFragment::new("UPDATE documents SET status = CASE WHEN ", []);
    update.push_fragment(succeeded_before).push(
        " THEN 'ready' ELSE ? END, updated_at = ? WHERE id = ?",
        [
            otherwise.as_str().into(),
            now_timestamp().into(),
            document_id.to_string().into(),
        ],
    );
    update.into_statement()
}

struct NewDocument<'a> {
    id: &'a str,
    filename: &'a str,
    extension: &'a str,
    sha256: &'a str,
    byte_size: u64,
    storage_path: &'a str,
    source_kind: SourceKind,
    created_at: &'a str,
}

impl NewDocument<'_> {
    /// Inserts the row and reads it back in one statement.
    async fn insert(&self, conn: &impl ConnectionTrait) -> Result<Document> {
        let mut insert = self.insert_statement();
        insert.sql = format!("{} RETURNING {DOCUMENT_COLUMNS}", insert.sql);
        let row = conn
            .query_one_sql(insert)
            .await?
            .ok_or_else(|| DocumentsError::corrupt("inserted document vanished"))?;
        document_from_row(&row)
    }

    fn insert_statement(&self) -> Statement {
        let source_path: Option<String> = match self.source_kind {
            SourceKind::Import => Some(self.storage_path.to_string()),
            SourceKind::Upload => None,
        };
        stmt(
            "INSERT INTO documents (id, filename, extension, sha256, byte_size, storage_path, \
             source_kind, source_path, status, tags, created_at, updated_at) \
             VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, '[]', ?, ?)",
            [
                self.id.to_string().into(),
                self.filename.to_string().into(),
                self.extension.to_string().into(),
                self.sha256.to_string().into(),
                to_i64(self.byte_size).into(),
                self.storage_path.to_string().into(),
                self.source_kind.as_str().into(),
                Value::from(source_path),
                DocumentStatus::Ingested.as_str().into(),
                self.created_at.to_string().into(),
                self.created_at.to_string().into(),
            ],
        )
    }
}

pub(crate) fn document_from_row(row: &QueryResult) -> Result<Document> {
    let id: String = row.try_get("", "id")?;
    let status_text: String = row.try_get("", "status")?;
    let status = DocumentStatus::parse(&status_text)
        .map_err(|_| DocumentsError::corrupt(format!("document {id} has status {status_text}")))?;
    let kind_text: String = row.try_get("", "source_kind")?;
    let source_kind = SourceKind::parse(&kind_text).ok_or_else(|| {
        DocumentsError::corrupt(format!("document {id} has source kind {kind_text}"))
    })?;
    let tags_text: String = row.try_get("", "tags")?;
    let tags: Vec<String> = serde_json::from_str(&tags_text)
        .map_err(|err| DocumentsError::corrupt(format!("document {id} tags: {err}")))?;
    Ok(Document {
        pk: row.try_get("", "pk")?,
        filename: row.try_get("", "filename")?,
        status,
        byte_size: get_u64(row, "byte_size")?,
        created_at: row.try_get("", "created_at")?,
        updated_at: row.try_get("", "updated_at")?,
        classification: row.try_get("", "classification")?,
        classification_label: row.try_get("", "classification_label")?,
        classification_confidence: row.try_get("", "classification_confidence")?,
        title: row.try_get("", "title")?,
        summary: row.try_get("", "summary")?,
        tags,
        suggested_stem: row.try_get("", "suggested_stem")?,
        extension: row.try_get("", "extension")?,
        source_kind,
        sha256: row.try_get("", "sha256")?,
        storage_path: row.try_get("", "storage_path")?,
        id,
    })
}

/// Validates a filename before any byte of an upload is written: an archive's extension is
/// refused (`ArchiveNotSupported`). Returns the extension [`identify`] starts from.
pub fn check_upload_filename(raw: &str) -> Result<Option<String>> {
    let extension = extension_of(raw);
    check_extension(extension.as_deref())?;
    Ok(extension)
}

fn read_head_now(path: &Path) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    let mut head = Vec::with_capacity(SNIFF_BYTES);
    std::fs::File::open(path)?
        .take(SNIFF_BYTES as u64)
        .read_to_end(&mut head)?;
    Ok(head)
}

/// Renames, falling back to copy-and-remove across file systems.
/// Moves a file on the calling thread (for code already on the blocking pool).
/// Moves a staged upload into its content-addressed directory `uploads/<id>/<name>`, refusing
/// symlinks on the way. Blocking: run under the write lock, on the blocking pool or on the
/// writer thread.
fn place_upload_now(data_dir: &Path, id: &str, name: &str, staged: &Path) -> Result<()> {
    let doc_dir = join_all(data_dir, &[UPLOADS_DIR, id]);
    std::fs::create_dir_all(&doc_dir)?;
    check_no_symlinks_now(data_dir, &[UPLOADS_DIR, id, name])?;
    move_file_now(staged, &doc_dir.join(name))?;
    Ok(())
}

/// Removes the directory of an upload whose transaction rolled back (or never committed): its
/// row does not exist, so whatever sits in this content-addressed directory is ours.
async fn discard_upload_dir(doc_dir: &Path, id: &str) {
    if let Err(cleanup) = remove_dir_all_if_exists(doc_dir).await {
        tracing::warn!(document_id = %id, error = %cleanup, "upload cleanup failed");
    }
}

fn move_file_now(from: &Path, to: &Path) -> std::io::Result<()> {
    match std::fs::rename(from, to) {
        Ok(()) => Ok(()),
        Err(err) if err.kind() == std::io::ErrorKind::CrossesDevices => {
            std::fs::copy(from, to)?;
            std::fs::remove_file(from)
        }
        Err(err) => Err(err),
    }
}

async fn path_exists(path: &Path) -> std::io::Result<bool> {
    match tokio::fs::symlink_metadata(path).await {
        Ok(_) => Ok(true),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(err) => Err(err),
    }
}

async fn remove_file_if_exists(path: &Path) {
    match tokio::fs::remove_file(path).await {
        Ok(()) => {}
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => {}
        Err(err) => tracing::warn!(error = %err, "removing a staged upload failed"),
    }
}

async fn remove_dir_all_if_exists(path: &Path) -> std::io::Result<()> {
    match tokio::fs::remove_dir_all(path).await {
        Ok(()) => Ok(()),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(err) => Err(err),
    }
}

/// Identifies a file off the async threads: a container's entries are read from disk.
async fn identify_blocking(
    extension: Option<String>,
    head: Vec<u8>,
    path: &Path,
) -> Result<&'static crate::formats::Format> {
    let path = path.to_path_buf();
    tokio::task::spawn_blocking(move || identify(extension.as_deref(), &head, &path))
        .await
        .map_err(|err| DocumentsError::corrupt(format!("content check task failed: {err}")))?
        .map(|found| found.format)
}
