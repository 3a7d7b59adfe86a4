//! API credentials: the secret wrapper that never prints, scopes, and the parse of
//! `SHELF_API_KEY`, `SHELF_API_KEYS`, `SHELF_API_KEY_SHA256` and `SHELF_API_KEY_HASHES`.

use std::fmt;

use serde::Serialize;
use sha2::{Digest, Sha256};

use super::reader::Reader;

/// A secret value: `Debug` and `Display` print `[redacted]`, and it is never serialized.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: impl Into<String>) -> Self {
        Secret(value.into())
    }

    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[redacted]")
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Scope {
    Read,
    Write,
}

/// A configured API credential: a key, or the SHA-256 of one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Credential {
    Key { scope: Scope, key: Secret },
    Hash { scope: Scope, sha256: [u8; 32] },
}

impl Credential {
    pub fn scope(&self) -> Scope {
        match self {
            Credential::Key { scope, .. } | Credential::Hash { scope, .. } => *scope,
        }
    }

    /// The SHA-256 every comparison uses, so keys and hashes compare the same constant-time way.
    pub fn digest(&self) -> [u8; 32] {
        match self {
            Credential::Key { key, .. } => Sha256::digest(key.expose().as_bytes()).into(),
            Credential::Hash { sha256, .. } => *sha256,
        }
    }
}

fn parse_sha256(text: &str) -> Option<[u8; 32]> {
    let bytes = hex::decode(text.trim().to_ascii_lowercase()).ok()?;
    bytes.try_into().ok()
}

/// `read:<x>` / `write:<x>` / `<x>` (write).
fn split_scope(entry: &str) -> (Scope, &str) {
    if let Some(rest) = entry.strip_prefix("read:") {
        (Scope::Read, rest)
    } else if let Some(rest) = entry.strip_prefix("write:") {
        (Scope::Write, rest)
    } else {
        (Scope::Write, entry)
    }
}

/// Every configured credential, in the order of the variables and of their entries.
pub(super) fn parse(r: &mut Reader) -> Vec<Credential> {
    let mut credentials = Vec::new();
    if let Some(key) = r.optional("SHELF_API_KEY") {
        credentials.push(Credential::Key {
            scope: Scope::Write,
            key: Secret::new(key),
        });
    }
    if let Some(list) = r.optional("SHELF_API_KEYS") {
        for entry in list.split(',').map(str::trim).filter(|e| !e.is_empty()) {
            let (scope, key) = split_scope(entry);
            if key.is_empty() {
                r.problems
                    .push("SHELF_API_KEYS: an entry has a scope but no key".into());
            } else {
                credentials.push(Credential::Key {
                    scope,
                    key: Secret::new(key),
                });
            }
        }
    }
    if let Some(hash) = r.optional("SHELF_API_KEY_SHA256") {
        match parse_sha256(&hash) {
            Some(sha256) => credentials.push(Credential::Hash {
                scope: Scope::Write,
                sha256,
            }),
            None => r
                .problems
                .push("SHELF_API_KEY_SHA256: expected 64 hexadecimal digits".into()),
        }
    }
    if let Some(list) = r.optional("SHELF_API_KEY_HASHES") {
        for entry in list.split(',').map(str::trim).filter(|e| !e.is_empty()) {
            let (scope, hash) = split_scope(entry);
            match parse_sha256(hash) {
                Some(sha256) => credentials.push(Credential::Hash { scope, sha256 }),
                None => r.problems.push(
                    "SHELF_API_KEY_HASHES: each entry must be [read:|write:]<64 hex digits>".into(),
                ),
            }
        }
    }
    credentials
}
