//! `shelf admin db-stats`: file sizes, page figures and rows per table on SQLite; the
//! database's size and each table's rows and size on PostgreSQL.

use serde::Serialize;

use super::super::paths::sidecars;
use super::{
    AdminError, Backend, Settings, file_len, live_database, open_file, open_server, quoted, rows,
    scalar,
};

/// `shelf admin db-stats`.
#[derive(Debug, Clone, Serialize)]
pub struct DbStats {
    pub backend: Backend,
    pub database: String,
    #[serde(flatten)]
    pub storage: StorageFigures,
    pub tables: Vec<TableRows>,
}

/// Sizes as each backend knows them.
#[derive(Debug, Clone, Serialize)]
#[serde(untagged)]
pub enum StorageFigures {
    Sqlite {
        file_bytes: u64,
        wal_bytes: u64,
        shm_bytes: u64,
        page_size: i64,
        page_count: i64,
        freelist_count: i64,
    },
    Postgres {
        /// `pg_database_size`: every table, index and TOAST of the database.
        database_bytes: i64,
    },
}

#[derive(Debug, Clone, Serialize)]
pub struct TableRows {
    pub table: String,
    pub rows: i64,
    /// PostgreSQL only: `pg_total_relation_size` (table, indexes and TOAST).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bytes: Option<i64>,
}
/// File sizes, page figures and rows per table; on PostgreSQL the database's size and each
/// table's rows and size.
pub async fn stats(settings: &Settings) -> Result<DbStats, AdminError> {
    if settings.is_postgres() {
        return stats_postgres(settings).await;
    }
    let database = live_database(settings)?;
    let [wal, shm, _] = sidecars(&database);
    let db = open_file(&database).await?;
    let page_size = scalar(&db, "PRAGMA page_size").await?;
    let page_count = scalar(&db, "PRAGMA page_count").await?;
    let freelist_count = scalar(&db, "PRAGMA freelist_count").await?;
    let names = rows(
        &db,
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' \
         ORDER BY name",
    )
    .await?;
    let mut tables = Vec::new();
    for row in names {
        let table: String = row.try_get_by_index(0)?;
        let rows = scalar(&db, &format!("SELECT count(*) FROM {}", quoted(&table))).await?;
        tables.push(TableRows {
            table,
            rows,
            bytes: None,
        });
    }
    db.close().await?;
    Ok(DbStats {
        backend: Backend::Sqlite,
        storage: StorageFigures::Sqlite {
            file_bytes: file_len(&database),
            wal_bytes: file_len(&wal),
            shm_bytes: file_len(&shm),
            page_size,
            page_count,
            freelist_count,
        },
        database: database.display().to_string(),
        tables,
    })
}

async fn stats_postgres(settings: &Settings) -> Result<DbStats, AdminError> {
    let db = open_server(settings).await?;
    let database_bytes = scalar(&db, "SELECT pg_database_size(current_database())").await?;
    let sized = rows(
        &db,
        "SELECT CAST(c.relname AS TEXT) AS name, pg_total_relation_size(c.oid) AS bytes \
         FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace \
         WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'p') ORDER BY 1",
    )
    .await?;
    let mut tables = Vec::new();
    for row in sized {
        let table: String = row.try_get_by_index(0)?;
        let bytes: i64 = row.try_get_by_index(1)?;
        // Exact counts, as on SQLite: `reltuples` is only the planner's estimate.
        let rows = scalar(&db, &format!("SELECT count(*) FROM {}", quoted(&table))).await?;
        tables.push(TableRows {
            table,
            rows,
            bytes: Some(bytes),
        });
    }
    db.close().await?;
    Ok(DbStats {
        backend: Backend::Postgres,
        database: settings.database_display(),
        storage: StorageFigures::Postgres { database_bytes },
        tables,
    })
}
