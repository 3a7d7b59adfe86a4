//! The document rows a pruned run leaves behind (its texts, page records and passages), as statements
//! for the engine's retention transaction, so a run and what it wrote go together.
//!
//! A run's subject is its document's id. Transcript segments (`document_segments`) and the
//! extraction cache belong to the document and its bytes, not to a run, and the search rows
//! are the document's current index: none of them is touched here.

use sea_orm::{Statement, Value};

use crate::sql::stmt;

/// A run the engine prunes, as this crate sees it: the run's id and its document (the run's
/// subject).
#[derive(Debug, Clone, Copy)]
pub struct PrunedRunOf<'a> {
    pub run_id: &'a str,
    pub document_id: &'a str,
}

/// Deletes the texts, page records and passages of `runs`. The tables are keyed by document
/// first (`document_texts_document`, the page records' primary key, the passages' unique key),
/// so naming the documents turns each delete into index lookups instead of a scan of every
/// text. A document's passages are its latest embedding run's: they go when that run does,
/// like the texts the index reads.
pub fn pruned_run_statements(runs: &[PrunedRunOf<'_>]) -> Vec<Statement> {
    if runs.is_empty() {
        return Vec::new();
    }
    let mut documents: Vec<&str> = runs.iter().map(|r| r.document_id).collect();
    documents.sort_unstable();
    documents.dedup();
    let values = || -> Vec<Value> {
        documents
            .iter()
            .map(|d| Value::from(d.to_string()))
            .chain(runs.iter().map(|r| Value::from(r.run_id.to_string())))
            .collect()
    };
    let condition = format!(
        "document_id IN ({}) AND run_id IN ({})",
        vec!["?"; documents.len()].join(", "),
        vec!["?"; runs.len()].join(", ")
    );
    vec![
        stmt(
            &format!("DELETE FROM document_texts WHERE {condition}"),
            values(),
        ),
        stmt(
            &format!("DELETE FROM document_pages WHERE {condition}"),
            values(),
        ),
        stmt(
            &format!("DELETE FROM document_passages WHERE {condition}"),
            values(),
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_each_document_once_and_every_run() {
        let runs = [
            PrunedRunOf {
                run_id: "run_a",
                document_id: "doc_1",
            },
            PrunedRunOf {
                run_id: "run_b",
                document_id: "doc_1",
            },
            PrunedRunOf {
                run_id: "run_c",
                document_id: "doc_2",
            },
        ];
        let statements = pruned_run_statements(&runs);
        assert_eq!(statements.len(), 3);
        assert_eq!(
            statements[0].sql,
            "DELETE FROM document_texts WHERE document_id IN (?, ?) AND run_id IN (?, ?, ?)"
        );
        assert_eq!(
            statements[1].values.as_ref().map(|v| v.0.len()),
            Some(5),
            "two documents, three runs"
        );
        assert!(pruned_run_statements(&[]).is_empty());
    }
}
