//! `shelf admin db-*` and `workspace-*` on real databases: checks, statistics, maintenance and
//! backups taken while a real `shelf api` and `shelf worker` write; restores refused while they
//! run, then done after they stop and compared row for row with what the backup holds; every
//! refused archive (made here) leaves the data directory as it was; symlinked destinations and
//! a corrupted database copy.

use std::collections::BTreeMap;
use std::io::{Cursor, Read, Write};
use std::path::{Path, PathBuf};
use std::process::Output;

use reqwest::Client;
use serde_json::{Value, json};
use zip::write::SimpleFileOptions;

use crate::api::{Api, client, get_json, migrated, run_to_the_end, upload};
use crate::support::{Env, corpus};

/// Runs `shelf ARGS` with `SHELF_DATABASE_PATH` pointed elsewhere when `database` is given.
fn run_on(env: &Env, database: Option<&Path>, args: &[&str]) -> Output {
    let mut cmd = env.command(args);
    if let Some(db) = database {
        cmd.env("SHELF_DATABASE_PATH", db);
    }
    cmd.output().expect("run shelf")
}

fn json_of(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "no JSON ({e}):\nstdout: {}\nstderr: {}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

fn ok_json(out: Output) -> Value {
    assert!(
        out.status.success(),
        "failed ({:?}):\nstdout: {}\nstderr: {}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    json_of(&out)
}

/// A command that must fail with exit code 1 and the error `code`.
fn refused(out: Output, code: &str) -> Value {
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let body = json_of(&out);
    assert_eq!(body["code"], code, "{body}");
    assert!(
        body["detail"].as_str().is_some_and(|d| !d.is_empty()),
        "{body}"
    );
    body
}

/// Rows per table of a database file, by `db-stats`.
fn table_rows(env: &Env, database: Option<&Path>) -> BTreeMap<String, i64> {
    let stats = ok_json(run_on(env, database, &["admin", "db-stats", "--json"]));
    stats["tables"]
        .as_array()
        .expect("tables")
        .iter()
        .map(|t| {
            (
                t["table"].as_str().unwrap_or_default().to_string(),
                t["rows"].as_i64().unwrap_or(-1),
            )
        })
        .collect()
}

/// Every regular file under `dir`, relative, with its bytes (`.shelf-*` temp entries and the
/// lock file included: a refused restore must not leave or touch any).
fn files_under(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<String, Vec<u8>>) {
        for entry in std::fs::read_dir(dir).expect("read_dir").flatten() {
            let path = entry.path();
            let kind = entry.file_type().expect("file type");
            if kind.is_dir() {
                walk(root, &path, out);
            } else {
                let rel = path
                    .strip_prefix(root)
                    .expect("prefix")
                    .display()
                    .to_string();
                out.insert(rel, std::fs::read(&path).unwrap_or_default());
            }
        }
    }
    let mut out = BTreeMap::new();
    if dir.is_dir() {
        walk(dir, dir, &mut out);
    }
    out
}

async fn upload_to(client: &Client, base: &str, name: &str, body: String) -> String {
    let form = reqwest::multipart::Form::new().part(
        "file",
        reqwest::multipart::Part::bytes(body.into_bytes()).file_name(name.to_string()),
    );
    let reply = client
        .post(format!("{base}/documents"))
        .multipart(form)
        .send()
        .await
        .expect("upload");
    assert_eq!(reply.status(), 201);
    let doc: Value = reply.json().await.expect("json");
    doc["id"].as_str().expect("id").to_string()
}

/// A member of a ZIP file, read whole (the archives here are small).
fn member(zip_path: &Path, name: &str) -> Vec<u8> {
    let file = std::fs::File::open(zip_path).expect("open zip");
    let mut archive = zip::ZipArchive::new(file).expect("zip");
    let mut bytes = Vec::new();
    archive
        .by_name(name)
        .expect("member")
        .read_to_end(&mut bytes)
        .expect("read member");
    bytes
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backups_taken_while_services_write_restore_exactly_what_they_hold() {
    let env = migrated(Env::new());
    let data = env.path().join("data");
    let api = Api::start(&env);
    let worker = env.spawn(&["worker"]);
    let client = client();

    // Documents processed to the end by the worker: a corpus file and made-up ones.
    let corpus_file = corpus("text/crazyones.txt");
    let (status, doc) = upload(
        &client,
        &api,
        "crazyones.txt",
        std::fs::read(&corpus_file).expect("corpus"),
    )
    .await;
    assert_eq!(status, 201, "{doc}");
    let mut first = vec![doc["id"].as_str().expect("id").to_string()];
    for i in 0..3 {
        let body = format!("# Note {i}\n\nBackups are taken while note {i} is indexed.\n");
        first.push(upload_to(&client, &api.url(""), &format!("note-{i}.md"), body).await);
    }
    for id in &first {
        let run = run_to_the_end(&client, &api, id).await;
        assert_eq!(run["status"], "succeeded", "{run:#}");
    }
    // A symlink in the data directory: workspace backups skip it and say so.
    std::os::unix::fs::symlink("/etc/hostname", data.join("uploads/stray-link")).expect("symlink");

    // More uploads and runs go on while every admin command runs.
    let base = api.url("");
    let writer_client = client.clone();
    let writer = tokio::spawn(async move {
        for i in 0..12 {
            let body = format!("Later document {i}: written during the backups.\n");
            let id = upload_to(&writer_client, &base, &format!("later-{i}.txt"), body).await;
            let reply = writer_client
                .post(format!("{base}/runs"))
                .json(&json!({ "document_id": id }))
                .send()
                .await
                .expect("run");
            assert_eq!(reply.status(), 201);
        }
    });
    let db_backup = env.path().join("backups/shelf-backup.sqlite");
    let zip_backup = env.path().join("backups/workspace.zip");
    std::fs::create_dir_all(db_backup.parent().expect("parent")).expect("mkdir");
    let commands: Vec<Vec<String>> = vec![
        vec!["db-backup".into(), db_backup.display().to_string()],
        vec!["workspace-backup".into(), zip_backup.display().to_string()],
        vec!["db-check".into()],
        vec!["db-stats".into()],
        vec!["db-maintain".into()],
        vec!["db-maintain".into(), "--vacuum".into()],
    ];
    let mut outputs = Vec::new();
    for args in commands {
        let mut full = vec!["admin".to_string()];
        full.extend(args);
        full.push("--json".into());
        let refs: Vec<&str> = full.iter().map(String::as_str).collect();
        let mut cmd = env.command(&refs);
        outputs.push(
            tokio::task::spawn_blocking(move || cmd.output())
                .await
                .expect("join")
                .expect("run"),
        );
    }
    writer.await.expect("writer");
    let reports: Vec<Value> = outputs.into_iter().map(ok_json).collect();
    assert_eq!(reports[0]["destination"], db_backup.display().to_string());
    assert!(
        reports[1]["files"].as_u64().expect("files") >= 4,
        "{}",
        reports[1]
    );
    assert_eq!(
        reports[1]["skipped"],
        json!([{ "path": "uploads/stray-link", "reason": "symbolic link" }])
    );
    assert_eq!(reports[2]["healthy"], true, "{}", reports[2]);
    assert_eq!(reports[2]["integrity"], json!(["ok"]));
    assert!(reports[3]["page_size"].as_i64().expect("page size") > 0);
    assert_eq!(reports[5]["vacuumed"], true);

    // Restores are refused while the API and the worker hold the data directory, and leave
    // nothing behind.
    for args in [
        vec![
            "admin",
            "db-restore",
            db_backup.to_str().expect("utf-8"),
            "--yes",
            "--json",
        ],
        vec![
            "admin",
            "workspace-restore",
            zip_backup.to_str().expect("utf-8"),
            "--yes",
            "--json",
        ],
    ] {
        refused(env.run(&args), "database_in_use");
    }
    // Without --yes a restore does nothing either.
    let out = env.run(&[
        "admin",
        "db-restore",
        db_backup.to_str().expect("utf-8"),
        "--json",
    ]);
    refused(out, "confirmation_required");
    let temporaries: Vec<String> = files_under(&data)
        .into_keys()
        .filter(|p| p.starts_with(".shelf-"))
        .collect();
    assert_eq!(temporaries, Vec::<String>::new());

    drop(worker);
    drop(api);
    let live = table_rows(&env, None);
    assert_eq!(live["documents"], 16, "{live:?}");

    // The workspace archive: its snapshot's rows, and the upload files its manifest lists.
    let manifest: Value =
        serde_json::from_slice(&member(&zip_backup, "manifest.json")).expect("manifest");
    assert_eq!(manifest["format"], "shelf-workspace-backup");
    let snapshot = env.write("snapshot.sqlite", member(&zip_backup, "shelf.sqlite"));
    let snapshot_rows = table_rows(&env, Some(&snapshot));
    assert!(snapshot_rows["documents"] >= 4 && snapshot_rows["documents"] <= 16);
    let listed: BTreeMap<String, u64> = manifest["files"]
        .as_array()
        .expect("files")
        .iter()
        .map(|f| {
            (
                f["path"].as_str().unwrap_or_default().to_string(),
                f["bytes"].as_u64().unwrap_or(0),
            )
        })
        .collect();
    assert!(
        listed.keys().any(|p| p.ends_with("/crazyones.txt")),
        "{listed:?}"
    );

    let restored = ok_json(env.run(&[
        "admin",
        "workspace-restore",
        zip_backup.to_str().expect("utf-8"),
        "--yes",
        "--json",
    ]));
    assert_eq!(restored["files"], listed.len());
    assert_eq!(table_rows(&env, None), snapshot_rows);
    let uploads: BTreeMap<String, u64> = files_under(&data.join("uploads"))
        .into_iter()
        .map(|(p, bytes)| (format!("uploads/{p}"), bytes.len() as u64))
        .collect();
    let listed_uploads: BTreeMap<String, u64> = listed
        .iter()
        .filter(|(p, _)| p.starts_with("uploads/"))
        .map(|(p, b)| (p.clone(), *b))
        .collect();
    assert_eq!(uploads, listed_uploads);
    assert_eq!(
        std::fs::read(data.join(format!("uploads/{}/crazyones.txt", first[0]))).expect("upload"),
        std::fs::read(&corpus_file).expect("corpus")
    );
    let check = ok_json(env.run(&["admin", "db-check", "--json"]));
    assert_eq!(check["healthy"], true, "{check}");
    // The restored workspace serves: ready, and every restored document is listed.
    let api = Api::start(&env);
    let ready = get_json(&client, &api, "/ready").await;
    assert_eq!(ready["status"], "ready", "{ready}");
    let listed_docs = get_json(&client, &api, "/documents?limit=100").await;
    assert_eq!(listed_docs["total"], snapshot_rows["documents"]);
    drop(api);

    // The database backup restores on its own too, row for row.
    let backup_rows = table_rows(&env, Some(&db_backup));
    assert!(backup_rows["documents"] >= 4);
    let restored = ok_json(env.run(&[
        "admin",
        "db-restore",
        db_backup.to_str().expect("utf-8"),
        "--yes",
        "--json",
    ]));
    assert_eq!(restored["pending_migrations"], json!([]));
    assert_eq!(table_rows(&env, None), backup_rows);
    for sidecar in ["shelf.sqlite-wal", "shelf.sqlite-shm"] {
        assert!(!data.join(sidecar).exists(), "{sidecar} left behind");
    }
}

/// A ZIP of `members` (deflated), then each `(from, to)` name patched in place: the writer
/// refuses some names a hostile archive carries, so they are written under stand-ins of the
/// same length and renamed in the bytes (names are covered by no checksum).
fn crafted(members: &[(&str, Vec<u8>)], symlinks: &[&str], renames: &[(&str, &str)]) -> Vec<u8> {
    let mut writer = zip::ZipWriter::new(Cursor::new(Vec::new()));
    let options = SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated)
        .compression_level(Some(1));
    for (name, body) in members {
        writer.start_file(*name, options).expect("start");
        writer.write_all(body).expect("write");
    }
    for name in symlinks {
        writer
            .add_symlink(*name, "/etc/passwd", options)
            .expect("symlink");
    }
    let mut bytes = writer.finish().expect("finish").into_inner();
    for (from, to) in renames {
        assert_eq!(from.len(), to.len());
        let mut found = 0;
        let mut i = 0;
        while i + from.len() <= bytes.len() {
            if &bytes[i..i + from.len()] == from.as_bytes() {
                bytes[i..i + from.len()].copy_from_slice(to.as_bytes());
                found += 1;
            }
            i += 1;
        }
        // Once in the local header, once in the central directory.
        assert_eq!(found, 2, "{from}");
    }
    bytes
}

#[test]
fn refused_archives_write_nothing() {
    let env = migrated(Env::new());
    let data = env.path().join("data");
    let note = env.write("note.txt", "A note kept through every refused restore.\n");
    ok_json(env.run(&["import", note.to_str().expect("utf-8"), "--json"]));
    let before = files_under(&data);
    let small = b"x".to_vec();
    let many: Vec<(String, Vec<u8>)> = (0..12)
        .map(|i| (format!("data/f{i}"), small.clone()))
        .collect();
    let many_refs: Vec<(&str, Vec<u8>)> =
        many.iter().map(|(n, b)| (n.as_str(), b.clone())).collect();
    let mut oversized_manifest = br#"{"format": "shelf-workspace-backup""#.to_vec();
    oversized_manifest.resize(65 * 1024 * 1024, b' ');
    let cases: Vec<(&str, Vec<u8>, Vec<&str>, &str)> = vec![
        (
            "traversal",
            crafted(&[("zz/x", small.clone())], &[], &[("zz/x", "../x")]),
            vec![],
            "unsafe_archive_member",
        ),
        (
            "absolute",
            crafted(&[("zetc/x", small.clone())], &[], &[("zetc/x", "/etc/x")]),
            vec![],
            "unsafe_archive_member",
        ),
        (
            "deep traversal",
            crafted(
                &[("data/zz/zz/x", small.clone())],
                &[],
                &[("data/zz/zz/x", "data/../../x")],
            ),
            vec![],
            "unsafe_archive_member",
        ),
        (
            "symlink",
            crafted(
                &[("manifest.json", b"{}".to_vec())],
                &["data/uploads/link"],
                &[],
            ),
            vec![],
            "archive_symlink_member",
        ),
        (
            "duplicate",
            crafted(
                &[("data/a", small.clone()), ("data/b", small.clone())],
                &[],
                &[("data/b", "data/a")],
            ),
            vec![],
            "duplicate_archive_member",
        ),
        (
            "bomb",
            crafted(&[("data/zeros", vec![0; 8 * 1024 * 1024])], &[], &[]),
            vec!["--max-expanded-bytes", "1048576"],
            "archive_too_large",
        ),
        (
            "too many files",
            crafted(&many_refs, &[], &[]),
            vec!["--max-files", "10"],
            "archive_too_many_files",
        ),
        (
            "oversized manifest",
            crafted(&[("manifest.json", oversized_manifest)], &[], &[]),
            vec![],
            "archive_manifest_too_large",
        ),
        (
            "foreign member",
            crafted(&[("notes.txt", small.clone())], &[], &[]),
            vec![],
            "unsafe_archive_member",
        ),
        (
            "no manifest",
            crafted(&[("data/a", small.clone())], &[], &[]),
            vec![],
            "invalid_backup",
        ),
        (
            "not a zip",
            b"PK but not really a zip archive".to_vec(),
            vec![],
            "invalid_backup",
        ),
    ];
    for (what, bytes, extra, code) in cases {
        let path = env.write(&format!("{}.zip", what.replace(' ', "-")), bytes);
        let mut args = vec![
            "admin",
            "workspace-restore",
            path.to_str().expect("utf-8"),
            "--yes",
            "--json",
        ];
        args.extend(extra);
        let body = refused(env.run(&args), code);
        eprintln!("{what}: {}", body["detail"]);
    }
    let out = env.run(&["admin", "workspace-restore", "missing.zip", "--json"]);
    refused(out, "confirmation_required");
    assert_eq!(
        files_under(&data),
        before,
        "a refused restore changed the data directory"
    );
}

#[test]
fn backups_refuse_symlinked_destinations_and_parents() {
    let env = migrated(Env::new());
    let real = env.path().join("real");
    std::fs::create_dir_all(&real).expect("mkdir");
    let linked_dir = env.path().join("linked");
    std::os::unix::fs::symlink(&real, &linked_dir).expect("symlink");
    let linked_file = real.join("planted.sqlite");
    let target = env.path().join("victim");
    std::fs::write(&target, "not to be overwritten").expect("write");
    std::os::unix::fs::symlink(&target, &linked_file).expect("symlink");
    for command in ["db-backup", "workspace-backup"] {
        for dest in [linked_dir.join("backup.out"), linked_file.clone()] {
            let out = env.run(&["admin", command, dest.to_str().expect("utf-8"), "--json"]);
            refused(out, "symlinked_path");
        }
        let out = env.run(&["admin", command, real.to_str().expect("utf-8"), "--json"]);
        refused(out, "invalid_destination");
    }
    assert_eq!(
        std::fs::read_to_string(&target).expect("victim"),
        "not to be overwritten"
    );
    assert!(!real.join("backup.out").exists());
    let leftovers: Vec<PathBuf> = std::fs::read_dir(&real)
        .expect("read_dir")
        .flatten()
        .map(|e| e.path())
        .collect();
    assert_eq!(leftovers, vec![linked_file]);
    // Restores refuse a symlinked database path the same way.
    let backup = env.path().join("ok.sqlite");
    ok_json(env.run(&[
        "admin",
        "db-backup",
        backup.to_str().expect("utf-8"),
        "--json",
    ]));
    let mut cmd = env.command(&[
        "admin",
        "db-restore",
        backup.to_str().expect("utf-8"),
        "--yes",
        "--json",
    ]);
    cmd.env("SHELF_DATABASE_PATH", linked_dir.join("shelf.sqlite"));
    refused(cmd.output().expect("run"), "symlinked_path");
}

#[test]
fn db_check_fails_on_a_corrupted_copy_and_restore_refuses_it() {
    let env = migrated(Env::new());
    let note = env.write("note.txt", "Rows to corrupt.\n");
    ok_json(env.run(&["import", note.to_str().expect("utf-8"), "--json"]));
    let copy = env.path().join("copy.sqlite");
    ok_json(env.run(&[
        "admin",
        "db-backup",
        copy.to_str().expect("utf-8"),
        "--json",
    ]));
    let healthy = ok_json(run_on(&env, Some(&copy), &["admin", "db-check", "--json"]));
    assert_eq!(healthy["healthy"], true);

    // Page 1 (the schema) stays; the b-tree pages after it are overwritten.
    let mut bytes = std::fs::read(&copy).expect("copy");
    let page = 4096;
    assert!(bytes.len() > 8 * page);
    for b in &mut bytes[2 * page..8 * page] {
        *b = 0x5A;
    }
    std::fs::write(&copy, &bytes).expect("corrupt");
    let out = run_on(&env, Some(&copy), &["admin", "db-check", "--json"]);
    // Damage exits 4 (`database_corrupt`), other problems 1.
    assert_eq!(out.status.code(), Some(4));
    let report = json_of(&out);
    assert_eq!(report["healthy"], false, "{report}");
    assert_ne!(report["integrity"], json!(["ok"]), "{report}");
    let text = run_on(&env, Some(&copy), &["admin", "db-check"]);
    assert_eq!(text.status.code(), Some(4));

    let out = env.run(&[
        "admin",
        "db-restore",
        copy.to_str().expect("utf-8"),
        "--yes",
        "--json",
    ]);
    refused(out, "invalid_backup");
    let stranger = env.write("stranger.sqlite", "");
    let out = env.run(&[
        "admin",
        "db-restore",
        stranger.to_str().expect("utf-8"),
        "--yes",
        "--json",
    ]);
    refused(out, "invalid_backup");
    // The live database is untouched and healthy.
    let live = ok_json(env.run(&["admin", "db-check", "--json"]));
    assert_eq!(live["healthy"], true);
}
