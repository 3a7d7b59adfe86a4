//! Sessions of the web pages in `web_sessions`: a sign-in exchanges an API key for a random
//! token the browser keeps in a cookie. Only the token's SHA-256 is stored (a copy of the
//! database holds no usable cookie), each session carries the scope of its key and a tag of
//! that key (the server ends sessions whose key left the configuration), and it expires
//! server-side `SHELF_API_SESSION_HOURS` after sign-in whatever the browser keeps. Expired rows
//! are deleted at each sign-in, so the table stays bounded without a scheduler.

use chrono::{DateTime, Duration, Utc};
use sea_orm::{DbBackend, Statement};
use sha2::{Digest, Sha256};
use shelf_db::begin_write;
use shelf_db::sql::SqlExt;
use shelf_documents::format_timestamp;

use crate::error::AppError;
use crate::settings::Scope;
use crate::shelf::Shelf;

/// Random bytes in a token: 256 bits, beyond guessing.
const TOKEN_BYTES: usize = 32;

/// A live session, as the middleware needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebSession {
    pub scope: Scope,
    /// The tag of the key the session was opened with (computed by the server from the key's
    /// digest); a session whose tag no configured key has any more is refused.
    pub credential_tag: String,
    pub expires_at: DateTime<Utc>,
}

fn stmt(sql: &str, values: Vec<sea_orm::Value>) -> Statement {
    Statement::from_sql_and_values(DbBackend::Sqlite, sql, values)
}

fn scope_name(scope: Scope) -> &'static str {
    match scope {
        Scope::Read => "read",
        Scope::Write => "write",
    }
}

/// The stored key of a token: the hex SHA-256 of its text. `None` for anything that is not a
/// token this module issues (64 lowercase hex characters), so a cookie of any other shape
/// never reaches the database.
fn token_digest(token: &str) -> Option<String> {
    let well_formed = token.len() == TOKEN_BYTES * 2
        && token
            .bytes()
            .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
    well_formed.then(|| hex::encode(Sha256::digest(token.as_bytes())))
}

impl Shelf {
    /// A new session of `scope` for the key tagged `credential_tag`, opened at `now` and
    /// expiring `SHELF_API_SESSION_HOURS` later: 32 bytes from the OS RNG, returned as 64
    /// lowercase hex characters (the cookie's value). Only its SHA-256 is stored. Expired
    /// sessions are deleted in the same transaction.
    pub async fn create_web_session(
        &self,
        scope: Scope,
        credential_tag: &str,
        now: DateTime<Utc>,
    ) -> Result<String, AppError> {
        let mut bytes = [0u8; TOKEN_BYTES];
        getrandom::fill(&mut bytes)
            .map_err(|e| AppError::Internal(format!("the OS random source failed: {e}")))?;
        let token = hex::encode(bytes);
        let digest = token_digest(&token)
            .ok_or_else(|| AppError::Internal("a new session token is malformed".into()))?;
        let expires = now + Duration::hours(i64::from(self.settings.api.session_hours));
        let now_text = format_timestamp(now);
        let txn = begin_write(&self.db).await?;
        txn.execute_sql(stmt(
            "DELETE FROM web_sessions WHERE expires_at <= ?",
            vec![now_text.clone().into()],
        ))
        .await?;
        txn.execute_sql(stmt(
            "INSERT INTO web_sessions (token_sha256, scope, credential_tag, created_at, expires_at) \
             VALUES (?, ?, ?, ?, ?)",
            vec![
                digest.into(),
                scope_name(scope).into(),
                credential_tag.into(),
                now_text.into(),
                format_timestamp(expires).into(),
            ],
        ))
        .await?;
        txn.commit().await?;
        Ok(token)
    }

    /// The session of `token` if it is live at `now`; `None` when the token is unknown, not
    /// of a token's shape, or expired (an expired row is left for the next sign-in to delete:
    /// a lookup stays a read).
    pub async fn web_session(
        &self,
        token: &str,
        now: DateTime<Utc>,
    ) -> Result<Option<WebSession>, AppError> {
        let Some(digest) = token_digest(token) else {
            return Ok(None);
        };
        let Some(row) = self
            .db
            .query_one_sql(stmt(
                "SELECT scope, credential_tag, expires_at FROM web_sessions \
                 WHERE token_sha256 = ? AND expires_at > ?",
                vec![digest.into(), format_timestamp(now).into()],
            ))
            .await?
        else {
            return Ok(None);
        };
        let scope = match row.try_get::<String>("", "scope")?.as_str() {
            "read" => Scope::Read,
            "write" => Scope::Write,
            other => {
                return Err(AppError::Internal(format!(
                    "a web session has the unknown scope `{other}`"
                )));
            }
        };
        let expires_text: String = row.try_get("", "expires_at")?;
        let expires_at = DateTime::parse_from_rfc3339(&expires_text)
            .map_err(|e| {
                AppError::Internal(format!(
                    "a web session's expiry `{expires_text}` is not a time: {e}"
                ))
            })?
            .with_timezone(&Utc);
        Ok(Some(WebSession {
            scope,
            credential_tag: row.try_get("", "credential_tag")?,
            expires_at,
        }))
    }

    /// Ends the session of `token` (sign-out). Ending one that is unknown, malformed or
    /// already ended does nothing.
    pub async fn end_web_session(&self, token: &str) -> Result<(), AppError> {
        let Some(digest) = token_digest(token) else {
            return Ok(());
        };
        let txn = begin_write(&self.db).await?;
        txn.execute_sql(stmt(
            "DELETE FROM web_sessions WHERE token_sha256 = ?",
            vec![digest.into()],
        ))
        .await?;
        txn.commit().await?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_tokens_of_the_issued_shape_have_a_digest() {
        let token = "0123456789abcdef".repeat(4);
        assert_eq!(token_digest(&token).map(|d| d.len()), Some(64));
        assert_eq!(token_digest(&token[..63]), None);
        assert_eq!(token_digest(&format!("{token}0")), None);
        assert_eq!(token_digest(&token.to_uppercase()), None);
        assert_eq!(token_digest(&format!("{}g", &token[..63])), None);
        assert_eq!(token_digest(""), None);
        // 64 bytes but not 64 characters of hex.
        assert_eq!(token_digest(&format!("{}é", &token[..62])), None);
    }
}
