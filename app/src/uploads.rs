//! Streaming upload ingest: an [`UploadSink`] takes an upload chunk by chunk, refuses it by
//! name before any byte is written and by content (archive signature, binary text) on its first
//! bytes, hashes while writing to the staging directory, enforces the size cap, and hands the
//! staged file to the document store. A sink that is dropped or fails leaves no file behind.

use std::path::PathBuf;

use sha2::{Digest, Sha256};
use shelf_documents::ids::SNIFF_BYTES;
use shelf_documents::{DocumentStore, DocumentsError, Format, Ingested, check_content};
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
}

impl From<std::io::Error> for UploadError {
    fn from(e: std::io::Error) -> Self {
        UploadError::Documents(DocumentsError::Io(e))
    }
}

/// Buffer between the network and the staging file: large enough that a 100 MB upload costs
/// about a hundred file-system calls, small enough to stay a fixed cost per upload. An upload
/// that fits in it is held in memory and written, fsynced and closed in one trip to the
/// blocking pool when it ends (most documents: the peer benchmark's average 11.6 KB).
const WRITE_BUFFER_BYTES: usize = 1 << 20;

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
    format: &'static Format,
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
    /// Checks the filename (archives and unsupported extensions are refused here, before any
    /// byte is read or written).
    pub fn begin(
        store: DocumentStore,
        filename: &str,
        max_bytes: u64,
    ) -> Result<UploadSink, UploadError> {
        let format = shelf_documents::check_upload_filename(filename)?;
        Ok(UploadSink {
            store,
            filename: filename.to_string(),
            format,
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
                    // Checking every partial head refuses an archive on its first chunk; the
                    // check never misfires on a prefix (signatures need all their bytes).
                    let sniff = self.head.get(..SNIFF_BYTES).unwrap_or(&self.head);
                    check_content(self.format, sniff)?;
                    self.sniffed = self.head.len() >= SNIFF_BYTES;
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
                check_content(
                    self.format,
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
        let err = sink.push(b"PK\x03\x04rest").await.expect_err("zip");
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
        assert_eq!(store.list(10, 0).await.expect("list").1, 0);
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

    #[tokio::test]
    async fn binary_text_is_refused() {
        let (_dir, store) = store().await;
        let mut sink = UploadSink::begin(store.clone(), "a.txt", 1 << 20).expect("begin");
        let err = sink.push(b"abc\0def").await.expect_err("binary");
        assert!(matches!(
            err,
            UploadError::Documents(DocumentsError::BinaryContent)
        ));
    }
}
