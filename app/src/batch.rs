//! Batch uploads: many files in one request, each streamed through an [`UploadSink`] to the
//! staging directory (the single-upload path, so no file is ever held in memory), the batch's
//! caps counted as bytes arrive, and nothing ingested until the whole request was read within
//! them. A failed file never rolls back the others; a batch over its caps keeps nothing.

use shelf_documents::{DocumentStore, Ingested, normalize_filename};

use crate::shelf::Shelf;
use crate::uploads::{StagedUpload, UploadError, UploadSink};

/// Multipart framing allowed per file when a declared `Content-Length` is compared with
/// `SHELF_API_MAX_BATCH_BYTES`: boundaries and part headers (a name, a filename of at most a
/// few hundred bytes, a content type) stay far below it, so a body longer than the caps plus
/// this allowance cannot fit and is refused before a byte is read.
pub const PART_FRAMING_BYTES: u64 = 16 * 1024;

/// What became of one file of a batch.
#[derive(Debug)]
pub struct BatchOutcome {
    /// The filename as stored uploads are named ([`normalize_filename`]), also for failures.
    pub filename: String,
    pub result: Result<Ingested, UploadError>,
}

enum Pending {
    /// Still receiving bytes (boxed: one sink is in flight at a time, the variants stay small).
    Streaming(Box<UploadSink>),
    /// Refused by name or content, or failed: its remaining bytes are counted and dropped.
    Failed(UploadError),
}

struct Item {
    filename: String,
    pending: Result<StagedUpload, UploadError>,
}

/// One batch in progress: [`start_file`](Self::start_file), [`push`](Self::push) its chunks,
/// [`end_file`](Self::end_file), and once the request is read, [`commit`](Self::commit).
/// Dropping it (a cap error, a client that went away) removes every staged file.
pub struct BatchUpload {
    store: DocumentStore,
    max_files: usize,
    max_bytes: u64,
    max_upload_bytes: u64,
    bytes: u64,
    items: Vec<Item>,
    current: Option<(String, Pending)>,
}

impl Shelf {
    /// Starts a batch under `SHELF_API_MAX_BATCH_FILES` and `SHELF_API_MAX_BATCH_BYTES`, each
    /// file under `SHELF_API_MAX_UPLOAD_BYTES`. A declared body length that cannot fit the caps
    /// (see [`PART_FRAMING_BYTES`]) is refused at once.
    pub fn begin_batch(&self, declared_length: Option<u64>) -> Result<BatchUpload, UploadError> {
        // Refused while a volume is below `SHELF_MIN_FREE_BYTES`, before anything is read.
        self.admit_new_work()?;
        let batch = BatchUpload {
            store: self.documents.clone(),
            max_files: self.settings.api.max_batch_files,
            max_bytes: self.settings.api.max_batch_bytes,
            max_upload_bytes: self.settings.api.max_upload_bytes,
            bytes: 0,
            items: Vec::new(),
            current: None,
        };
        if let Some(length) = declared_length {
            let framing = PART_FRAMING_BYTES.saturating_mul(batch.max_files as u64);
            if length > batch.max_bytes.saturating_add(framing) {
                return Err(batch.too_many_bytes());
            }
        }
        Ok(batch)
    }
}

impl BatchUpload {
    fn too_many_bytes(&self) -> UploadError {
        UploadError::BatchTooLarge {
            max: self.max_bytes,
            unit: "bytes",
        }
    }

    /// Files started so far.
    pub fn files(&self) -> usize {
        self.items.len() + usize::from(self.current.is_some())
    }

    /// Starts the next file (ending the previous one). Over the file cap the whole batch is
    /// refused; a name refused by the upload rules only fails this file.
    pub async fn start_file(&mut self, raw_filename: &str) -> Result<(), UploadError> {
        self.end_file().await;
        if self.items.len() >= self.max_files {
            return Err(UploadError::BatchTooLarge {
                max: self.max_files as u64,
                unit: "files",
            });
        }
        let pending =
            match UploadSink::begin(self.store.clone(), raw_filename, self.max_upload_bytes) {
                Ok(sink) => Pending::Streaming(Box::new(sink)),
                Err(e) => Pending::Failed(e),
            };
        self.current = Some((normalize_filename(raw_filename), pending));
        Ok(())
    }

    /// Takes the next chunk of the current file. Over the byte cap the whole batch is refused;
    /// a file over `SHELF_API_MAX_UPLOAD_BYTES` or with refused content only fails itself (its
    /// staged bytes are removed at once, its remaining bytes still count).
    pub async fn push(&mut self, chunk: &[u8]) -> Result<(), UploadError> {
        self.bytes = self.bytes.saturating_add(chunk.len() as u64);
        if self.bytes > self.max_bytes {
            return Err(self.too_many_bytes());
        }
        if let Some((_, pending)) = &mut self.current
            && let Pending::Streaming(sink) = pending
            && let Err(e) = sink.push(chunk).await
        {
            // Replacing the sink drops it, which removes what it staged.
            *pending = Pending::Failed(e);
        }
        Ok(())
    }

    /// Ends the current file: its bytes are made durable in the staging directory, or it is
    /// recorded as failed (an empty file, a staging failure).
    pub async fn end_file(&mut self) {
        let Some((filename, pending)) = self.current.take() else {
            return;
        };
        let pending = match pending {
            Pending::Streaming(sink) => (*sink).stage().await,
            Pending::Failed(e) => Err(e),
        };
        self.items.push(Item { filename, pending });
    }

    /// Ingests every staged file, in request order (a later copy of the same bytes is a
    /// duplicate of the earlier one). Call it once the whole request was read.
    pub async fn commit(mut self) -> Vec<BatchOutcome> {
        self.end_file().await;
        let mut outcomes = Vec::with_capacity(self.items.len());
        for item in std::mem::take(&mut self.items) {
            let result = match item.pending {
                Ok(staged) => staged.commit().await,
                Err(e) => Err(e),
            };
            outcomes.push(BatchOutcome {
                filename: item.filename,
                result,
            });
        }
        outcomes
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use shelf_documents::DocumentsError;

    async fn shelf(vars: &[(&str, &str)]) -> (tempfile::TempDir, Shelf) {
        let dir = tempfile::tempdir().expect("tempdir");
        let data = dir.path().join("data");
        let mut env = std::collections::HashMap::from([
            ("SHELF_DATA_DIR".to_string(), data.display().to_string()),
            ("SHELF_LLM_PROVIDER".to_string(), "mock".to_string()),
        ]);
        env.extend(vars.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        let settings = crate::Settings::from_vars(&env).expect("settings");
        let shelf = Shelf::open(settings).await.expect("open");
        (dir, shelf)
    }

    fn files_in(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
        std::fs::read_dir(dir)
            .map(|d| d.flatten().map(|e| e.path()).collect())
            .unwrap_or_default()
    }

    /// Documents stored so far.
    async fn document_count(shelf: &Shelf) -> u64 {
        shelf
            .list_documents(&Default::default(), 1, 0)
            .await
            .expect("list")
            .1
    }

    #[tokio::test]
    async fn files_stream_to_disk_and_are_ingested_only_at_commit() {
        let (_dir, shelf) = shelf(&[]).await;
        let staging = shelf.documents.staging_dir();
        let mut batch = shelf.begin_batch(None).expect("begin");
        batch.start_file("big.txt").await.expect("start");
        let chunk = b"streamed line of a batch file\n".repeat(2048);
        let mut sent = 0u64;
        // What may be in memory at once: the sniffed head, the sink's write buffer, and the
        // one write tokio's file has in flight on the blocking pool (at most 2 MiB).
        let in_memory = 8192 + (1 << 20) + (2 << 20);
        for _ in 0..150 {
            batch.push(&chunk).await.expect("push");
            sent += chunk.len() as u64;
            // The property: everything else pushed is on disk already, so a part of any size
            // is never held whole in memory.
            let on_disk: u64 = files_in(&staging)
                .iter()
                .map(|p| std::fs::metadata(p).map(|m| m.len()).unwrap_or(0))
                .sum();
            assert!(
                on_disk + in_memory >= sent,
                "{on_disk} bytes on disk after {sent}"
            );
        }
        assert!(sent > 2 * in_memory);
        batch.start_file("small.md").await.expect("start");
        batch.push(b"# Small\n").await.expect("push");
        batch.end_file().await;
        assert_eq!(files_in(&staging).len(), 2, "both staged");
        assert_eq!(document_count(&shelf).await, 0);
        let outcomes = batch.commit().await;
        assert_eq!(outcomes.len(), 2);
        let big = outcomes[0].result.as_ref().expect("ingested");
        assert_eq!(big.document.byte_size, sent);
        assert!(outcomes[1].result.is_ok());
        assert!(files_in(&staging).is_empty());
        assert_eq!(document_count(&shelf).await, 2);
    }

    #[tokio::test]
    async fn failed_files_do_not_stop_the_others() {
        let (_dir, shelf) = shelf(&[("SHELF_API_MAX_UPLOAD_BYTES", "1000")]).await;
        let mut batch = shelf.begin_batch(None).expect("begin");
        for (name, bytes) in [
            ("../a/notes.txt", &b"kept\n"[..]),
            ("bundle.zip", b"PK\x03\x04"),
            ("sneaky.txt", b"PK\x03\x04 a zip under a text name"),
            ("empty.md", b""),
            ("big.txt", &[b'x'; 1500]),
            ("copy.txt", b"kept\n"),
        ] {
            batch.start_file(name).await.expect("start");
            batch.push(bytes).await.expect("push");
        }
        let outcomes = batch.commit().await;
        let names: Vec<&str> = outcomes.iter().map(|o| o.filename.as_str()).collect();
        assert_eq!(
            names,
            [
                "notes.txt",
                "bundle.zip",
                "sneaky.txt",
                "empty.md",
                "big.txt",
                "copy.txt"
            ]
        );
        assert!(!outcomes[0].result.as_ref().expect("first").duplicate);
        assert!(matches!(
            outcomes[1].result,
            Err(UploadError::Documents(
                DocumentsError::ArchiveNotSupported { .. }
            ))
        ));
        assert!(matches!(
            outcomes[2].result,
            Err(UploadError::Documents(
                DocumentsError::ArchiveNotSupported { .. }
            ))
        ));
        assert!(matches!(
            outcomes[3].result,
            Err(UploadError::Documents(DocumentsError::EmptyFile))
        ));
        assert!(matches!(
            outcomes[4].result,
            Err(UploadError::TooLarge { max_bytes: 1000 })
        ));
        assert!(outcomes[5].result.as_ref().expect("copy").duplicate);
        assert!(files_in(&shelf.documents.staging_dir()).is_empty());
    }

    #[tokio::test]
    async fn caps_refuse_the_batch_and_keep_nothing() {
        let (_dir, shelf) = shelf(&[
            ("SHELF_API_MAX_BATCH_FILES", "2"),
            ("SHELF_API_MAX_BATCH_BYTES", "100"),
        ])
        .await;
        let mut batch = shelf.begin_batch(None).expect("begin");
        batch.start_file("a.txt").await.expect("start");
        batch.push(b"first file\n").await.expect("push");
        batch.start_file("b.txt").await.expect("start");
        batch.push(b"second file\n").await.expect("push");
        let err = batch.start_file("c.txt").await.expect_err("third file");
        assert!(matches!(
            err,
            UploadError::BatchTooLarge {
                max: 2,
                unit: "files"
            }
        ));
        assert_eq!(files_in(&shelf.documents.staging_dir()).len(), 2);
        drop(batch);
        assert!(files_in(&shelf.documents.staging_dir()).is_empty());

        let mut batch = shelf.begin_batch(None).expect("begin");
        batch.start_file("a.txt").await.expect("start");
        batch.push(&[b'a'; 60]).await.expect("push");
        batch.start_file("b.txt").await.expect("start");
        let err = batch.push(&[b'b'; 60]).await.expect_err("over the bytes");
        assert!(matches!(err, UploadError::BatchTooLarge { max: 100, .. }));
        drop(batch);
        assert!(files_in(&shelf.documents.staging_dir()).is_empty());
        assert_eq!(document_count(&shelf).await, 0);

        let framing = 2 * PART_FRAMING_BYTES;
        assert!(shelf.begin_batch(Some(100 + framing)).is_ok());
        assert!(matches!(
            shelf.begin_batch(Some(101 + framing)),
            Err(UploadError::BatchTooLarge { .. })
        ));
    }
}
