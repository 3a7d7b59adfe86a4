//! Restores against every process that writes, and what killed processes leave under
//! `uploads/`: a restore is refused while `shelf import --watch` runs and the watcher keeps
//! ingesting into the database it opened; each writing command refuses to start while a
//! restore holds the data directory; a `shelf api` killed mid-upload leaves a staged file that
//! `db-check` reports and the next `shelf api` removes once it is older than the grace period,
//! keeping younger ones.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::{Duration, SystemTime};

use serde_json::Value;

use crate::api::{Api, client, migrated, upload};
use crate::support::{Env, drain, wait_for};

fn json_of(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "no JSON ({e}):\nstdout: {}\nstderr: {}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

/// A command that must fail with exit code 1 and the error `code`.
fn refused(args: &[&str], out: Output, code: &str) {
    assert_eq!(
        out.status.code(),
        Some(1),
        "{args:?}: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let body = json_of(&out);
    assert_eq!(body["code"], code, "{args:?}: {body}");
}

fn succeeded(env: &Env, args: &[&str]) -> Value {
    let out = env.run(args);
    assert!(
        out.status.success(),
        "{args:?} failed: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    json_of(&out)
}

/// Rows of `documents` in the live database, read by `db-stats` (which takes no lock).
fn documents(env: &Env) -> i64 {
    let stats = succeeded(env, &["admin", "db-stats", "--json"]);
    stats["tables"]
        .as_array()
        .expect("tables")
        .iter()
        .find(|t| t["table"] == "documents")
        .and_then(|t| t["rows"].as_i64())
        .expect("documents row count")
}

fn text(path: &Path) -> String {
    path.to_str().expect("utf-8 path").to_string()
}

#[test]
fn a_restore_is_refused_while_import_watch_runs_and_its_ingests_stay_in_the_live_database() {
    let env = migrated(Env::new());
    let backup = env.path().join("empty.sqlite");
    let archive = env.path().join("empty.zip");
    succeeded(&env, &["admin", "db-backup", &text(&backup), "--json"]);
    succeeded(
        &env,
        &["admin", "workspace-backup", &text(&archive), "--json"],
    );

    let inbox = env.path().join("inbox");
    std::fs::create_dir_all(&inbox).expect("mkdir");
    std::fs::write(
        inbox.join("first.txt"),
        "The first note of the hot folder.\n",
    )
    .expect("write");
    let mut watcher = env.spawn(&[
        "import",
        &text(&inbox),
        "--watch",
        "--mode",
        "none",
        "--poll-ms",
        "100",
    ]);
    let _stdout = drain(watcher.child.stdout.take().expect("stdout"));
    let stderr = drain(watcher.child.stderr.take().expect("stderr"));
    wait_for(Duration::from_secs(60), "the first ingest", || {
        (documents(&env) == 1).then_some(())
    });

    for args in [
        vec!["admin", "db-restore", &text(&backup), "--yes", "--json"],
        vec![
            "admin",
            "workspace-restore",
            &text(&archive),
            "--yes",
            "--json",
        ],
    ] {
        refused(&args, env.run(&args), "database_in_use");
    }

    // The watcher goes on, into the database every other command sees.
    std::fs::write(
        inbox.join("second.txt"),
        "The second note, after the refusals.\n",
    )
    .expect("write");
    wait_for(Duration::from_secs(60), "the second ingest", || {
        (documents(&env) == 2).then_some(())
    });
    let status = watcher.terminate(Duration::from_secs(30));
    assert!(
        status.is_some_and(|s| s.success()),
        "{status:?}: {}",
        stderr.lock().map(|l| l.clone()).unwrap_or_default()
    );

    // Once it has stopped, the restore goes through.
    succeeded(
        &env,
        &["admin", "db-restore", &text(&backup), "--yes", "--json"],
    );
    assert_eq!(documents(&env), 0);
}

#[test]
fn every_writing_command_refuses_to_start_while_a_restore_holds_the_data_directory() {
    let env = migrated(Env::new());
    let note = env.write("note.txt", "A note to process, delete and import again.\n");
    let (doc, run) = env.queue(&note);
    let data = env.path().join("data");
    let inbox = env.path().join("inbox");
    std::fs::create_dir_all(&inbox).expect("mkdir");
    let backup = env.path().join("b.sqlite");
    let archive = env.path().join("w.zip");

    // What a restore holds: the lock file, exclusively.
    let lock = std::fs::File::options()
        .read(true)
        .write(true)
        .open(data.join("shelf.lock"))
        .expect("lock file");
    lock.try_lock().expect("exclusive lock");
    let (note, inbox) = (text(&note), text(&inbox));
    let (backup_arg, archive_arg) = (text(&backup), text(&archive));
    let commands: Vec<Vec<&str>> = vec![
        vec!["import", &note, "--mode", "none", "--json"],
        vec!["import", &inbox, "--watch", "--json"],
        vec!["process", &doc, "--json"],
        vec!["delete", &doc, "--json"],
        vec!["migrate", "--json"],
        vec!["admin", "run-cancel", &run, "--json"],
        vec!["admin", "run-retry", &run, "--json"],
        vec!["admin", "db-maintain", "--json"],
        vec!["admin", "db-backup", &backup_arg, "--json"],
        vec!["admin", "workspace-backup", &archive_arg, "--json"],
    ];
    for args in &commands {
        refused(args, env.run(args), "restore_in_progress");
    }
    assert!(!backup.exists() && !archive.exists());
    drop(lock);

    // Released, they run again (the document is still there to delete).
    let deleted = succeeded(&env, &["delete", &doc, "--json"]);
    assert_eq!(deleted["deleted"], true, "{deleted}");
}

/// Starts a multipart upload of a file larger than the upload write buffer (so it streams to
/// a staging file) and sends only its first `sent` bytes; the socket stays open.
fn upload_in_flight(api: &Api, sent: usize) -> std::net::TcpStream {
    let addr = api.url("").trim_start_matches("http://").to_string();
    let mut socket = std::net::TcpStream::connect(&addr).expect("connect");
    let boundary = "restore-blackbox-boundary";
    let opening = format!(
        "--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"big.txt\"\r\n\r\n"
    );
    let total = opening.len() + 8 * sent;
    let head = format!(
        "POST /documents HTTP/1.1\r\nHost: {addr}\r\nContent-Type: multipart/form-data; \
         boundary={boundary}\r\nContent-Length: {total}\r\n\r\n{opening}"
    );
    socket.write_all(head.as_bytes()).expect("head");
    let line = b"an upload the server is killed in the middle of\n";
    let mut body = Vec::with_capacity(sent);
    while body.len() < sent {
        body.extend_from_slice(line);
    }
    socket.write_all(&body[..sent]).expect("body");
    socket.flush().expect("flush");
    socket
}

fn entries(dir: &Path) -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    found.sort();
    found
}

/// Sets a file's or a directory's modification time `ago` in the past.
fn age(path: &Path, ago: Duration) {
    std::fs::File::open(path)
        .expect("open")
        .set_modified(SystemTime::now() - ago)
        .expect("set mtime");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_start_removes_the_old_leftovers_of_a_killed_upload_and_keeps_fresh_ones() {
    let env = migrated(Env::new());
    let data = env.path().join("data");
    let staging = data.join("uploads/.staging");
    let mut api = Api::start(&env);
    let client = client();
    let (status, kept) = upload(
        &client,
        &api,
        "kept.txt",
        b"A document that stays.\n".to_vec(),
    )
    .await;
    assert_eq!(status, 201, "{kept}");
    let kept = kept["id"].as_str().expect("id").to_string();

    // SIGKILL mid-upload, as in the field: the staged part stays behind.
    let socket = upload_in_flight(&api, 3 << 20);
    let staged = wait_for(Duration::from_secs(30), "a staged upload", || {
        entries(&staging)
            .into_iter()
            .find(|p| std::fs::metadata(p).is_ok_and(|m| m.len() >= 1 << 20))
    });
    api.process.kill();
    drop(socket);
    assert!(staged.exists(), "the killed upload left no file");
    let staged_bytes = std::fs::metadata(&staged).expect("staged").len();

    // It is old now; a second staged file is fresh (another process's upload in flight); an
    // ingest killed before its row left an empty directory, and a committed delete its trash.
    let hours = Duration::from_secs(3 * 60 * 60);
    age(&staged, hours);
    let fresh = staging.join("upload-00000000000000ff.part");
    std::fs::write(&fresh, b"still being written").expect("write");
    let empty = data.join("uploads/doc_00000000000000aa");
    std::fs::create_dir(&empty).expect("mkdir");
    age(&empty, hours);
    let young_empty = data.join("uploads/doc_00000000000000bb");
    std::fs::create_dir(&young_empty).expect("mkdir");
    let trash = data.join("uploads/.trash/doc_00000000000000cc-00000000000000dd");
    std::fs::create_dir_all(&trash).expect("mkdir");
    std::fs::write(trash.join("gone.txt"), vec![b'g'; 700]).expect("write");

    let check = succeeded(&env, &["admin", "db-check", "--json"]);
    assert_eq!(check["healthy"], true, "{check}");
    assert_eq!(
        check["upload_leftovers"],
        serde_json::json!({
            "staged_files": 1,
            "staged_bytes": staged_bytes,
            "empty_upload_dirs": 1,
            "trash_entries": 1,
            "trash_bytes": 700,
        }),
        "{check}"
    );
    let human = env.run(&["admin", "db-check"]);
    let human = String::from_utf8_lossy(&human.stdout);
    assert!(
        human.contains("upload leftovers: 1 staged file(s)"),
        "{human}"
    );

    let api = Api::start(&env);
    let logged = wait_for(Duration::from_secs(30), "the cleanup's log line", || {
        api.logs()
            .lines()
            .find(|l| l.contains("upload leftovers removed"))
            .map(str::to_string)
    });
    assert!(logged.contains("removed=3"), "{logged}");
    assert!(
        logged.contains(&format!("bytes={}", staged_bytes + 700)),
        "{logged}"
    );
    for gone in [&staged, &empty, &trash] {
        assert!(!gone.exists(), "{} stayed", gone.display());
    }
    for stays in [
        &fresh,
        &young_empty,
        &data.join(format!("uploads/{kept}/kept.txt")),
    ] {
        assert!(stays.exists(), "{} went", stays.display());
    }
    let check = succeeded(&env, &["admin", "db-check", "--json"]);
    assert_eq!(check["upload_leftovers"]["staged_files"], 0, "{check}");
    assert_eq!(check["upload_leftovers"]["empty_upload_dirs"], 0, "{check}");
    drop(api);
}
