//! Database and workspace administration behind `shelf admin db-*` and `workspace-*`:
//! checks, statistics, maintenance, backups and restores. The CLI only parses arguments and
//! prints; every rule (symlinked paths, archive caps, the liveness lock) lives here.

pub mod db;
pub mod error;
pub mod lock;
pub mod paths;
pub mod workspace;

use std::io::Write;

use sha2::{Digest, Sha256};

pub use error::AdminError;

/// What long work reports as it goes (the CLI draws a progress bar from it).
pub trait Progress: Send + Sync {
    /// A phase begins with this many bytes to move.
    fn start(&self, phase: &str, total_bytes: u64);
    fn advance(&self, bytes: u64);
}

/// Reports nothing.
pub struct Silent;

impl Progress for Silent {
    fn start(&self, _phase: &str, _total_bytes: u64) {}
    fn advance(&self, _bytes: u64) {}
}

/// A writer that hashes and counts what passes through it, and reports progress: one pass
/// over each file, whether it goes into an archive or out of one.
pub(crate) struct Hashing<'a, W: Write> {
    inner: W,
    hasher: Sha256,
    bytes: u64,
    progress: &'a dyn Progress,
}

impl<'a, W: Write> Hashing<'a, W> {
    pub(crate) fn new(inner: W, progress: &'a dyn Progress) -> Self {
        Hashing {
            inner,
            hasher: Sha256::new(),
            bytes: 0,
            progress,
        }
    }

    /// Bytes written and their lowercase hex SHA-256.
    pub(crate) fn finish(self) -> (u64, String) {
        (self.bytes, hex::encode(self.hasher.finalize()))
    }
}

impl<W: Write> Write for Hashing<'_, W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.hasher.update(&buf[..n]);
        self.bytes += n as u64;
        self.progress.advance(n as u64);
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

/// Runs blocking file work (ZIP streams, directory walks) off the async workers.
pub(crate) async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, AdminError> + Send + 'static,
) -> Result<T, AdminError> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| AdminError::Io {
            what: "background file work".into(),
            source: std::io::Error::other(e.to_string()),
        })?
}
