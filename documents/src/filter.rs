//! Which documents a listing shows (`GET /documents`, the library page): status,
//! classification prefix, tag and creation window, with the same meanings and the same
//! validation errors as search's filters of those names.

use chrono::{DateTime, Utc};
use sea_orm::{DbBackend, Value};

use crate::error::{DocumentsError, Result};
use crate::model::DocumentStatus;
use crate::search::parse_timestamp;
use crate::sql::{format_timestamp, push_classification_prefix};

/// A filter of the document list; the default lets every document through.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DocumentFilter {
    pub status: Option<DocumentStatus>,
    /// Code prefix, as search's `classification_prefix`: `636` matches `636` and `636.1…`;
    /// unclassified documents never match one.
    pub classification_prefix: Option<String>,
    /// One element of the document's tags, exactly (case and all).
    pub tag: Option<String>,
    /// Inclusive lower bound of `created_at`.
    pub created_after: Option<DateTime<Utc>>,
    /// Inclusive upper bound of `created_at`.
    pub created_before: Option<DateTime<Utc>>,
}

/// The filter as a query string or a form sends it: every field text, an empty one meaning
/// "no filter" (as in a search body).
#[derive(Debug, Clone, Copy, Default)]
pub struct DocumentFilterText<'a> {
    pub status: Option<&'a str>,
    pub classification_prefix: Option<&'a str>,
    pub tag: Option<&'a str>,
    /// RFC 3339, a date-time without offset (UTC) or a date (midnight UTC).
    pub created_after: Option<&'a str>,
    pub created_before: Option<&'a str>,
}

/// A text value, trimmed, or `None` when blank.
fn present(value: Option<&str>) -> Option<&str> {
    value.map(str::trim).filter(|s| !s.is_empty())
}

impl DocumentFilterText<'_> {
    /// Validates it with search's parsers and errors: `invalid_document_status`, a
    /// `validation_error` naming `created_after`/`created_before` for a time that is not one,
    /// and `invalid_search_window` when the window ends before it starts.
    pub fn parse(self) -> Result<DocumentFilter> {
        let created_after = present(self.created_after)
            .map(|s| parse_timestamp("created_after", s))
            .transpose()?;
        let created_before = present(self.created_before)
            .map(|s| parse_timestamp("created_before", s))
            .transpose()?;
        let filter = DocumentFilter {
            status: present(self.status)
                .map(DocumentStatus::parse)
                .transpose()?,
            classification_prefix: present(self.classification_prefix).map(str::to_string),
            tag: present(self.tag).map(str::to_string),
            created_after,
            created_before,
        };
        filter.check()?;
        Ok(filter)
    }
}

impl DocumentFilter {
    /// Refuses a window that ends before it starts (`invalid_search_window`), as search does.
    pub fn check(&self) -> Result<()> {
        if let (Some(after), Some(before)) = (self.created_after, self.created_before)
            && after > before
        {
            return Err(DocumentsError::InvalidSearchWindow);
        }
        Ok(())
    }

    /// `AND …` conditions on `documents d` for `backend`, every value bound. Blank text
    /// fields filter nothing.
    pub(crate) fn sql(&self, backend: DbBackend) -> (String, Vec<Value>) {
        let mut sql = String::new();
        let mut values: Vec<Value> = Vec::new();
        if let Some(status) = self.status {
            sql.push_str(" AND d.status = ?");
            values.push(status.as_str().into());
        }
        if let Some(prefix) = present(self.classification_prefix.as_deref()) {
            push_classification_prefix(&mut sql, &mut values, "d.classification", prefix);
        }
        if let Some(tag) = present(self.tag.as_deref()) {
            // `tags` is a JSON array of strings written by Shelf (serde); anything else counts
            // as no tags, so a malformed row is left out rather than failing the listing.
            sql.push_str(if backend == DbBackend::Postgres {
                " AND EXISTS (SELECT 1 FROM jsonb_array_elements_text(CASE WHEN d.tags LIKE '[%' \
                 THEN CAST(d.tags AS jsonb) ELSE CAST('[]' AS jsonb) END) j(value) WHERE j.value = ?)"
            } else {
                " AND EXISTS (SELECT 1 FROM json_each(CASE WHEN json_valid(d.tags) \
                 AND json_type(d.tags) = 'array' THEN d.tags ELSE '[]' END) j \
                 WHERE j.type = 'text' AND j.value = ?)"
            });
            values.push(tag.to_string().into());
        }
        if let Some(after) = self.created_after {
            sql.push_str(" AND d.created_at >= ?");
            values.push(format_timestamp(after).into());
        }
        if let Some(before) = self.created_before {
            sql.push_str(" AND d.created_at <= ?");
            values.push(format_timestamp(before).into());
        }
        (sql, values)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_parses_with_search_errors() {
        let filter = DocumentFilterText {
            status: Some(" ready "),
            classification_prefix: Some("636"),
            tag: Some(""),
            created_after: Some("2026-11-01"),
            created_before: Some("2026-11-02T10:00:00Z"),
        }
        .parse()
        .expect("valid");
        assert_eq!(filter.status, Some(DocumentStatus::Ready));
        assert_eq!(filter.classification_prefix.as_deref(), Some("636"));
        assert_eq!(filter.tag, None);
        assert_eq!(
            filter.created_after.map(format_timestamp).as_deref(),
            Some("2026-11-01T00:00:00.000Z")
        );
        assert_eq!(
            DocumentFilterText::default().parse().ok(),
            Some(DocumentFilter::default())
        );

        let code = |text: DocumentFilterText<'_>| text.parse().map_err(|e| e.code());
        assert_eq!(
            code(DocumentFilterText {
                status: Some("done"),
                ..Default::default()
            }),
            Err("invalid_document_status")
        );
        assert_eq!(
            code(DocumentFilterText {
                created_after: Some("yesterday"),
                ..Default::default()
            }),
            Err("validation_error")
        );
        assert_eq!(
            code(DocumentFilterText {
                created_after: Some("2026-11-02"),
                created_before: Some("2026-11-01"),
                ..Default::default()
            }),
            Err("invalid_search_window")
        );
    }
}
