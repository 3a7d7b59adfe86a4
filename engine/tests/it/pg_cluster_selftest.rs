//! The PostgreSQL test harness (`tests/support/pg_cluster.rs`) checked on itself: fresh
//! databases that sea-orm can use, and no server left behind by a test process that is killed.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use sea_orm::{ConnectionTrait, Database, DbBackend, Statement};

use crate::pg_cluster::PgCluster;

/// Set for the child process of `cluster_does_not_outlive_its_test_process` only, so that
/// `--ignored` runs never kill the test binary that runs them.
const CHILD_ENV: &str = "SHELF_PG_SELFTEST_CHILD";

fn cluster() -> Option<&'static PgCluster> {
    let cluster = PgCluster::shared();
    if cluster.is_none() {
        eprintln!("skipped: no PostgreSQL");
    }
    cluster
}

#[tokio::test]
async fn shared_cluster_serves_fresh_databases() {
    let Some(cluster) = cluster() else { return };
    let first = cluster.create_database("selftest");
    let second = cluster.create_database("selftest");
    assert_ne!(first, second);
    assert!(first.starts_with(&format!(
        "postgres://postgres@127.0.0.1:{}/",
        cluster.port()
    )));

    let db = Database::connect(&first).await.expect("connect");
    let row = db
        .query_one_raw(Statement::from_string(
            DbBackend::Postgres,
            "SELECT 1::BIGINT AS one",
        ))
        .await
        .expect("select")
        .expect("one row");
    assert_eq!(row.try_get::<i64>("", "one").expect("one"), 1);

    // Two databases, not two names for one.
    db.execute_unprepared("CREATE TABLE only_in_first (x BIGINT)")
        .await
        .expect("create");
    let other = Database::connect(&second).await.expect("connect second");
    let tables = other
        .query_one_raw(Statement::from_string(
            DbBackend::Postgres,
            "SELECT count(*) AS n FROM information_schema.tables WHERE table_name = 'only_in_first'",
        ))
        .await
        .expect("count")
        .expect("one row");
    assert_eq!(tables.try_get::<i64>("", "n").expect("n"), 0);
}

/// Run by the test below in a child process: starts a cluster, says where it lives, and is
/// killed with SIGKILL, so no destructor and no exit handler runs.
#[test]
#[ignore = "run by cluster_does_not_outlive_its_test_process"]
fn child_starts_a_cluster_then_is_killed() {
    if std::env::var_os(CHILD_ENV).is_none() {
        return;
    }
    let cluster = PgCluster::shared().expect("the parent checked that PostgreSQL is here");
    println!("PG_CLUSTER_DIR={}", cluster.dir().display());
    let _ = Command::new("kill")
        .args(["-KILL", &std::process::id().to_string()])
        .status();
    loop {
        std::thread::park();
    }
}

#[test]
fn cluster_does_not_outlive_its_test_process() {
    if cluster().is_none() {
        return;
    }
    let mut child = Command::new(std::env::current_exe().expect("test binary"))
        .args([
            "pg_cluster_selftest::child_starts_a_cluster_then_is_killed",
            "--exact",
            "--ignored",
            "--nocapture",
        ])
        .env(CHILD_ENV, "1")
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn the child test");
    let stdout = child.stdout.take().expect("piped");
    let dir = BufReader::new(stdout)
        .lines()
        .map_while(Result::ok)
        .find_map(|line| line.strip_prefix("PG_CLUSTER_DIR=").map(PathBuf::from))
        .expect("the child printed its cluster's directory");
    let status = child.wait().expect("wait for the child");
    assert!(
        !status.success(),
        "the child was meant to be killed: {status}"
    );

    // The wrapper notices the closed pipe, stops the server and removes the directory. This is
    // a wait for that to happen, not a measure of how fast it does.
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let left = processes_in(&dir.join("data"));
        if left.is_empty() && !dir.exists() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the killed test's cluster remains: directory exists: {}, processes: {left:?}",
            dir.exists()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Pids of the processes whose working directory is `data`: every PostgreSQL process of a
/// cluster works in its data directory (and still does, shown as "(deleted)", once removed).
fn processes_in(data: &Path) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(Result::ok)
        .filter_map(|entry| {
            let pid: u32 = entry.file_name().to_str()?.parse().ok()?;
            let cwd = std::fs::read_link(entry.path().join("cwd")).ok()?;
            cwd.to_string_lossy()
                .starts_with(&*data.to_string_lossy())
                .then_some(pid)
        })
        .collect()
}
