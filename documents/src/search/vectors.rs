//! The dense half of search: an exact scan over every passage vector of one model, held in a
//! contiguous in-memory matrix per process, and kept current with the table.
//!
//! Why a scan and not an approximate index (HNSW): at 100,000 passages of 384 dimensions the
//! scan answers well inside the latency bar (figures in docs/search.md, measured by
//! `cargo run --release -p shelf-documents --example vector_scan`), is exact, costs no build
//! time, and has no index to keep in step with deletes.
//!
//! Keeping it current across processes: a worker commits passages in its process, the API
//! searches in another. Rows of `document_passages` are only ever inserted (with an `id` that
//! only grows) and deleted, never updated, so the table's `(count(*), max(id), sum(id))` changes
//! with every commit that touches it. Each search reads that signature (one statement); when
//! it differs from the matrix's, the matrix is brought up to date incrementally: rows with an
//! `id` above the highest loaded are read, the older rows of the documents they belong to are
//! dropped (writing a document's passages deletes all its rows first), and when the count
//! still differs (rows deleted), or on PostgreSQL (where an older transaction may commit a
//! lower id late), the table's ids are compared with the matrix's and the difference read or
//! dropped. A matrix is keyed by the database
//! (its file on SQLite, its name and port on PostgreSQL) and the model, so one process can
//! serve several databases (tests do).

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, LazyLock, Mutex};

use sea_orm::{ConnectionTrait, DbBackend, Value};
use shelf_db::sql::SqlExt;

use crate::error::{DocumentsError, Result};
use crate::passages::vector_from_bytes;
use crate::sql::stmt;

/// Ids per `IN (…)` list when reading rows the matrix misses.
const ID_BATCH: usize = 500;

/// Every passage vector of one model: row `r` is `values[r * dims..(r + 1) * dims]`, the
/// passage `ids[r]` of the document `documents[slots[r]]`.
#[derive(Debug, Clone, Default)]
pub struct VectorMatrix {
    dims: usize,
    values: Vec<f32>,
    ids: Vec<i64>,
    slots: Vec<u32>,
    documents: Vec<String>,
    slot_of: HashMap<String, u32>,
    /// The highest passage id ever pushed: rows above it are new to the matrix.
    max_id: i64,
}

/// A document's best passage for a query.
#[derive(Debug, Clone, PartialEq)]
pub struct DocumentMatch {
    pub document_id: String,
    /// The passage's `id` in `document_passages`.
    pub passage_id: i64,
    /// Cosine similarity of the best passage (the vectors are normalised: a dot product).
    pub score: f32,
}

impl VectorMatrix {
    /// An empty matrix of `dims` dimensions (0: taken from the first row pushed).
    pub fn new(dims: usize) -> Self {
        VectorMatrix {
            dims,
            ..VectorMatrix::default()
        }
    }

    /// Dimensions of the rows (0 while empty and unset).
    pub fn dims(&self) -> usize {
        self.dims
    }

    /// Rows held.
    pub fn len(&self) -> usize {
        self.ids.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    /// Bytes the matrix holds on the heap (vectors, ids, slots; not the document id strings'
    /// map overhead beyond their text).
    pub fn memory_bytes(&self) -> usize {
        self.values.capacity() * 4
            + self.ids.capacity() * 8
            + self.slots.capacity() * 4
            + self
                .documents
                .iter()
                .map(|d| d.capacity() + 24)
                .sum::<usize>()
    }

    /// Appends a passage's vector; `false` (and nothing added) when its length is not the
    /// matrix's.
    pub fn push(&mut self, document_id: &str, passage_id: i64, vector: &[f32]) -> bool {
        if self.dims == 0 {
            self.dims = vector.len();
        }
        if vector.len() != self.dims || vector.is_empty() {
            return false;
        }
        let slot = match self.slot_of.get(document_id) {
            Some(slot) => *slot,
            None => {
                let slot = u32::try_from(self.documents.len()).unwrap_or(u32::MAX);
                self.documents.push(document_id.to_string());
                self.slot_of.insert(document_id.to_string(), slot);
                slot
            }
        };
        self.values.extend_from_slice(vector);
        self.max_id = self.max_id.max(passage_id);
        self.ids.push(passage_id);
        self.slots.push(slot);
        true
    }

    /// Gives back the capacity the loads left over (the vectors grow by doubling) when it is
    /// over a quarter of what is used: a reallocation copies the matrix, not worth it for the
    /// few rows a refresh adds.
    pub fn shrink_to_fit(&mut self) {
        if self.values.capacity() > self.values.len() + self.values.len() / 4 {
            self.values.shrink_to_fit();
            self.ids.shrink_to_fit();
            self.slots.shrink_to_fit();
        }
    }

    /// Keeps only the rows whose passage id `keep` accepts: each row that goes is replaced by
    /// the last row, so a re-embedded document costs a copy of its own rows, not a move of
    /// every row after them. Rows are in no particular order.
    fn retain(&mut self, keep: impl Fn(i64) -> bool) {
        let dims = self.dims;
        let mut r = 0;
        while r < self.ids.len() {
            if keep(self.ids[r]) {
                r += 1;
                continue;
            }
            let last = self.ids.len() - 1;
            if r != last {
                self.ids[r] = self.ids[last];
                self.slots[r] = self.slots[last];
                self.values
                    .copy_within(last * dims..(last + 1) * dims, r * dims);
            }
            self.ids.truncate(last);
            self.slots.truncate(last);
            self.values.truncate(last * dims);
        }
    }

    /// The slot of a document, when it has rows.
    fn slot(&self, document_id: &str) -> Option<u32> {
        self.slot_of.get(document_id).copied()
    }

    /// The mean of a document's vectors, normalised; `None` without rows.
    pub fn document_mean(&self, document_id: &str) -> Option<Vec<f32>> {
        let slot = self.slot(document_id)?;
        let mut mean = vec![0f32; self.dims];
        let mut rows = 0usize;
        for (r, s) in self.slots.iter().enumerate() {
            if *s == slot {
                for (m, v) in mean.iter_mut().zip(self.row(r)) {
                    *m += v;
                }
                rows += 1;
            }
        }
        (rows > 0).then(|| normalised(mean))
    }

    fn row(&self, r: usize) -> &[f32] {
        &self.values[r * self.dims..(r + 1) * self.dims]
    }

    /// The best passage of every document, best documents first (ties: smaller document id),
    /// at most `k` of them. `allowed` keeps only those documents (the search's filters);
    /// `exclude` drops one (similar documents leave the document itself out). `Corrupt` when
    /// the query's length is not the matrix's.
    pub fn top_documents(
        &self,
        query: &[f32],
        k: usize,
        allowed: Option<&HashSet<String>>,
        exclude: Option<&str>,
    ) -> Result<Vec<DocumentMatch>> {
        if self.is_empty() {
            return Ok(Vec::new());
        }
        if query.len() != self.dims {
            return Err(DocumentsError::corrupt(format!(
                "a query vector of {} dimensions for passages of {}",
                query.len(),
                self.dims
            )));
        }
        let mut wanted: Vec<bool> = match allowed {
            Some(allowed) => self.documents.iter().map(|d| allowed.contains(d)).collect(),
            None => vec![true; self.documents.len()],
        };
        if let Some(slot) = exclude.and_then(|d| self.slot(d)) {
            wanted[slot as usize] = false;
        }
        let mut best: Vec<(f32, usize)> =
            vec![(f32::NEG_INFINITY, usize::MAX); self.documents.len()];
        for (r, (row, slot)) in self
            .values
            .chunks_exact(self.dims)
            .zip(&self.slots)
            .enumerate()
        {
            let slot = *slot as usize;
            if !wanted[slot] {
                continue;
            }
            let score = dot(row, query);
            if score > best[slot].0 {
                best[slot] = (score, r);
            }
        }
        let mut found: Vec<(f32, usize, usize)> = best
            .iter()
            .enumerate()
            .filter(|(_, (_, r))| *r != usize::MAX)
            .map(|(slot, (score, r))| (*score, slot, *r))
            .collect();
        let order = |a: &(f32, usize, usize), b: &(f32, usize, usize)| {
            b.0.total_cmp(&a.0)
                .then_with(|| self.documents[a.1].cmp(&self.documents[b.1]))
        };
        if found.len() > k && k > 0 {
            found.select_nth_unstable_by(k - 1, order);
            found.truncate(k);
        }
        found.sort_unstable_by(order);
        found.truncate(k);
        Ok(found
            .into_iter()
            .map(|(score, slot, r)| DocumentMatch {
                document_id: self.documents[slot].clone(),
                passage_id: self.ids[r],
                score,
            })
            .collect())
    }
}

/// The dot product, written so the compiler vectorises it: eight independent `f32`
/// accumulators over chunks of eight (no dependency chain between lanes), then the rest.
#[inline]
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut acc = [0f32; 8];
    let (chunks_a, chunks_b) = (a.chunks_exact(8), b.chunks_exact(8));
    let (rest_a, rest_b) = (chunks_a.remainder(), chunks_b.remainder());
    for (x, y) in chunks_a.zip(chunks_b) {
        for i in 0..8 {
            acc[i] += x[i] * y[i];
        }
    }
    let mut sum = ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
    for (x, y) in rest_a.iter().zip(rest_b) {
        sum += x * y;
    }
    sum
}

/// `v` scaled to unit length (unchanged when it is all zeros).
pub fn normalised(mut v: Vec<f32>) -> Vec<f32> {
    let norm = dot(&v, &v).sqrt();
    if norm > 0.0 && norm.is_finite() {
        for x in &mut v {
            *x /= norm;
        }
    }
    v
}

/// What a matrix was loaded at: the table's `(count, max id, sum of ids)`.
type Signature = (i64, i64, i64);

/// A process's matrix for one database and model, and the signature it is current at.
#[derive(Debug, Default)]
struct Cached {
    signature: Option<Signature>,
    matrix: Arc<VectorMatrix>,
}

type Slot = Arc<tokio::sync::Mutex<Cached>>;

/// The process's matrices, by database and model.
static MATRICES: LazyLock<Mutex<HashMap<(String, String), Slot>>> =
    LazyLock::new(|| Mutex::new(HashMap::new()));

/// The matrix of `model`'s passages in the connection's database, current as of this call
/// (see the module's comment). Rows of other models are not in it.
pub async fn current_matrix(conn: &impl ConnectionTrait, model: &str) -> Result<Arc<VectorMatrix>> {
    let (database, signature) = signature(conn).await?;
    // An in-memory SQLite database has no file to name it by: read it afresh each time.
    if database.is_empty() {
        let mut cached = Cached::default();
        refresh(conn, model, &mut cached, signature).await?;
        return Ok(cached.matrix);
    }
    let slot = {
        let mut map = MATRICES.lock().unwrap_or_else(|e| e.into_inner());
        map.entry((database, model.to_string()))
            .or_default()
            .clone()
    };
    // One refresh at a time per matrix: a second search waits for the first's and then finds
    // the matrix current.
    let mut cached = slot.lock().await;
    if cached.signature != Some(signature) {
        refresh(conn, model, &mut cached, signature).await?;
    }
    Ok(cached.matrix.clone())
}

/// The database's name and the passages table's signature, in one statement.
async fn signature(conn: &impl ConnectionTrait) -> Result<(String, Signature)> {
    let database = match conn.get_database_backend() {
        DbBackend::Postgres => {
            "current_database() || ':' || coalesce(inet_server_port()::text, '')"
        }
        _ => "(SELECT file FROM pragma_database_list WHERE name = 'main')",
    };
    let sum = match conn.get_database_backend() {
        // `sum(bigint)` is `numeric` on PostgreSQL.
        DbBackend::Postgres => "coalesce(sum(id), 0)::bigint",
        _ => "coalesce(sum(id), 0)",
    };
    let row = conn
        .query_one_sql(stmt(
            &format!(
                "SELECT {database} AS db, count(*) AS n, coalesce(max(id), 0) AS m, {sum} AS s \
                 FROM document_passages"
            ),
            [],
        ))
        .await?
        .ok_or_else(|| DocumentsError::corrupt("no row from an aggregate"))?;
    let database: Option<String> = row.try_get("", "db")?;
    Ok((
        database.unwrap_or_default(),
        (
            row.try_get("", "n")?,
            row.try_get("", "m")?,
            row.try_get("", "s")?,
        ),
    ))
}

/// Brings `cached` up to the table: new rows by id, then the ids compared when the count of
/// `model`'s rows says the matrix has rows that went or misses rows committed late.
async fn refresh(
    conn: &impl ConnectionTrait,
    model: &str,
    cached: &mut Cached,
    signature: Signature,
) -> Result<()> {
    // Copy-on-write: searches in flight keep the matrix they hold.
    let matrix = Arc::make_mut(&mut cached.matrix);
    let loaded_max = matrix.max_id;
    let rows = conn
        .query_all_sql(stmt(
            "SELECT id, document_id, vector FROM document_passages \
             WHERE model = ? AND id > ? ORDER BY id",
            [model.to_string().into(), loaded_max.into()],
        ))
        .await?;
    push_rows(matrix, &rows)?;
    // A document with new rows was re-embedded: the statements that wrote them deleted all
    // its rows first, so its older rows are gone (the common change during an import, told
    // without reading every id).
    let stale: HashSet<u32> = rows
        .iter()
        .filter_map(|row| row.try_get::<String>("", "document_id").ok())
        .filter_map(|d| matrix.slot(&d))
        .collect();
    if !stale.is_empty() {
        let gone: HashSet<i64> = matrix
            .ids
            .iter()
            .zip(&matrix.slots)
            .filter(|(id, slot)| **id <= loaded_max && stale.contains(slot))
            .map(|(id, _)| *id)
            .collect();
        matrix.retain(|id| !gone.contains(&id));
    }
    let count = conn
        .query_one_sql(stmt(
            "SELECT count(*) AS n FROM document_passages WHERE model = ?",
            [model.to_string().into()],
        ))
        .await?
        .map(|row| row.try_get::<i64>("", "n"))
        .transpose()?
        .unwrap_or(0);
    // On SQLite ids are given in commit order (one writer), so the matrix now holds every row
    // and maybe some deleted ones: equal counts mean equal sets. On PostgreSQL a transaction
    // may commit a lower id after a higher one was loaded, so every change compares the ids.
    let postgres = conn.get_database_backend() == DbBackend::Postgres;
    if postgres || usize::try_from(count).ok() != Some(matrix.len()) {
        let rows = conn
            .query_all_sql(stmt(
                "SELECT id FROM document_passages WHERE model = ?",
                [model.to_string().into()],
            ))
            .await?;
        let present: HashSet<i64> = rows
            .iter()
            .map(|row| row.try_get::<i64>("", "id"))
            .collect::<Result<_, _>>()?;
        matrix.retain(|id| present.contains(&id));
        let held: HashSet<i64> = matrix.ids.iter().copied().collect();
        let mut missing: Vec<i64> = present.difference(&held).copied().collect();
        missing.sort_unstable();
        for batch in missing.chunks(ID_BATCH) {
            let rows = conn
                .query_all_sql(stmt(
                    &format!(
                        "SELECT id, document_id, vector FROM document_passages \
                         WHERE id IN ({}) ORDER BY id",
                        vec!["?"; batch.len()].join(", ")
                    ),
                    batch.iter().map(|id| Value::from(*id)),
                ))
                .await?;
            push_rows(matrix, &rows)?;
        }
    }
    matrix.shrink_to_fit();
    cached.signature = Some(signature);
    Ok(())
}

fn push_rows(matrix: &mut VectorMatrix, rows: &[sea_orm::QueryResult]) -> Result<()> {
    for row in rows {
        let id: i64 = row.try_get("", "id")?;
        let document_id: String = row.try_get("", "document_id")?;
        let bytes: Vec<u8> = row.try_get("", "vector")?;
        let pushed = vector_from_bytes(&bytes)
            .map(|vector| matrix.push(&document_id, id, &vector))
            .unwrap_or(false);
        if !pushed {
            // A row of another length under the same model identity: the identity should
            // have changed with the dimensions. Left out rather than failing every search.
            tracing::warn!(
                passage = id,
                document_id,
                bytes = bytes.len(),
                "passage vector of the wrong length ignored"
            );
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn random_unit(rng: &mut fastrand::Rng, dims: usize) -> Vec<f32> {
        normalised((0..dims).map(|_| rng.f32() * 2.0 - 1.0).collect())
    }

    #[test]
    fn the_scan_matches_a_brute_force_reference() {
        let mut rng = fastrand::Rng::with_seed(27);
        for dims in [8usize, 13, 384] {
            let mut matrix = VectorMatrix::new(dims);
            let mut rows = Vec::new();
            for id in 0..500i64 {
                let doc = format!("doc_{}", rng.usize(0..60));
                let v = random_unit(&mut rng, dims);
                assert!(matrix.push(&doc, id, &v));
                rows.push((doc, id, v));
            }
            let query = random_unit(&mut rng, dims);
            let mut reference: HashMap<String, (f32, i64)> = HashMap::new();
            for (doc, id, v) in &rows {
                let score: f32 = v.iter().zip(&query).map(|(a, b)| a * b).sum();
                let entry = reference.entry(doc.clone()).or_insert((f32::MIN, -1));
                if score > entry.0 {
                    *entry = (score, *id);
                }
            }
            let mut expected: Vec<(String, (f32, i64))> = reference.into_iter().collect();
            expected.sort_by(|a, b| b.1.0.total_cmp(&a.1.0).then(a.0.cmp(&b.0)));
            let top = matrix.top_documents(&query, 10, None, None).expect("scan");
            assert_eq!(top.len(), 10);
            for (got, (doc, (score, id))) in top.iter().zip(&expected) {
                assert_eq!(&got.document_id, doc);
                assert_eq!(got.passage_id, *id);
                assert!((got.score - score).abs() < 1e-5);
            }
            let allowed: HashSet<String> = ["doc_3".to_string(), "doc_7".to_string()].into();
            let filtered = matrix
                .top_documents(&query, 10, Some(&allowed), Some("doc_7"))
                .expect("scan");
            assert!(filtered.iter().all(|m| m.document_id == "doc_3"));
        }
    }

    #[test]
    fn retain_keeps_rows_whole() {
        let mut matrix = VectorMatrix::new(2);
        for (id, doc) in [(3, "a"), (1, "b"), (2, "a"), (4, "c")] {
            matrix.push(doc, id, &[id as f32, -(id as f32)]);
        }
        matrix.retain(|id| id != 3 && id != 4);
        assert_eq!(matrix.ids, [2, 1]);
        assert_eq!(matrix.values, [2.0, -2.0, 1.0, -1.0]);
        assert_eq!(matrix.slots, [0, 1]);
        assert_eq!(matrix.max_id, 4, "ids stay new only once");
        assert!(!matrix.push("c", 9, &[1.0]), "a vector of another length");
        assert!(matrix.top_documents(&[1.0], 3, None, None).is_err());
    }
}
