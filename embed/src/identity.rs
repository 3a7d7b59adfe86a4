//! The weights' SHA-256, the part of a model's identity that changes when its vectors would.
//!
//! Hashing 90 MB costs about a quarter of a second in release (seconds in debug builds) at every
//! process start, so the digest is cached in a sidecar file beside the weights, keyed by the
//! file's size and modification time: anything that rewrites the weights changes one of them
//! (the fetch script installs a new directory, so a new file). Size + mtime alone would not do
//! as the identity itself: two copies of the same model would then differ, and stale vectors
//! would be recomputed for nothing. A read-only model directory (an image, a shared volume)
//! simply hashes at every start.

use std::io::Read;
use std::path::Path;
use std::time::UNIX_EPOCH;

use sha2::{Digest, Sha256};

use crate::EmbedError;

const SIDECAR: &str = ".shelf-weights-sha256";

/// Hex SHA-256 of the weights file, from the sidecar when it matches the file.
pub(crate) fn weights_digest(weights: &Path) -> Result<String, EmbedError> {
    let io = |source| EmbedError::Io {
        path: weights.to_path_buf(),
        source,
    };
    let meta = std::fs::metadata(weights).map_err(io)?;
    let stamp = meta
        .modified()
        .ok()
        .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .map(|d| format!("{} {}", meta.len(), d.as_nanos()));
    let sidecar = weights.with_file_name(SIDECAR);
    if let Some(stamp) = &stamp
        && let Ok(cached) = std::fs::read_to_string(&sidecar)
        && let Some((digest, rest)) = cached.trim().split_once(' ')
        && rest == stamp
        && digest.len() == 64
        && digest.bytes().all(|b| b.is_ascii_hexdigit())
    {
        return Ok(digest.to_string());
    }

    let mut file = std::fs::File::open(weights).map_err(io)?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = file.read(&mut buf).map_err(io)?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    let digest = hex::encode(hasher.finalize());
    if let Some(stamp) = stamp {
        // Best effort: written whole then renamed, so a reader never sees half a line; a
        // directory we cannot write to just costs a hash per start.
        let tmp = weights.with_file_name(format!("{SIDECAR}.{}", std::process::id()));
        if std::fs::write(&tmp, format!("{digest} {stamp}\n")).is_ok()
            && std::fs::rename(&tmp, &sidecar).is_err()
        {
            let _ = std::fs::remove_file(&tmp);
        }
    }
    Ok(digest)
}
