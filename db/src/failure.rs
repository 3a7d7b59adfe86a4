//! What a database error means: a busy or locked file, a refusal that passes by itself
//! (`is_transient`), a damaged database (`is_corrupt_db`), after which this process refuses to
//! write (`mark_damaged`, the damage latch), and a full disk (`is_storage_full`).

use std::sync::OnceLock;

use sea_orm::DbErr;

/// SQLite's `SQLITE_BUSY` / `SQLITE_LOCKED`, as sqlx reports them.
pub fn is_busy(e: &DbErr) -> bool {
    is_busy_text(&e.to_string())
}

/// [`is_busy`] for an error that only survives as text (wrapped, formatted).
pub fn is_busy_text(text: &str) -> bool {
    [
        "database is locked",
        "database table is locked",
        "database is busy",
    ]
    .iter()
    .any(|needle| text.contains(needle))
}

/// What a client or an operator is told when a write met a full disk.
pub const STORAGE_FULL_DETAIL: &str =
    "Insufficient storage: the disk holding Shelf's data is full. Retry once space is freed";

/// What a client or an operator is told when a write gave up on a busy database.
pub const BUSY_DETAIL: &str = "The database is busy: another process has held its write lock \
    longer than the busy timeout (a backup, a maintenance command, a long transaction). \
    Nothing of this request was written; retry shortly";

/// Whether a database error is a refusal that passes on its own: a busy or locked SQLite file
/// (a backup tool, another process's long transaction), a turn at the write lock not given in
/// time, a PostgreSQL connection dropped or restarting, a serialization failure or deadlock.
/// A write refused this way is worth retrying; any other error is not.
pub fn is_transient(e: &DbErr) -> bool {
    if is_busy(e) {
        return true;
    }
    let text = e.to_string().to_ascii_lowercase();
    [
        "sqlite_busy",
        "connection reset",
        "connection refused",
        "connection closed",
        "broken pipe",
        "pool timed out",
        "timed out",
        "terminating connection",
        "server closed the connection",
        "the database system is starting up",
        "the database system is shutting down",
        "could not serialize access",
        "deadlock detected",
        "unexpected eof",
        "io error",
    ]
    .iter()
    .any(|needle| text.contains(needle))
}

/// SQLite's primary result codes of a damaged file: `SQLITE_CORRUPT` (also its extended codes
/// `_VTAB`, `_SEQUENCE`, `_INDEX`) and `SQLITE_NOTADB`. An extended code keeps its primary code
/// in the low byte.
const SQLITE_CORRUPT: i64 = 11;
const SQLITE_NOTADB: i64 = 26;

/// PostgreSQL's SQLSTATEs of damaged storage: `data_corrupted` and `index_corrupted`.
const PG_CORRUPT_STATES: [&str; 2] = ["XX001", "XX002"];

/// The words of every refusal by the damage latch ([`mark_damaged`]), which [`is_corrupt_text`]
/// recognizes, so a refused write is reported as damage like the error that tripped it.
const DAMAGED: &str = "database is known to be damaged";

/// Whether a SQLite result code (primary or extended) says the file is damaged.
pub fn is_corrupt_code(code: i64) -> bool {
    matches!(code & 0xff, SQLITE_CORRUPT | SQLITE_NOTADB)
}

/// Whether a database error says the database is damaged: SQLite's `SQLITE_CORRUPT` or
/// `SQLITE_NOTADB` (with their extended codes), PostgreSQL's `XX001`/`XX002`, or a write the
/// damage latch refused; the driver's code when it kept one, else its words. Unlike
/// [`is_transient`] errors, these never pass by themselves.
pub fn is_corrupt_db(e: &DbErr) -> bool {
    is_corrupt_by_code(e) || is_corrupt_text(&e.to_string())
}

/// Whether the database itself answered `e` with a damage code (SQLite's result code or
/// PostgreSQL's SQLSTATE, as the driver keeps it): unlike words, no text a user wrote (a file
/// name in a message) can make one up.
fn is_corrupt_by_code(e: &DbErr) -> bool {
    let (DbErr::Conn(runtime) | DbErr::Exec(runtime) | DbErr::Query(runtime)) = e else {
        return false;
    };
    let sea_orm::RuntimeErr::SqlxError(sqlx) = runtime else {
        return false;
    };
    sqlx.as_database_error()
        .and_then(|d| d.code())
        .is_some_and(|code| {
            let code = code.as_ref();
            PG_CORRUPT_STATES.contains(&code) || code.parse().is_ok_and(is_corrupt_code)
        })
}

/// [`is_corrupt`] for an error that only survives as text (wrapped, formatted, logged): SQLite's
/// messages for the two codes, a code as sqlx (`(code: 11)`) or the writer thread (`(11)`)
/// print it, or the latch's refusal.
pub fn is_corrupt_text(text: &str) -> bool {
    let lower = text.to_ascii_lowercase();
    if [
        "database disk image is malformed",
        "file is not a database",
        DAMAGED,
    ]
    .iter()
    .any(|needle| lower.contains(needle))
    {
        return true;
    }
    ["(code: ", "error returned from database: ("]
        .iter()
        .any(|prefix| {
            lower.match_indices(prefix).any(|(at, _)| {
                let rest = &lower[at + prefix.len()..];
                let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
                rest[digits..].starts_with(')') && rest[..digits].parse().is_ok_and(is_corrupt_code)
            })
        })
}

/// What the operator does about a damaged database, logged once with the first sign of it.
pub const DAMAGE_RECOVERY: &str = "the database is damaged: this process writes nothing more \
    into it. Stop `shelf api` and `shelf worker`, keep a copy of the damaged file, restore the \
    last backup (`shelf admin db-restore FILE --yes`, or `shelf admin workspace-restore FILE.zip \
    --yes`; on PostgreSQL `pg_restore`), run `shelf migrate && shelf admin db-check`, then start \
    the services again (docs/operations.md, Backup and restore)";

/// The first sign of damage this process saw; once set, never cleared.
static DAMAGE: OnceLock<String> = OnceLock::new();

/// Latches "the database is damaged" for the rest of the process: [`begin_write`] and the
/// writer thread then refuse every write with a corrupt error instead of writing more into a
/// damaged file. The first call logs `detail` at error level with [`DAMAGE_RECOVERY`]; later
/// calls change nothing. A Shelf process opens one database, so the latch is process-wide.
pub fn mark_damaged(detail: &str) {
    if DAMAGE.set(detail.to_string()).is_ok() {
        tracing::error!(
            code = "database_corrupt",
            detail,
            recovery = DAMAGE_RECOVERY,
            "database damage detected"
        );
    }
}

/// The first sign of damage this process saw, when it saw one.
pub fn known_damage() -> Option<&'static str> {
    DAMAGE.get().map(String::as_str)
}

/// Classifies `e` ([`is_corrupt_db`]) and, when the database answered it with a damage code,
/// latches the damage ([`mark_damaged`]). Every conversion of a database error into a crate's
/// error calls this, so the first corrupt error met anywhere in the process stops its writes.
/// Only the code latches: words alone (which a stored file name could carry into a message)
/// make a `database_corrupt` answer, never a process that refuses to write.
pub fn note_if_corrupt(e: &DbErr) -> bool {
    if is_corrupt_by_code(e) {
        mark_damaged(&e.to_string());
        return true;
    }
    is_corrupt_db(e)
}

/// The error of a write refused because the database is known to be damaged.
pub(crate) fn refused_as_damaged() -> Option<DbErr> {
    known_damage().map(|first| {
        DbErr::Custom(format!(
            "{DAMAGED} (first seen: {first}); writes are refused until it is restored from a backup"
        ))
    })
}

/// SQLite's `SQLITE_FULL`: a write found no room on the disk (or hit the file-size limit).
const SQLITE_FULL: i64 = 13;

/// PostgreSQL's SQLSTATE `disk_full`.
const PG_DISK_FULL: &str = "53100";

/// Whether a database error says the disk is full: SQLite's `SQLITE_FULL` ("database or disk
/// is full"), PostgreSQL's `53100`, or the operating system's `ENOSPC` in its words. A full
/// disk is a resource limit the operator fixes, not an internal error: callers report it as
/// `insufficient_storage`.
pub fn is_storage_full(e: &DbErr) -> bool {
    let runtime = match e {
        DbErr::Conn(r) | DbErr::Exec(r) | DbErr::Query(r) => Some(r),
        _ => None,
    };
    if let Some(sea_orm::RuntimeErr::SqlxError(sqlx)) = runtime
        && let Some(code) = sqlx.as_database_error().and_then(|d| d.code())
    {
        let code = code.as_ref();
        if code == PG_DISK_FULL || code.parse::<i64>().is_ok_and(|c| c & 0xff == SQLITE_FULL) {
            return true;
        }
    }
    is_storage_full_text(&e.to_string())
}

/// [`is_storage_full`] for a file-system error: `ENOSPC` or a disk quota used up.
pub fn is_storage_full_io(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::StorageFull | std::io::ErrorKind::QuotaExceeded
    ) || is_storage_full_text(&e.to_string())
}

/// [`is_storage_full`] for an error that only survives as text (wrapped, formatted): SQLite's,
/// the kernel's and PostgreSQL's words for it.
pub fn is_storage_full_text(text: &str) -> bool {
    let lower = text.to_ascii_lowercase();
    [
        "database or disk is full",
        "no space left on device",
        "disk quota exceeded",
        "(os error 28)",
        "(code: 13)",
        "could not extend file",
    ]
    .iter()
    .any(|needle| lower.contains(needle))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sql::SqlExt;
    use crate::{begin_write, connect};
    use sea_orm::{ConnectionTrait, DbBackend, Statement};
    use std::path::Path;

    #[tokio::test]
    async fn a_full_database_is_told_apart_from_other_errors() {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = connect(&dir.path().join("full.sqlite"), 1)
            .await
            .expect("connect");
        db.execute_unprepared("CREATE TABLE t (b BLOB NOT NULL)")
            .await
            .expect("create");
        // The file may not grow past its current pages: SQLite answers SQLITE_FULL, as on a
        // full disk.
        let pages = db
            .query_one_sql(Statement::from_string(
                DbBackend::Sqlite,
                "PRAGMA page_count",
            ))
            .await
            .expect("page_count")
            .and_then(|row| row.try_get_by_index::<i64>(0).ok())
            .expect("pages");
        db.execute_unprepared(&format!("PRAGMA max_page_count = {pages}"))
            .await
            .expect("cap");
        let full = db
            .execute_unprepared("INSERT INTO t VALUES (zeroblob(1000000))")
            .await
            .expect_err("no room");
        assert!(is_storage_full(&full), "{full}");
        assert!(!is_busy(&full));
        assert!(!is_storage_full(&DbErr::Custom(
            "database is locked".into()
        )));

        let enospc = std::io::Error::from_raw_os_error(28);
        assert!(is_storage_full_io(&enospc), "{enospc}");
        assert!(is_storage_full_io(&std::io::Error::other(format!(
            "writing: {enospc}"
        ))));
        assert!(!is_storage_full_io(&std::io::Error::from_raw_os_error(13)));
        assert!(is_storage_full_text(&format!("database: {full}")));
        assert!(!is_storage_full_text(
            "error returned from database: (code: 130) other"
        ));
    }

    #[test]
    fn corrupt_and_notadb_codes_and_words_are_damage_and_nothing_else_is() {
        for code in [11, 26, 267, 523, 779] {
            assert!(is_corrupt_code(code), "{code}");
        }
        for code in [0, 1, 5, 10, 13, 19, 266, 1034, 2067] {
            assert!(!is_corrupt_code(code), "{code}");
        }
        for text in [
            "Query Error: error returned from database: (code: 11) database disk image is malformed",
            "error returned from database: (267) vtable constructor failed in: SELECT",
            "Execution Error: error returned from database: (code: 26) file is not a database",
            "DATABASE DISK IMAGE IS MALFORMED",
            "database is known to be damaged (first seen: x); writes are refused",
        ] {
            assert!(is_corrupt_text(text), "{text}");
            assert!(is_corrupt_db(&DbErr::Custom(text.into())), "{text}");
        }
        for text in [
            "error returned from database: (code: 5) database is locked",
            "error returned from database: (code: 2067) UNIQUE constraint failed: t.n",
            "error returned from database: (code: 13) database or disk is full",
            "code 11 (code: 11x) (11 apples)",
        ] {
            assert!(!is_corrupt_text(text), "{text}");
        }
        let e = DbErr::Custom(
            "error returned from database: (11) database disk image is malformed".into(),
        );
        assert!(is_corrupt_db(&e) && !is_transient(&e));
    }

    /// Makes a SQLite file whose table `damaged` has its root page overwritten with garbage,
    /// beside an intact table `healthy`: the file opens, and only reads of `damaged` fail.
    async fn file_with_a_damaged_table(file: &Path) {
        let db = connect(file, 1).await.expect("connect");
        db.execute_unprepared(
            "CREATE TABLE healthy (n INTEGER NOT NULL); CREATE TABLE damaged (n INTEGER NOT NULL); \
             INSERT INTO healthy (n) VALUES (1); INSERT INTO damaged (n) VALUES (1), (2);",
        )
        .await
        .expect("create");
        let scalar = |sql: &'static str| {
            let db = db.clone();
            async move {
                let row = db
                    .query_one_sql(Statement::from_string(DbBackend::Sqlite, sql))
                    .await
                    .expect(sql)
                    .expect("row");
                row.try_get_by_index::<i64>(0).expect(sql)
            }
        };
        let page_size = scalar("PRAGMA page_size").await;
        let root = scalar("SELECT rootpage FROM sqlite_schema WHERE name = 'damaged'").await;
        // Everything into the main file, so the damage below is what every reader sees.
        db.execute_unprepared("PRAGMA wal_checkpoint(TRUNCATE)")
            .await
            .expect("checkpoint");
        db.close().await.expect("close");
        let mut bytes = std::fs::read(file).expect("read");
        let start = usize::try_from((root - 1) * page_size).expect("offset");
        let end = start + usize::try_from(page_size).expect("size");
        bytes[start..end].fill(0x5a);
        std::fs::write(file, bytes).expect("damage");
    }

    /// The latch is process-wide, so this test runs in a child process of this test binary
    /// (the parent only starts it): no other test here ever meets a latched database.
    #[test]
    fn after_a_corrupt_error_this_process_writes_nothing_more() {
        const CHILD: &str = "SHELF_TEST_DAMAGE_LATCH_CHILD";
        const NAME: &str = "failure::tests::after_a_corrupt_error_this_process_writes_nothing_more";
        if std::env::var_os(CHILD).is_some() {
            tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .build()
                .expect("runtime")
                .block_on(latch_child());
            println!("latch child passed");
            return;
        }
        let out = std::process::Command::new(std::env::current_exe().expect("test binary"))
            .args([NAME, "--exact", "--nocapture", "--test-threads=1"])
            .env(CHILD, "1")
            .output()
            .expect("run the child");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && stdout.contains("latch child passed"),
            "child failed ({:?}):\n{stdout}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }

    async fn latch_child() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("damaged.sqlite");
        file_with_a_damaged_table(&file).await;
        let db = connect(&file, 2)
            .await
            .expect("the damaged file still opens");
        let insert = |n: i64| {
            Statement::from_sql_and_values(
                DbBackend::Sqlite,
                "INSERT INTO healthy (n) VALUES (?)",
                [n.into()],
            )
        };
        // Before any damage is seen, writes to the intact table go through.
        let txn = begin_write(&db).await.expect("begin");
        txn.execute_sql(insert(2)).await.expect("insert");
        txn.commit().await.expect("commit");
        assert!(known_damage().is_none());
        // Words alone (a file name in a message, say) classify, but latch nothing.
        let words =
            DbErr::Custom("a file named (code: 11) database disk image is malformed".into());
        assert!(note_if_corrupt(&words));
        assert!(known_damage().is_none());

        // A read of the damaged table fails, and noting it (as every crate's error conversion does)
        // latches the damage.
        let read = db
            .query_all_sql(Statement::from_string(
                DbBackend::Sqlite,
                "SELECT n FROM damaged",
            ))
            .await
            .expect_err("the damaged page cannot be read");
        assert!(note_if_corrupt(&read), "{read}");
        assert!(known_damage().is_some());

        // From now on no write reaches the file, though this one would touch no damaged page.
        let refused = begin_write(&db).await.err().expect("begin_write refuses");
        assert!(is_corrupt_db(&refused), "{refused}");
        let writer = crate::gate::writer_for(&db).expect("writer");
        let refused: Result<u64, DbErr> =
            writer.transaction(move |txn| txn.execute(&insert(3))).await;
        assert!(is_corrupt_db(&refused.expect_err("the writer refuses")));
        let row = db
            .query_one_sql(Statement::from_string(
                DbBackend::Sqlite,
                "SELECT count(*) FROM healthy",
            ))
            .await
            .expect("count")
            .expect("row");
        assert_eq!(row.try_get_by_index::<i64>(0).expect("count"), 2);
    }
}
