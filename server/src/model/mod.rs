//! The JSON shapes of the API (the objects docs/api.md describes), one module per resource,
//! as types that both serialize the responses and describe them in `/openapi.json`.
//!
//! Where the wire shape is the domain's own (the run and its stages, the queue report, a
//! content page, a page summary, a facet bucket, the OKF bundle), the domain type derives its schema under
//! the published name and is served as it is. The types here that are built with `From` are
//! mirrors kept because the shapes truly differ: hidden fields, enums written as strings (the
//! schema promises a string), flags only the API adds, or a domain type in the engine, which
//! stays free of schema derives. Each mirror has a test that serializes both sides from one
//! value and names the fields that differ on purpose, so a field added to one side alone
//! fails it.

pub mod documents;
pub mod events;
pub mod runs;
pub mod search;
pub mod service;

/// What the mirror tests share: the keys a value serializes to, and the comparison.
#[cfg(test)]
pub(crate) mod mirror {
    use std::collections::BTreeSet;

    use serde::Serialize;

    /// The top-level keys of `value` serialized to JSON (an object).
    pub fn keys(value: &impl Serialize) -> BTreeSet<String> {
        match serde_json::to_value(value) {
            Ok(serde_json::Value::Object(map)) => map.keys().cloned().collect(),
            other => panic!("not an object: {other:?}"),
        }
    }

    /// The properties the published schema of `T` declares.
    pub fn schema_fields<T: utoipa::ToSchema>() -> BTreeSet<String> {
        let schema = serde_json::to_value(T::schema()).expect("a schema serializes");
        match schema.get("properties") {
            Some(serde_json::Value::Object(map)) => map.keys().cloned().collect(),
            other => panic!("no properties in {schema}: {other:?}"),
        }
    }

    /// A document with every optional field set, so every field serializes.
    pub fn document() -> shelf_documents::Document {
        shelf_documents::Document {
            id: "doc_0123456789abcdef".into(),
            filename: "goats.pdf".into(),
            status: shelf_documents::DocumentStatus::Ready,
            byte_size: 3,
            created_at: "2026-11-21T10:00:00.000Z".into(),
            updated_at: "2026-11-21T10:00:01.000Z".into(),
            classification: Some("636".into()),
            classification_label: Some("Animal husbandry".into()),
            classification_confidence: Some(0.9),
            title: Some("Goats".into()),
            summary: Some("On goats.".into()),
            tags: vec!["goats".into()],
            suggested_stem: Some("636 Goats".into()),
            extension: "pdf".into(),
            source_kind: shelf_documents::SourceKind::Upload,
            sha256: "ab".repeat(32),
            storage_path: "uploads/doc_0123456789abcdef/goats.pdf".into(),
            pk: 7,
        }
    }

    /// A transcript citation.
    pub fn citation() -> shelf_documents::TranscriptCitation {
        shelf_documents::TranscriptCitation {
            text: "the goats".into(),
            start_seconds: 1.0,
            end_seconds: 2.5,
            segment_start: 0,
            segment_end: 1,
            strategy: shelf_documents::CitationStrategy::Normalized,
            confidence: 0.95,
        }
    }

    /// `api` has the keys of `domain` but `domain_only`, plus `api_only`: the fields named
    /// as differing on purpose, and no other difference. Each name must be on its side, so
    /// a stale name fails too.
    pub fn assert_mirrors(
        what: &str,
        domain: BTreeSet<String>,
        api: BTreeSet<String>,
        domain_only: &[&str],
        api_only: &[&str],
    ) {
        for name in domain_only {
            assert!(
                domain.contains(*name),
                "{what}: {name} is not a domain field"
            );
        }
        for name in api_only {
            assert!(api.contains(*name), "{what}: {name} is not an API field");
        }
        let mut expected: BTreeSet<String> = domain
            .into_iter()
            .filter(|k| !domain_only.contains(&k.as_str()))
            .collect();
        expected.extend(api_only.iter().map(|n| n.to_string()));
        assert_eq!(
            api, expected,
            "{what}: the domain type and its API mirror drifted apart"
        );
    }
}
