//! One copy of each text: the full-text indexes and the extraction cache stop keeping their own
//! copies of the texts `document_texts` already holds.
//!
//! - `search_documents` says, per indexed document (its `pk`), which stored texts are its
//!   cleaned and raw index bodies and which run indexed them. On SQLite the FTS5 tables become
//!   external-content tables over two views of it (`search_cleaned_source`, `search_raw_source`),
//!   so FTS5 keeps only its index and reads a body from `document_texts` when it builds a
//!   snippet; triggers keep the index in step with the rows it reads, whoever writes them (a
//!   reindex, a text overwritten, a text deleted with its run or its document). On PostgreSQL
//!   the `tsvector`s live in `search_documents` and `search_cleaned`/`search_raw` become views
//!   of the same columns as before (`rowid`, `body`, `run_id`, `tsv`), so search reads them
//!   unchanged.
//! - `extraction_cache.text_id` names the stored raw text holding an extraction's Markdown; the
//!   cached JSON then keeps an empty `markdown`. A cache row whose text is gone is a miss.
//!
//! An existing database is converted: each index row is mapped to the stored text with the same
//! body (the indexing run's first), or, where none has it (texts pruned, rows indexed by hand),
//! keeps its body as a text of its own (kind `indexed_cleaned` / `indexed_raw`); the FTS5 tables
//! are rebuilt from the texts; cache rows whose Markdown a stored raw text of their file holds
//! point at it. The chunk checkpoints of stages that succeeded go (the engine now drops them
//! with the success).

use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub struct Migration;

/// SQLite. The views remove the two private-use characters search uses as highlight sentinels
/// from the bodies, as the index always did, so no source text can forge a highlight; a text
/// rarely holds one, so each index row says whether its text does (`*_strip`, computed when the
/// row or the text is written) and the views pay for the removal only then (it copies the
/// body twice, which cost FTS5 snippet queries about 8 % when every body paid for it).
const UP: &[&str] = &[
    // The index as it is, before its tables go (their `_content` tables are the copies).
    "CREATE TABLE search_migration (pk INTEGER PRIMARY KEY, run_id TEXT, cleaned TEXT, raw TEXT)",
    "INSERT INTO search_migration (pk, run_id, cleaned) SELECT rowid, run_id, body FROM search_cleaned",
    "INSERT INTO search_migration (pk, raw) SELECT rowid, body FROM search_raw WHERE true \
     ON CONFLICT (pk) DO UPDATE SET raw = excluded.raw",
    "DROP TABLE search_cleaned",
    "DROP TABLE search_raw",
    r#"CREATE TABLE search_documents (
        pk INTEGER PRIMARY KEY,
        run_id TEXT,
        cleaned_text_id TEXT NOT NULL,
        raw_text_id TEXT NOT NULL,
        cleaned_strip INTEGER NOT NULL DEFAULT 0,
        raw_strip INTEGER NOT NULL DEFAULT 0
    )"#,
    // What the triggers on `document_texts` look up for every text written or deleted.
    "CREATE INDEX search_documents_cleaned_text ON search_documents (cleaned_text_id)",
    "CREATE INDEX search_documents_raw_text ON search_documents (raw_text_id)",
    // Each row to the stored text with its body: the indexing run's text first, then the kind,
    // then the newest; a fallback id where no stored text has the body. (A window, as SQLite
    // resolves no outer column in a subquery's ORDER BY.)
    "INSERT INTO search_documents (pk, run_id, cleaned_text_id, raw_text_id) \
     SELECT m.pk, m.run_id, COALESCE(c.id, 'index:' || d.id || ':cleaned'), \
       COALESCE(r.id, 'index:' || d.id || ':raw') \
     FROM search_migration m JOIN documents d ON d.pk = m.pk \
     LEFT JOIN (SELECT pk, id FROM (SELECT m.pk AS pk, t.id AS id, row_number() OVER ( \
         PARTITION BY m.pk ORDER BY (t.run_id IS m.run_id) DESC, (t.kind = 'cleaned') DESC, \
         t.created_at DESC, t.rowid DESC) AS n \
       FROM search_migration m JOIN documents d ON d.pk = m.pk \
       JOIN document_texts t ON t.document_id = d.id \
       AND replace(replace(t.body, char(57344), ''), char(57345), '') = COALESCE(m.cleaned, '')) \
       WHERE n = 1) c ON c.pk = m.pk \
     LEFT JOIN (SELECT pk, id FROM (SELECT m.pk AS pk, t.id AS id, row_number() OVER ( \
         PARTITION BY m.pk ORDER BY (t.run_id IS m.run_id) DESC, (t.kind = 'raw') DESC, \
         t.created_at DESC, t.rowid DESC) AS n \
       FROM search_migration m JOIN documents d ON d.pk = m.pk \
       JOIN document_texts t ON t.document_id = d.id \
       AND replace(replace(t.body, char(57344), ''), char(57345), '') = COALESCE(m.raw, '')) \
       WHERE n = 1) r ON r.pk = m.pk",
    "INSERT INTO document_texts (id, document_id, run_id, kind, body, chars, created_at) \
     SELECT s.cleaned_text_id, d.id, COALESCE(m.run_id, ''), 'indexed_cleaned', \
       COALESCE(m.cleaned, ''), length(COALESCE(m.cleaned, '')), \
       strftime('%Y-%m-%dT%H:%M:%fZ', 'now') \
     FROM search_documents s JOIN search_migration m ON m.pk = s.pk \
     JOIN documents d ON d.pk = s.pk WHERE s.cleaned_text_id = 'index:' || d.id || ':cleaned' \
     ON CONFLICT (id) DO NOTHING",
    "INSERT INTO document_texts (id, document_id, run_id, kind, body, chars, created_at) \
     SELECT s.raw_text_id, d.id, COALESCE(m.run_id, ''), 'indexed_raw', \
       COALESCE(m.raw, ''), length(COALESCE(m.raw, '')), \
       strftime('%Y-%m-%dT%H:%M:%fZ', 'now') \
     FROM search_documents s JOIN search_migration m ON m.pk = s.pk \
     JOIN documents d ON d.pk = s.pk WHERE s.raw_text_id = 'index:' || d.id || ':raw' \
     ON CONFLICT (id) DO NOTHING",
    "DROP TABLE search_migration",
    "UPDATE search_documents SET \
       cleaned_strip = COALESCE((SELECT instr(t.body, char(57344)) > 0 \
         OR instr(t.body, char(57345)) > 0 FROM document_texts t \
         WHERE t.id = search_documents.cleaned_text_id), 0), \
       raw_strip = COALESCE((SELECT instr(t.body, char(57344)) > 0 \
         OR instr(t.body, char(57345)) > 0 FROM document_texts t \
         WHERE t.id = search_documents.raw_text_id), 0)",
    // What FTS5 reads as its content: the body of the text each indexed document names.
    "CREATE VIEW search_cleaned_source AS SELECT s.pk AS pk, \
     CASE WHEN s.cleaned_strip THEN replace(replace(t.body, char(57344), ''), char(57345), '') \
       ELSE t.body END AS body, s.run_id AS run_id \
     FROM search_documents s JOIN document_texts t ON t.id = s.cleaned_text_id",
    "CREATE VIEW search_raw_source AS SELECT s.pk AS pk, \
     CASE WHEN s.raw_strip THEN replace(replace(t.body, char(57344), ''), char(57345), '') \
       ELSE t.body END AS body \
     FROM search_documents s JOIN document_texts t ON t.id = s.raw_text_id",
    r#"CREATE VIRTUAL TABLE search_cleaned USING fts5 (
        body, run_id UNINDEXED, content = 'search_cleaned_source', content_rowid = 'pk',
        tokenize = 'porter unicode61 remove_diacritics 2'
    )"#,
    r#"CREATE VIRTUAL TABLE search_raw USING fts5 (
        body, content = 'search_raw_source', content_rowid = 'pk',
        tokenize = 'porter unicode61 remove_diacritics 2'
    )"#,
    "INSERT INTO search_cleaned (search_cleaned) VALUES ('rebuild')",
    "INSERT INTO search_raw (search_raw) VALUES ('rebuild')",
    // An external-content index must be told the old values of a row before they change or go
    // (FTS5 cannot find the tokens to remove otherwise): BEFORE triggers read them from the
    // views while they still hold them, AFTER triggers set the strip flags (an update of the
    // flags alone fires none of these) and index the new values.
    "CREATE TRIGGER search_documents_insert AFTER INSERT ON search_documents BEGIN \
       UPDATE search_documents SET \
         cleaned_strip = COALESCE((SELECT instr(t.body, char(57344)) > 0 \
           OR instr(t.body, char(57345)) > 0 FROM document_texts t \
           WHERE t.id = new.cleaned_text_id), 0), \
         raw_strip = COALESCE((SELECT instr(t.body, char(57344)) > 0 \
           OR instr(t.body, char(57345)) > 0 FROM document_texts t \
           WHERE t.id = new.raw_text_id), 0) \
       WHERE pk = new.pk; \
       INSERT INTO search_cleaned (rowid, body, run_id) \
         SELECT pk, body, run_id FROM search_cleaned_source WHERE pk = new.pk; \
       INSERT INTO search_raw (rowid, body) \
         SELECT pk, body FROM search_raw_source WHERE pk = new.pk; \
     END",
    "CREATE TRIGGER search_documents_delete BEFORE DELETE ON search_documents BEGIN \
       INSERT INTO search_cleaned (search_cleaned, rowid, body, run_id) \
         SELECT 'delete', pk, body, run_id FROM search_cleaned_source WHERE pk = old.pk; \
       INSERT INTO search_raw (search_raw, rowid, body) \
         SELECT 'delete', pk, body FROM search_raw_source WHERE pk = old.pk; \
     END",
    "CREATE TRIGGER search_documents_update_old \
     BEFORE UPDATE OF pk, run_id, cleaned_text_id, raw_text_id ON search_documents BEGIN \
       INSERT INTO search_cleaned (search_cleaned, rowid, body, run_id) \
         SELECT 'delete', pk, body, run_id FROM search_cleaned_source WHERE pk = old.pk; \
       INSERT INTO search_raw (search_raw, rowid, body) \
         SELECT 'delete', pk, body FROM search_raw_source WHERE pk = old.pk; \
     END",
    "CREATE TRIGGER search_documents_update_new \
     AFTER UPDATE OF pk, run_id, cleaned_text_id, raw_text_id ON search_documents BEGIN \
       UPDATE search_documents SET \
         cleaned_strip = COALESCE((SELECT instr(t.body, char(57344)) > 0 \
           OR instr(t.body, char(57345)) > 0 FROM document_texts t \
           WHERE t.id = new.cleaned_text_id), 0), \
         raw_strip = COALESCE((SELECT instr(t.body, char(57344)) > 0 \
           OR instr(t.body, char(57345)) > 0 FROM document_texts t \
           WHERE t.id = new.raw_text_id), 0) \
       WHERE pk = new.pk; \
       INSERT INTO search_cleaned (rowid, body, run_id) \
         SELECT pk, body, run_id FROM search_cleaned_source WHERE pk = new.pk; \
       INSERT INTO search_raw (rowid, body) \
         SELECT pk, body FROM search_raw_source WHERE pk = new.pk; \
     END",
    // A text the index reads that goes (its run pruned, its document deleted) takes its
    // document out of the index first; one rewritten in place is indexed again.
    "CREATE TRIGGER document_texts_delete_search BEFORE DELETE ON document_texts \
     WHEN EXISTS (SELECT 1 FROM search_documents \
       WHERE cleaned_text_id = old.id OR raw_text_id = old.id) BEGIN \
       DELETE FROM search_documents WHERE cleaned_text_id = old.id OR raw_text_id = old.id; \
     END",
    "CREATE TRIGGER document_texts_update_search_old BEFORE UPDATE OF id, body ON document_texts \
     WHEN EXISTS (SELECT 1 FROM search_documents \
       WHERE cleaned_text_id = old.id OR raw_text_id = old.id) BEGIN \
       INSERT INTO search_cleaned (search_cleaned, rowid, body, run_id) \
         SELECT 'delete', pk, body, run_id FROM search_cleaned_source \
         WHERE pk IN (SELECT pk FROM search_documents WHERE cleaned_text_id = old.id); \
       INSERT INTO search_raw (search_raw, rowid, body) \
         SELECT 'delete', pk, body FROM search_raw_source \
         WHERE pk IN (SELECT pk FROM search_documents WHERE raw_text_id = old.id); \
     END",
    "CREATE TRIGGER document_texts_update_search_new AFTER UPDATE OF id, body ON document_texts \
     WHEN EXISTS (SELECT 1 FROM search_documents \
       WHERE cleaned_text_id = new.id OR raw_text_id = new.id) BEGIN \
       UPDATE search_documents SET cleaned_strip = \
         (instr(new.body, char(57344)) > 0 OR instr(new.body, char(57345)) > 0) \
         WHERE cleaned_text_id = new.id; \
       UPDATE search_documents SET raw_strip = \
         (instr(new.body, char(57344)) > 0 OR instr(new.body, char(57345)) > 0) \
         WHERE raw_text_id = new.id; \
       INSERT INTO search_cleaned (rowid, body, run_id) \
         SELECT pk, body, run_id FROM search_cleaned_source \
         WHERE pk IN (SELECT pk FROM search_documents WHERE cleaned_text_id = new.id); \
       INSERT INTO search_raw (rowid, body) \
         SELECT pk, body FROM search_raw_source \
         WHERE pk IN (SELECT pk FROM search_documents WHERE raw_text_id = new.id); \
     END",
    // The extraction cache names the stored raw text with its Markdown instead of a copy. A
    // temporary index finds a cached file's documents by their bytes' hash.
    "ALTER TABLE extraction_cache ADD COLUMN text_id TEXT",
    "CREATE INDEX extraction_cache_migration ON documents (sha256)",
    "UPDATE extraction_cache SET text_id = (SELECT t.id FROM documents d \
       JOIN document_texts t ON t.document_id = d.id \
       WHERE d.sha256 = extraction_cache.sha256 AND t.kind = 'raw' \
       AND t.body = json_extract(extraction_cache.result, '$.markdown') \
       ORDER BY t.created_at DESC, t.rowid DESC LIMIT 1) \
     WHERE json_valid(result) AND json_type(result, '$.markdown') = 'text'",
    "UPDATE extraction_cache SET result = json_set(result, '$.markdown', '') \
     WHERE text_id IS NOT NULL",
    "DROP INDEX extraction_cache_migration",
    PARTS_OF_SUCCEEDED_STAGES,
];

/// The chunk checkpoints of stages that succeeded, which the engine now drops with the
/// success (they only serve to resume an unfinished attempt). The same on both backends.
const PARTS_OF_SUCCEEDED_STAGES: &str = "DELETE FROM run_stage_parts WHERE EXISTS (SELECT 1 \
     FROM run_stages s WHERE s.run_id = run_stage_parts.run_id \
     AND s.name = run_stage_parts.stage AND s.status = 'succeeded')";

/// PostgreSQL: the same table and cache column; the `tsvector`s (as before, `english` over the
/// stripped body) are computed by a trigger from the texts, and `search_cleaned`/`search_raw`
/// are views whose `LEFT JOIN` to the text the planner drops when a query reads no `body`.
const UP_POSTGRES: &[&str] = &[
    "CREATE TABLE search_migration AS SELECT COALESCE(c.rowid, r.rowid) AS pk, c.run_id, \
       c.body AS cleaned, r.body AS raw, c.tsv AS cleaned_tsv, r.tsv AS raw_tsv \
     FROM search_cleaned c FULL JOIN search_raw r ON r.rowid = c.rowid",
    "DROP TABLE search_cleaned",
    "DROP TABLE search_raw",
    r#"CREATE TABLE search_documents (
        pk BIGINT PRIMARY KEY,
        run_id TEXT,
        cleaned_text_id TEXT NOT NULL,
        raw_text_id TEXT NOT NULL,
        cleaned_strip BIGINT NOT NULL DEFAULT 0,
        raw_strip BIGINT NOT NULL DEFAULT 0,
        cleaned_tsv tsvector NOT NULL,
        raw_tsv tsvector NOT NULL
    )"#,
    "CREATE INDEX search_documents_cleaned_text ON search_documents (cleaned_text_id)",
    "CREATE INDEX search_documents_raw_text ON search_documents (raw_text_id)",
    // The vectors are those the rows had (computed from the same bodies).
    "INSERT INTO search_documents (pk, run_id, cleaned_text_id, raw_text_id, cleaned_tsv, raw_tsv) \
     SELECT m.pk, m.run_id, \
       COALESCE((SELECT t.id FROM document_texts t WHERE t.document_id = d.id \
         AND translate(t.body, chr(57344) || chr(57345), '') = COALESCE(m.cleaned, '') \
         ORDER BY (t.run_id IS NOT DISTINCT FROM m.run_id) DESC, (t.kind = 'cleaned') DESC, \
         t.created_at DESC, t.rowid DESC LIMIT 1), 'index:' || d.id || ':cleaned'), \
       COALESCE((SELECT t.id FROM document_texts t WHERE t.document_id = d.id \
         AND translate(t.body, chr(57344) || chr(57345), '') = COALESCE(m.raw, '') \
         ORDER BY (t.run_id IS NOT DISTINCT FROM m.run_id) DESC, (t.kind = 'raw') DESC, \
         t.created_at DESC, t.rowid DESC LIMIT 1), 'index:' || d.id || ':raw'), \
       COALESCE(m.cleaned_tsv, ''::tsvector), COALESCE(m.raw_tsv, ''::tsvector) \
     FROM search_migration m JOIN documents d ON d.pk = m.pk",
    "INSERT INTO document_texts (id, document_id, run_id, kind, body, chars, created_at) \
     SELECT s.cleaned_text_id, d.id, COALESCE(m.run_id, ''), 'indexed_cleaned', \
       COALESCE(m.cleaned, ''), char_length(COALESCE(m.cleaned, '')), \
       to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"') \
     FROM search_documents s JOIN search_migration m ON m.pk = s.pk \
     JOIN documents d ON d.pk = s.pk WHERE s.cleaned_text_id = 'index:' || d.id || ':cleaned' \
     ON CONFLICT (id) DO NOTHING",
    "INSERT INTO document_texts (id, document_id, run_id, kind, body, chars, created_at) \
     SELECT s.raw_text_id, d.id, COALESCE(m.run_id, ''), 'indexed_raw', \
       COALESCE(m.raw, ''), char_length(COALESCE(m.raw, '')), \
       to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"') \
     FROM search_documents s JOIN search_migration m ON m.pk = s.pk \
     JOIN documents d ON d.pk = s.pk WHERE s.raw_text_id = 'index:' || d.id || ':raw' \
     ON CONFLICT (id) DO NOTHING",
    "DROP TABLE search_migration",
    "UPDATE search_documents SET \
       cleaned_strip = COALESCE((SELECT CASE WHEN strpos(t.body, chr(57344)) > 0 \
         OR strpos(t.body, chr(57345)) > 0 THEN 1 ELSE 0 END FROM document_texts t \
         WHERE t.id = search_documents.cleaned_text_id), 0), \
       raw_strip = COALESCE((SELECT CASE WHEN strpos(t.body, chr(57344)) > 0 \
         OR strpos(t.body, chr(57345)) > 0 THEN 1 ELSE 0 END FROM document_texts t \
         WHERE t.id = search_documents.raw_text_id), 0)",
    // The GIN indexes keep their names (`search_*_tsv`), now on the vectors' new table.
    "CREATE INDEX search_cleaned_tsv ON search_documents USING GIN (cleaned_tsv)",
    "CREATE INDEX search_raw_tsv ON search_documents USING GIN (raw_tsv)",
    // The body's CASE on the row's flag also keeps the planner from pushing a condition on the
    // body (the `simple` vector of stop-word terms) down to a scan of every text: it is
    // evaluated only for the rows the vector matched (measured: a filter on `t.body` alone
    // made such a query 14 times slower).
    "CREATE VIEW search_cleaned AS SELECT s.pk AS rowid, \
       CASE WHEN s.cleaned_strip = 1 THEN translate(t.body, chr(57344) || chr(57345), '') \
         ELSE t.body END AS body, s.run_id AS run_id, s.cleaned_tsv AS tsv \
     FROM search_documents s LEFT JOIN document_texts t ON t.id = s.cleaned_text_id",
    "CREATE VIEW search_raw AS SELECT s.pk AS rowid, \
       CASE WHEN s.raw_strip = 1 THEN translate(t.body, chr(57344) || chr(57345), '') \
         ELSE t.body END AS body, s.raw_tsv AS tsv \
     FROM search_documents s LEFT JOIN document_texts t ON t.id = s.raw_text_id",
    // The vectors and strip flags of a row, from its texts, whenever it is written.
    r#"CREATE FUNCTION search_documents_vectors() RETURNS trigger LANGUAGE plpgsql AS $$
    DECLARE
        cleaned TEXT := COALESCE((SELECT body FROM document_texts WHERE id = NEW.cleaned_text_id), '');
        raw TEXT := COALESCE((SELECT body FROM document_texts WHERE id = NEW.raw_text_id), '');
    BEGIN
        NEW.cleaned_strip := CASE WHEN strpos(cleaned, chr(57344)) > 0
            OR strpos(cleaned, chr(57345)) > 0 THEN 1 ELSE 0 END;
        NEW.raw_strip := CASE WHEN strpos(raw, chr(57344)) > 0
            OR strpos(raw, chr(57345)) > 0 THEN 1 ELSE 0 END;
        NEW.cleaned_tsv := to_tsvector('english', translate(cleaned, chr(57344) || chr(57345), ''));
        NEW.raw_tsv := to_tsvector('english', translate(raw, chr(57344) || chr(57345), ''));
        RETURN NEW;
    END
    $$"#,
    "CREATE TRIGGER search_documents_vectors BEFORE INSERT OR UPDATE ON search_documents \
     FOR EACH ROW EXECUTE FUNCTION search_documents_vectors()",
    r#"CREATE FUNCTION document_texts_search() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF TG_OP = 'DELETE' THEN
            DELETE FROM search_documents WHERE cleaned_text_id = OLD.id OR raw_text_id = OLD.id;
            RETURN OLD;
        END IF;
        -- Rewritten in place: the vectors are computed again (by search_documents_vectors).
        UPDATE search_documents SET run_id = run_id
            WHERE cleaned_text_id = NEW.id OR raw_text_id = NEW.id;
        RETURN NEW;
    END
    $$"#,
    "CREATE TRIGGER document_texts_delete_search BEFORE DELETE ON document_texts \
     FOR EACH ROW EXECUTE FUNCTION document_texts_search()",
    "CREATE TRIGGER document_texts_update_search AFTER UPDATE OF id, body ON document_texts \
     FOR EACH ROW EXECUTE FUNCTION document_texts_search()",
    "ALTER TABLE extraction_cache ADD COLUMN text_id TEXT",
    // A cached result that is not JSON stays as it is (a miss for the reader, as before).
    r#"CREATE FUNCTION extraction_cache_migration_json(value TEXT) RETURNS jsonb
    LANGUAGE plpgsql IMMUTABLE AS $$
    BEGIN
        RETURN value::jsonb;
    EXCEPTION WHEN others THEN
        RETURN NULL;
    END
    $$"#,
    "WITH matched AS (SELECT DISTINCT ON (c.sha256, c.extractor_version) \
       c.sha256, c.extractor_version, t.id \
     FROM extraction_cache c JOIN documents d ON d.sha256 = c.sha256 \
     JOIN document_texts t ON t.document_id = d.id AND t.kind = 'raw' \
     WHERE t.body = extraction_cache_migration_json(c.result) ->> 'markdown' \
     ORDER BY c.sha256, c.extractor_version, t.created_at DESC, t.rowid DESC) \
     UPDATE extraction_cache c SET text_id = matched.id, \
       result = jsonb_set(c.result::jsonb, '{markdown}', '\"\"')::text \
     FROM matched WHERE c.sha256 = matched.sha256 \
       AND c.extractor_version = matched.extractor_version",
    "DROP FUNCTION extraction_cache_migration_json(TEXT)",
    PARTS_OF_SUCCEEDED_STAGES,
];

/// Back to FTS5 tables with their own content, filled from the texts; cache rows get their
/// Markdown back (a row whose text is gone goes: it could not be read as it was).
const DOWN: &[&str] = &[
    "DELETE FROM extraction_cache WHERE text_id IS NOT NULL \
     AND NOT EXISTS (SELECT 1 FROM document_texts t WHERE t.id = extraction_cache.text_id)",
    "UPDATE extraction_cache SET result = json_set(result, '$.markdown', \
       (SELECT t.body FROM document_texts t WHERE t.id = extraction_cache.text_id)) \
     WHERE text_id IS NOT NULL",
    "ALTER TABLE extraction_cache DROP COLUMN text_id",
    "DROP TRIGGER document_texts_update_search_new",
    "DROP TRIGGER document_texts_update_search_old",
    "DROP TRIGGER document_texts_delete_search",
    "DROP TRIGGER search_documents_update_new",
    "DROP TRIGGER search_documents_update_old",
    "DROP TRIGGER search_documents_delete",
    "DROP TRIGGER search_documents_insert",
    "DROP TABLE search_cleaned",
    "DROP TABLE search_raw",
    r#"CREATE VIRTUAL TABLE search_cleaned USING fts5 (
        body, run_id UNINDEXED, tokenize = 'porter unicode61 remove_diacritics 2'
    )"#,
    r#"CREATE VIRTUAL TABLE search_raw USING fts5 (
        body, tokenize = 'porter unicode61 remove_diacritics 2'
    )"#,
    "INSERT INTO search_cleaned (rowid, body, run_id) SELECT pk, body, run_id FROM search_cleaned_source",
    "INSERT INTO search_raw (rowid, body) SELECT pk, body FROM search_raw_source",
    "DROP VIEW search_cleaned_source",
    "DROP VIEW search_raw_source",
    "DROP TABLE search_documents",
    "DELETE FROM document_texts WHERE kind IN ('indexed_cleaned', 'indexed_raw')",
];

const DOWN_POSTGRES: &[&str] = &[
    "DELETE FROM extraction_cache WHERE text_id IS NOT NULL \
     AND NOT EXISTS (SELECT 1 FROM document_texts t WHERE t.id = extraction_cache.text_id)",
    "UPDATE extraction_cache c SET result = jsonb_set(c.result::jsonb, '{markdown}', to_jsonb(t.body))::text \
     FROM document_texts t WHERE t.id = c.text_id",
    "ALTER TABLE extraction_cache DROP COLUMN text_id",
    "DROP TRIGGER document_texts_update_search ON document_texts",
    "DROP TRIGGER document_texts_delete_search ON document_texts",
    "DROP FUNCTION document_texts_search()",
    "CREATE TABLE search_migration AS SELECT c.rowid AS pk, c.body AS cleaned, c.run_id, \
       r.body AS raw FROM search_cleaned c JOIN search_raw r ON r.rowid = c.rowid",
    "DROP VIEW search_cleaned",
    "DROP VIEW search_raw",
    "DROP TABLE search_documents",
    "DROP FUNCTION search_documents_vectors()",
    r#"CREATE TABLE search_cleaned (
        rowid BIGINT PRIMARY KEY,
        body TEXT NOT NULL,
        run_id TEXT,
        tsv tsvector GENERATED ALWAYS AS (to_tsvector('english', body)) STORED
    )"#,
    "CREATE INDEX search_cleaned_tsv ON search_cleaned USING GIN (tsv)",
    r#"CREATE TABLE search_raw (
        rowid BIGINT PRIMARY KEY,
        body TEXT NOT NULL,
        tsv tsvector GENERATED ALWAYS AS (to_tsvector('english', body)) STORED
    )"#,
    "CREATE INDEX search_raw_tsv ON search_raw USING GIN (tsv)",
    "INSERT INTO search_cleaned (rowid, body, run_id) \
     SELECT pk, COALESCE(cleaned, ''), run_id FROM search_migration",
    "INSERT INTO search_raw (rowid, body) SELECT pk, COALESCE(raw, '') FROM search_migration",
    "DROP TABLE search_migration",
    "DELETE FROM document_texts WHERE kind IN ('indexed_cleaned', 'indexed_raw')",
];

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        crate::execute_all(manager, UP, UP_POSTGRES).await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        crate::execute_all(manager, DOWN, DOWN_POSTGRES).await
    }

    /// The conversion rewrites the index and the cache: all of it or none, on SQLite too.
    fn use_transaction(&self) -> Option<bool> {
        Some(true)
    }
}
