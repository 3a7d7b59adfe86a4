//! Streaming upload ingest: an [`UploadSink`] takes an upload chunk by chunk, refuses an
//! archive by name before any byte is written and by content (an archive signature, or content
//! Shelf does not read under any name) on its first bytes, hashes while writing to the staging directory, enforces the size cap, and hands the
//! staged file to the document store. A sink that is dropped or fails leaves no file behind.
//! What a killed process leaves anyway (staged `.part` files, empty upload directories, trash
//! of committed deletes) is found by [`find_leftovers`] (`shelf admin db-check`) and removed by
//! [`remove_leftovers`] when `shelf api` starts, once older than [`LEFTOVER_GRACE`].

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use sea_orm::DatabaseConnection;
use serde::Serialize;
use shelf_db::sql::SqlExt;

use sha2::{Digest, Sha256};
use shelf_documents::ids::SNIFF_BYTES;
use shelf_documents::{
    DocumentStore, DocumentsError, Ingested, STAGING_DIR, TRASH_DIR, UPLOADS_DIR,
    check_upload_head, check_upload_prefix, is_document_id, lock_document_statement,
};
use tokio::io::AsyncWriteExt;

/// Why an upload was not ingested.
#[derive(Debug, thiserror::Error)]
pub enum UploadError {
    /// More bytes than the configured cap; nothing was kept.
    #[error("Upload exceeds the limit of {max_bytes} bytes")]
    TooLarge { max_bytes: u64 },
    /// A batch over `SHELF_API_MAX_BATCH_FILES` (`unit` "files") or
    /// `SHELF_API_MAX_BATCH_BYTES` (`unit` "bytes"); nothing of the batch was kept.
    #[error("Batch exceeds the limit of {max} {unit}")]
    BatchTooLarge { max: u64, unit: &'static str },
    /// Refused by name or content (user errors), or an internal failure (which callers must
    /// report generically; see [`DocumentsError::is_user_error`]).
    #[error(transparent)]
    Documents(#[from] DocumentsError),
    /// A volume Shelf writes to is below `SHELF_MIN_FREE_BYTES`: refused before any byte was
    /// read (`crate::disk`).
    #[error("Insufficient storage: {0}; nothing was stored. Retry once space is freed")]
    InsufficientStorage(#[from] crate::disk::LowSpace),
}

impl From<std::io::Error> for UploadError {
    fn from(e: std::io::Error) -> Self {
        UploadError::Documents(DocumentsError::Io(e))
    }
}

impl UploadError {
    /// The code of the table (`shelf_documents::codes`) this error answers with. An upload's
    /// internal failure is `ingest_failed` (a damaged database or a full disk keeps its own).
    pub fn error_code(&self) -> shelf_documents::ErrorCode {
        use shelf_documents::ErrorCode;
        match self {
            UploadError::TooLarge { .. } => ErrorCode::UploadTooLarge,
            UploadError::BatchTooLarge { .. } => ErrorCode::BatchTooLarge,
            UploadError::InsufficientStorage(_) => ErrorCode::InsufficientStorage,
            UploadError::Documents(e) => match e.error_code() {
                ErrorCode::ServerError => ErrorCode::IngestFailed,
                other => other,
            },
        }
    }
}

/// Buffer between the network and the staging file: large enough that a 100 MB upload costs
/// about a hundred file-system calls, small enough to stay a fixed cost per upload. An upload
/// that fits in it is held in memory and written, fsynced and closed in one trip to the
/// blocking pool when it ends (most documents: the peer benchmark's average 11.6 KB).
const WRITE_BUFFER_BYTES: usize = 1 << 20;

/// How much of an upload's start its content is first judged on, before the rest is read: a
/// few bytes could be the start of UTF-16 text that only looks binary so far.
const JUDGED_HEAD_BYTES: usize = 512;

/// Removes the staged file unless it was moved away; runs on drop, so a request whose client
/// disconnects mid-upload (its future is dropped) leaves nothing behind.
struct StagedFile {
    path: PathBuf,
}

impl Drop for StagedFile {
    fn drop(&mut self) {
        match std::fs::remove_file(&self.path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => tracing::warn!(error = %e, "removing a staged upload failed"),
        }
    }
}

struct Writing {
    staged: StagedFile,
    out: tokio::io::BufWriter<tokio::fs::File>,
}

/// One upload in progress. Create it with [`UploadSink::begin`], feed it with
/// [`UploadSink::push`], and end it with [`UploadSink::finish`].
pub struct UploadSink {
    store: DocumentStore,
    filename: String,
    /// The name's extension, lowercase: where identifying the content starts.
    extension: Option<String>,
    max_bytes: u64,
    /// The bytes not yet written: the first [`SNIFF_BYTES`] are checked before any byte is
    /// written, and an upload shorter than [`WRITE_BUFFER_BYTES`] is never streamed.
    head: Vec<u8>,
    /// The content checks of the first [`SNIFF_BYTES`] passed.
    sniffed: bool,
    writing: Option<Writing>,
    hasher: Sha256,
    size: u64,
}

impl UploadSink {
    /// Checks the filename (an archive's extension is refused here, before any byte is read
    /// or written; what the file is, its content decides).
    pub fn begin(
        store: DocumentStore,
        filename: &str,
        max_bytes: u64,
    ) -> Result<UploadSink, UploadError> {
        let extension = shelf_documents::check_upload_filename(filename)?;
        Ok(UploadSink {
            store,
            filename: filename.to_string(),
            extension,
            max_bytes,
            head: Vec::new(),
            sniffed: false,
            writing: None,
            hasher: Sha256::new(),
            size: 0,
        })
    }

    /// Bytes received so far.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// Takes the next chunk.
    pub async fn push(&mut self, chunk: &[u8]) -> Result<(), UploadError> {
        self.size = self.size.saturating_add(chunk.len() as u64);
        if self.size > self.max_bytes {
            return Err(UploadError::TooLarge {
                max_bytes: self.max_bytes,
            });
        }
        self.hasher.update(chunk);
        match &mut self.writing {
            Some(writing) => writing.out.write_all(chunk).await?,
            // A chunk that would take the held bytes past the buffer goes to the file, so an
            // upload never holds more than the buffer (growing the held bytes would double it).
            None if self.sniffed && self.head.len() + chunk.len() > WRITE_BUFFER_BYTES => {
                self.start_writing().await?;
                if let Some(writing) = &mut self.writing {
                    writing.out.write_all(chunk).await?;
                }
            }
            None => {
                // Doubling as a vector does, but never past the buffer.
                let needed = self.head.len() + chunk.len();
                if needed > self.head.capacity() {
                    let target = (self.head.capacity() * 2)
                        .max(needed)
                        .min(WRITE_BUFFER_BYTES.max(needed));
                    self.head.reserve_exact(target - self.head.len());
                }
                self.head.extend_from_slice(chunk);
                if !self.sniffed {
                    // Every partial head refuses an archive on its first chunk (a signature
                    // needs all its bytes, so a prefix never misfires); the content is judged
                    // once JUDGED_HEAD_BYTES are here (enough to tell UTF-16 from binary), and
                    // for the last time on its first SNIFF_BYTES.
                    check_upload_prefix(&self.head)?;
                    if self.head.len() >= JUDGED_HEAD_BYTES {
                        let sniff = self.head.get(..SNIFF_BYTES).unwrap_or(&self.head);
                        check_upload_head(self.extension.as_deref(), sniff)?;
                        self.sniffed = self.head.len() >= SNIFF_BYTES;
                    }
                }
                if self.head.len() >= WRITE_BUFFER_BYTES {
                    self.start_writing().await?;
                }
            }
        }
        Ok(())
    }

    /// Writes an upload held whole in memory to a new staging file, fsynced and closed, in
    /// one trip to the blocking pool.
    async fn write_whole(&mut self) -> Result<StagedFile, UploadError> {
        let store = self.store.clone();
        let bytes = std::mem::take(&mut self.head);
        tokio::task::spawn_blocking(move || {
            use std::io::Write;
            let path = store.new_staging_path_now()?;
            let mut file = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&path)?;
            // From here a failure removes the file.
            let staged = StagedFile { path };
            file.write_all(&bytes)?;
            // The row will say the bytes exist: make them durable before it is written.
            file.sync_all()?;
            Ok::<_, UploadError>(staged)
        })
        .await
        .map_err(|e| UploadError::from(std::io::Error::other(e.to_string())))?
    }

    async fn start_writing(&mut self) -> Result<(), UploadError> {
        let path = self.store.new_staging_path().await?;
        let file = tokio::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)
            .await?;
        let staged = StagedFile { path };
        let mut out = tokio::io::BufWriter::with_capacity(WRITE_BUFFER_BYTES, file);
        out.write_all(&self.head).await?;
        self.head = Vec::new();
        self.writing = Some(Writing { staged, out });
        Ok(())
    }

    /// Ends the upload: flushes the staged file to disk and ingests it (content-addressed; a
    /// duplicate returns the existing document and keeps nothing).
    pub async fn finish(self) -> Result<Ingested, UploadError> {
        self.stage().await?.commit().await
    }

    /// Ends the upload without ingesting it: the bytes are durable in the staging directory
    /// and the file is closed, so a batch can hold many of these while it reads the rest of
    /// its request (each costs a path and a digest, no buffer and no open file).
    pub async fn stage(mut self) -> Result<StagedUpload, UploadError> {
        // Refused before anything is staged; the store checks it again for its other callers.
        if self.size == 0 {
            return Err(DocumentsError::EmptyFile.into());
        }
        let staged = match self.writing.take() {
            None => {
                check_upload_head(
                    self.extension.as_deref(),
                    self.head.get(..SNIFF_BYTES).unwrap_or(&self.head),
                )?;
                self.write_whole().await?
            }
            Some(mut writing) => {
                writing.out.flush().await?;
                let file = writing.out.into_inner();
                // The row will say the bytes exist: make them durable before it is written.
                file.sync_all().await?;
                drop(file);
                writing.staged
            }
        };
        Ok(StagedUpload {
            store: self.store,
            filename: self.filename,
            sha256: hex::encode(self.hasher.finalize()),
            size: self.size,
            staged,
        })
    }
}

/// A complete upload waiting in the staging directory; dropping it removes the file.
pub struct StagedUpload {
    store: DocumentStore,
    filename: String,
    sha256: String,
    size: u64,
    staged: StagedFile,
}

impl StagedUpload {
    /// Ingests the staged file (content-addressed; a duplicate returns the existing document
    /// and keeps nothing).
    pub async fn commit(self) -> Result<Ingested, UploadError> {
        let ingested = self
            .store
            .ingest_upload(&self.staged.path, &self.filename, &self.sha256, self.size)
            .await?;
        // On success the staged file was moved away; the guard's removal finds nothing.
        drop(self.staged);
        Ok(ingested)
    }
}

/// How old a staged file or an empty upload directory must be before [`remove_leftovers`]
/// takes it. Another API process may own a young one: an upload in flight writes its staging
/// file at least once per write buffer (1 MiB), a batch keeps its staged parts for the length
/// of one request, and a document's directory gets its file moments after it is made. An
/// hour is far past all of them.
pub const LEFTOVER_GRACE: Duration = Duration::from_secs(60 * 60);

/// What killed processes left under `uploads/`, by kind: counts and bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Leftovers {
    /// `uploads/.staging/*.part` older than [`LEFTOVER_GRACE`]: uploads never finished.
    pub staged_files: u64,
    pub staged_bytes: u64,
    /// Empty `uploads/<doc_id>/` directories older than [`LEFTOVER_GRACE`] whose document has
    /// no row: an ingest killed between making the directory and committing the row.
    pub empty_upload_dirs: u64,
    /// `uploads/.trash/<doc_id>-*` entries whose document has no row: deletes that committed
    /// but were killed before removing the files.
    pub trash_entries: u64,
    pub trash_bytes: u64,
}

impl Leftovers {
    /// Entries of every kind.
    pub fn count(&self) -> u64 {
        self.staged_files + self.empty_upload_dirs + self.trash_entries
    }

    /// Bytes of every kind (an empty directory counts none).
    pub fn bytes(&self) -> u64 {
        self.staged_bytes + self.trash_bytes
    }

    fn add(&mut self, leftover: &Leftover) {
        match leftover.kind {
            Kind::Staged => {
                self.staged_files += 1;
                self.staged_bytes += leftover.bytes;
            }
            Kind::EmptyDir => self.empty_upload_dirs += 1,
            Kind::Trash => {
                self.trash_entries += 1;
                self.trash_bytes += leftover.bytes;
            }
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Staged,
    EmptyDir,
    Trash,
}

/// One entry the walk found; rows are checked afterwards.
#[derive(Debug)]
struct Leftover {
    kind: Kind,
    path: PathBuf,
    /// The document an empty directory or a trash entry belongs to.
    id: Option<String>,
    bytes: u64,
}

/// The entries of `dir` with UTF-8 names, each with its own metadata (links not followed);
/// none when `dir` is missing, a symlink or not a directory (the store refuses a symlinked
/// `uploads` anyway, and nothing here may follow one out of the data directory).
fn entries(dir: &Path) -> std::io::Result<Vec<(String, PathBuf, std::fs::Metadata)>> {
    match std::fs::symlink_metadata(dir) {
        Ok(meta) if meta.is_dir() => {}
        Ok(_) => return Ok(Vec::new()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    }
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let Some(name) = entry.file_name().to_str().map(str::to_string) else {
            continue;
        };
        let path = entry.path();
        match std::fs::symlink_metadata(&path) {
            Ok(meta) => out.push((name, path, meta)),
            // Removed since the listing (an upload that finished): not a leftover.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(out)
}

fn older_than(meta: &std::fs::Metadata, cutoff: Option<SystemTime>) -> bool {
    match (meta.modified(), cutoff) {
        (Ok(modified), Some(cutoff)) => modified <= cutoff,
        _ => false,
    }
}

/// Bytes of the regular files under `path` (links not followed; unreadable parts count 0).
fn tree_bytes(path: &Path, meta: &std::fs::Metadata) -> u64 {
    if meta.is_file() {
        return meta.len();
    }
    if !meta.is_dir() {
        return 0;
    }
    entries(path)
        .unwrap_or_default()
        .iter()
        .map(|(_, child, meta)| tree_bytes(child, meta))
        .sum()
}

fn is_empty_dir(path: &Path) -> std::io::Result<bool> {
    Ok(std::fs::read_dir(path)?.next().is_none())
}

/// Walks `<data_dir>/uploads` for leftovers as of `now`; nothing is removed and no row read.
fn walk_leftovers(data_dir: &Path, now: SystemTime) -> std::io::Result<Vec<Leftover>> {
    let cutoff = now.checked_sub(LEFTOVER_GRACE);
    let mut found = Vec::new();
    for (name, path, meta) in entries(&data_dir.join(UPLOADS_DIR))? {
        if !meta.is_dir() {
            continue;
        }
        if name == STAGING_DIR {
            for (name, path, meta) in entries(&path)? {
                if meta.is_file() && name.ends_with(".part") && older_than(&meta, cutoff) {
                    found.push(Leftover {
                        kind: Kind::Staged,
                        bytes: meta.len(),
                        path,
                        id: None,
                    });
                }
            }
        } else if name == TRASH_DIR {
            // `<doc_id>-<random>`, made by a delete: no age rule, the row decides (a delete
            // in flight still shows its row to every other connection until it commits).
            for (name, path, meta) in entries(&path)? {
                let id = name
                    .rsplit_once('-')
                    .map(|(id, _)| id)
                    .filter(|id| is_document_id(id));
                if let Some(id) = id
                    && !meta.is_symlink()
                {
                    found.push(Leftover {
                        kind: Kind::Trash,
                        bytes: tree_bytes(&path, &meta),
                        path,
                        id: Some(id.to_string()),
                    });
                }
            }
        } else if is_document_id(&name) && older_than(&meta, cutoff) && is_empty_dir(&path)? {
            found.push(Leftover {
                kind: Kind::EmptyDir,
                path,
                id: Some(name),
                bytes: 0,
            });
        }
    }
    Ok(found)
}

async fn walk_leftovers_blocking(
    data_dir: &Path,
    now: SystemTime,
) -> std::io::Result<Vec<Leftover>> {
    let data_dir = data_dir.to_path_buf();
    tokio::task::spawn_blocking(move || walk_leftovers(&data_dir, now))
        .await
        .map_err(|e| std::io::Error::other(e.to_string()))?
}

/// Whether a document row with this id exists; an unreadable answer counts as yes, so a
/// database that cannot say keeps every file.
async fn row_exists(db: &impl sea_orm::ConnectionTrait, id: &str) -> bool {
    match shelf_documents::document_exists(db, id).await {
        Ok(found) => found,
        Err(error) => {
            tracing::warn!(document_id = %id, %error, "cannot check an upload leftover's row; kept");
            true
        }
    }
}

/// The leftovers [`remove_leftovers`] would remove at `now` (the walk's errors are returned).
pub async fn find_leftovers(
    db: &DatabaseConnection,
    data_dir: &Path,
    now: SystemTime,
) -> std::io::Result<Leftovers> {
    let mut total = Leftovers::default();
    for leftover in walk_leftovers_blocking(data_dir, now).await? {
        let referenced = match &leftover.id {
            Some(id) => row_exists(db, id).await,
            None => false,
        };
        if !referenced {
            total.add(&leftover);
        }
    }
    Ok(total)
}

/// Removes an empty upload directory unless its document has a row, under the document's
/// write lock (SQLite's write lock, PostgreSQL's advisory lock on the id), which an ingest
/// holds from making the directory to committing the row: the check and the removal cannot
/// fall between the two. `remove_dir` never removes a directory that holds anything.
async fn remove_empty_dir(db: &DatabaseConnection, id: &str, path: &Path) -> Result<bool, String> {
    let txn = shelf_db::begin_write(db).await.map_err(|e| e.to_string())?;
    if let Some(lock) = lock_document_statement(db.get_database_backend(), id) {
        txn.execute_sql(lock).await.map_err(|e| e.to_string())?;
    }
    if row_exists(&txn, id).await {
        txn.rollback().await.map_err(|e| e.to_string())?;
        return Ok(false);
    }
    let removed = match std::fs::remove_dir(path) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) if e.kind() == std::io::ErrorKind::DirectoryNotEmpty => Ok(false),
        Err(e) => Err(e.to_string()),
    };
    txn.rollback().await.map_err(|e| e.to_string())?;
    removed
}

async fn remove_entry(leftover: &Leftover) -> std::io::Result<bool> {
    let removed = match std::fs::symlink_metadata(&leftover.path) {
        Ok(meta) if meta.is_dir() => tokio::fs::remove_dir_all(&leftover.path).await,
        Ok(_) => tokio::fs::remove_file(&leftover.path).await,
        Err(e) => Err(e),
    };
    match removed {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(e),
    }
}

/// Removes the leftovers of killed processes under `<data_dir>/uploads` (see [`Leftovers`]
/// for the rules) and returns what it removed. `shelf api` runs it at start; what cannot be
/// removed is logged and skipped.
pub async fn remove_leftovers(
    db: &DatabaseConnection,
    data_dir: &Path,
    now: SystemTime,
) -> std::io::Result<Leftovers> {
    let mut removed = Leftovers::default();
    for leftover in walk_leftovers_blocking(data_dir, now).await? {
        let outcome = match (leftover.kind, &leftover.id) {
            (Kind::EmptyDir, Some(id)) => remove_empty_dir(db, id, &leftover.path).await,
            (Kind::Trash, Some(id)) if row_exists(db, id).await => Ok(false),
            _ => remove_entry(&leftover).await.map_err(|e| e.to_string()),
        };
        match outcome {
            Ok(true) => removed.add(&leftover),
            Ok(false) => {}
            Err(error) => tracing::warn!(
                path = %leftover.path.display(),
                %error,
                "cannot remove an upload leftover"
            ),
        }
    }
    Ok(removed)
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn store() -> (tempfile::TempDir, DocumentStore) {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = crate::db::connect(&dir.path().join("s.sqlite"), 2)
            .await
            .expect("connect");
        crate::db::migrate(&db).await.expect("migrate");
        let store = DocumentStore::new(db, dir.path().join("data"));
        (dir, store)
    }

    fn staged_files(store: &DocumentStore) -> usize {
        std::fs::read_dir(store.staging_dir())
            .map(|d| d.count())
            .unwrap_or(0)
    }

    #[tokio::test]
    async fn streams_in_chunks_and_ingests() {
        let (_dir, store) = store().await;
        let text = "hello world\n".repeat(5000);
        let mut sink = UploadSink::begin(store.clone(), "notes.txt", 1 << 20).expect("begin");
        for chunk in text.as_bytes().chunks(777) {
            sink.push(chunk).await.expect("push");
        }
        let ingested = sink.finish().await.expect("finish");
        assert!(!ingested.duplicate);
        assert_eq!(ingested.document.byte_size, text.len() as u64);
        assert_eq!(
            ingested.document.sha256,
            shelf_documents::sha256_hex(text.as_bytes())
        );
        assert_eq!(staged_files(&store), 0);
        let mut again = UploadSink::begin(store.clone(), "other.txt", 1 << 20).expect("begin");
        again.push(text.as_bytes()).await.expect("push");
        assert!(again.finish().await.expect("finish").duplicate);
        assert_eq!(staged_files(&store), 0);
    }

    #[tokio::test]
    async fn archive_names_and_signatures_are_refused_before_writing() {
        let (_dir, store) = store().await;
        assert!(matches!(
            UploadSink::begin(store.clone(), "a.zip", 100),
            Err(UploadError::Documents(
                DocumentsError::ArchiveNotSupported { .. }
            ))
        ));
        let mut sink = UploadSink::begin(store.clone(), "a.txt", 1 << 20).expect("begin");
        // A ZIP whose first entry is a plain file: an archive from its first chunk on.
        let mut zip = b"PK\x03\x04".to_vec();
        zip.extend([0u8; 22]);
        zip.extend([9, 0, 0, 0]);
        zip.extend(b"notes.txtrest");
        let err = sink.push(&zip).await.expect_err("zip");
        assert!(matches!(
            err,
            UploadError::Documents(DocumentsError::ArchiveNotSupported { .. })
        ));
        assert!(!store.uploads_dir().exists(), "nothing may be written");
    }

    #[tokio::test]
    async fn oversized_and_abandoned_uploads_leave_nothing() {
        let (_dir, store) = store().await;
        // Past the write buffer an upload streams to a staging file.
        let cap = (WRITE_BUFFER_BYTES + 10_000) as u64;
        let mut sink = UploadSink::begin(store.clone(), "big.txt", cap).expect("begin");
        sink.push(&vec![b'a'; WRITE_BUFFER_BYTES + 9_000])
            .await
            .expect("under the cap");
        assert_eq!(staged_files(&store), 1);
        let err = sink.push(&[b'a'; 2_000]).await.expect_err("over the cap");
        assert!(matches!(err, UploadError::TooLarge { max_bytes } if max_bytes == cap));
        drop(sink);
        assert_eq!(staged_files(&store), 0);

        let mut abandoned = UploadSink::begin(store.clone(), "gone.txt", 2 << 20).expect("begin");
        abandoned
            .push(&vec![b'b'; WRITE_BUFFER_BYTES + 20_000])
            .await
            .expect("push");
        assert_eq!(staged_files(&store), 1);
        drop(abandoned);
        assert_eq!(staged_files(&store), 0);

        // Below it nothing touches the disk before the upload ends.
        let mut small = UploadSink::begin(store.clone(), "small.txt", 10_000).expect("begin");
        small.push(&[b'c'; 9_000]).await.expect("under the cap");
        assert_eq!(staged_files(&store), 0);
        let err = small.push(&[b'c'; 2_000]).await.expect_err("over the cap");
        assert!(matches!(err, UploadError::TooLarge { max_bytes: 10_000 }));
        drop(small);
        assert_eq!(staged_files(&store), 0);
        assert_eq!(
            store
                .list(&Default::default(), 10, 0)
                .await
                .expect("list")
                .1,
            0
        );
    }

    #[tokio::test]
    async fn an_upload_never_holds_more_than_the_write_buffer() {
        let (_dir, store) = store().await;
        let text = "0123456789".repeat(10_000);
        let mut sink = UploadSink::begin(store.clone(), "long.txt", 4 << 20).expect("begin");
        for _ in 0..30 {
            sink.push(text.as_bytes()).await.expect("push");
            assert!(
                sink.head.capacity() <= WRITE_BUFFER_BYTES,
                "{} bytes held",
                sink.head.capacity()
            );
        }
        assert_eq!(
            staged_files(&store),
            1,
            "past the buffer the upload streams"
        );
        let ingested = sink.finish().await.expect("finish");
        assert_eq!(ingested.document.byte_size, 3_000_000);
        assert_eq!(
            ingested.document.sha256,
            shelf_documents::sha256_hex(text.repeat(30).as_bytes())
        );
    }

    /// Sets a file's or a directory's modification time `ago` in the past.
    fn age(path: &Path, ago: Duration) {
        let when = SystemTime::now() - ago;
        std::fs::File::open(path)
            .expect("open")
            .set_modified(when)
            .expect("set mtime");
    }

    #[tokio::test]
    async fn old_leftovers_without_rows_go_and_everything_else_stays() {
        let (_dir, store) = store().await;
        let old = LEFTOVER_GRACE * 2;
        // Two documents with rows: one keeps its file, the other's directory is empty.
        let mut kept = UploadSink::begin(store.clone(), "kept.txt", 1 << 20).expect("begin");
        kept.push(b"a document that stays\n").await.expect("push");
        let kept = kept.finish().await.expect("finish").document;
        let mut bare = UploadSink::begin(store.clone(), "bare.txt", 1 << 20).expect("begin");
        bare.push(b"a document whose file went\n")
            .await
            .expect("push");
        let bare = bare.finish().await.expect("finish").document;
        let uploads = store.uploads_dir();
        std::fs::remove_file(uploads.join(&bare.id).join("bare.txt")).expect("rm");
        age(&uploads.join(&bare.id), old);
        age(&uploads.join(&kept.id), old);

        let staging = store.staging_dir();
        std::fs::create_dir_all(&staging).expect("mkdir");
        let stale = staging.join("upload-00000000000000aa.part");
        std::fs::write(&stale, vec![b'x'; 1000]).expect("write");
        age(&stale, old);
        let fresh = staging.join("upload-00000000000000bb.part");
        std::fs::write(&fresh, vec![b'y'; 10]).expect("write");
        let foreign = staging.join("notes.txt");
        std::fs::write(&foreign, b"not ours").expect("write");
        age(&foreign, old);

        let orphan = uploads.join("doc_00000000000000aa");
        std::fs::create_dir(&orphan).expect("mkdir");
        age(&orphan, old);
        let young = uploads.join("doc_00000000000000bb");
        std::fs::create_dir(&young).expect("mkdir");

        let trash = uploads.join(".trash");
        let deleted = trash.join("doc_00000000000000cc-0123456789abcdef");
        std::fs::create_dir_all(deleted.join("sub")).expect("mkdir");
        std::fs::write(deleted.join("sub/a.txt"), vec![b'z'; 300]).expect("write");
        let reuploaded = trash.join(format!("{}-0123456789abcdef", kept.id));
        std::fs::create_dir_all(&reuploaded).expect("mkdir");
        std::fs::write(reuploaded.join("kept.txt"), b"old copy").expect("write");

        let expected = Leftovers {
            staged_files: 1,
            staged_bytes: 1000,
            empty_upload_dirs: 1,
            trash_entries: 1,
            trash_bytes: 300,
        };
        let now = SystemTime::now();
        let found = find_leftovers(&store.db, &store.data_dir, now)
            .await
            .expect("find");
        assert_eq!(found, expected);
        assert_eq!((found.count(), found.bytes()), (3, 1300));
        let removed = remove_leftovers(&store.db, &store.data_dir, now)
            .await
            .expect("remove");
        assert_eq!(removed, expected);
        for gone in [&stale, &orphan, &deleted] {
            assert!(!gone.exists(), "{} stayed", gone.display());
        }
        for stays in [
            &fresh,
            &foreign,
            &young,
            &reuploaded,
            &uploads.join(&bare.id),
            &uploads.join(&kept.id).join("kept.txt"),
        ] {
            assert!(stays.exists(), "{} went", stays.display());
        }
        let again = find_leftovers(&store.db, &store.data_dir, now)
            .await
            .expect("find");
        assert_eq!(again, Leftovers::default());
    }

    #[tokio::test]
    async fn a_symlinked_staging_directory_is_not_followed() {
        let (_dir, store) = store().await;
        let outside = tempfile::tempdir().expect("tempdir");
        let victim = outside.path().join("upload-00000000000000aa.part");
        std::fs::write(&victim, b"someone else's").expect("write");
        age(&victim, LEFTOVER_GRACE * 2);
        std::fs::create_dir_all(store.uploads_dir()).expect("mkdir");
        std::os::unix::fs::symlink(outside.path(), store.staging_dir()).expect("symlink");
        let removed = remove_leftovers(&store.db, &store.data_dir, SystemTime::now())
            .await
            .expect("remove");
        assert_eq!(removed, Leftovers::default());
        assert!(victim.exists());
    }

    #[tokio::test]
    async fn binary_text_is_refused() {
        let (_dir, store) = store().await;
        // Judged once enough of it is in, before anything is written.
        let mut sink = UploadSink::begin(store.clone(), "a.txt", 1 << 20).expect("begin");
        sink.push(b"abc\0def")
            .await
            .expect("too little to judge yet");
        let err = sink
            .push(&[b"\x01\x02\0\0\x07".as_slice(); 200].concat())
            .await
            .expect_err("binary");
        assert!(matches!(
            err,
            UploadError::Documents(DocumentsError::BinaryContent)
        ));
        assert!(!store.uploads_dir().exists(), "nothing may be written");
        // A short upload is judged when it ends.
        let mut short = UploadSink::begin(store.clone(), "b.txt", 1 << 20).expect("begin");
        short
            .push(b"abc\0def")
            .await
            .expect("too little to judge yet");
        assert!(matches!(
            short.finish().await,
            Err(UploadError::Documents(DocumentsError::BinaryContent))
        ));
    }
}
