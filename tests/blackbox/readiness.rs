//! Readiness that tells the truth (issue 22): `/ready` stays 200 while a worker indexes
//! documents into the same database, and a full disk is a resource limit, not an internal
//! error: uploads and imports answer 507 `insufficient_storage`, `/ready` 503 with the reason,
//! workers stop claiming, and everything resumes by itself once space returns.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::Value;

use crate::api::{Api, client, get_json, migrated, post_files, upload};
use crate::support::{Env, drain, wait_for};

/// A document of `words` words drawn from a small vocabulary by a seeded generator, so the
/// index sees many distinct terms and every document differs.
fn document(seed: u64, words: usize) -> String {
    const VOCABULARY: &str = "boundary layer pressure gradient turbulent laminar shock wave \
        nozzle supersonic heat transfer flow plate cylinder wing vortex drag lift mach reynolds \
        viscous inviscid stagnation separation transition wake jet cone slender body thermal \
        buckling shell panel flutter stress strain creep fatigue";
    let vocabulary: Vec<&str> = VOCABULARY.split_whitespace().collect();
    let mut state = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
    let mut text = format!("Report {seed}.\n");
    for i in 0..words {
        state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        let word = vocabulary[(state >> 33) as usize % vocabulary.len()];
        text.push_str(word);
        text.push_str(if i % 12 == 11 { ".\n" } else { " " });
    }
    text
}

/// Queued plus running runs, from `GET /queue`.
async fn unfinished(client: &reqwest::Client, api: &Api) -> u64 {
    let queue = get_json(client, api, "/queue").await;
    queue["queued"].as_u64().unwrap_or(0) + queue["running"].as_u64().unwrap_or(0)
}

/// `/ready` polled every 50 ms while a worker indexes documents that a feeder keeps queueing:
/// every answer is 200. Before, `PRAGMA quick_check` ran on a pooled connection whose FTS5
/// structure record was stale after the worker's writes and reported `checksum mismatch`, so
/// most polls under churn were 503. The full check runs on every call here
/// (`SHELF_READY_FULL_CHECK_SECONDS=0`), so the fresh connection, not the cache, is what is
/// tested.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ready_stays_200_while_a_worker_indexes() {
    let env = migrated(
        Env::new()
            .with("SHELF_READY_FULL_CHECK_SECONDS", "0")
            .with("SHELF_MIN_FREE_BYTES", "0")
            .with("SHELF_WORKER_POLL_MS", "20"),
    );
    let api = Api::start(&env);
    let mut worker = env.spawn(&["worker", "--concurrency", "2"]);
    let worker_log = drain(worker.child.stderr.take().expect("stderr"));
    let client = client();

    // The feeder queues documents in batches until polling ends, so the worker is writing to
    // the index for the whole poll, by construction.
    let stop = Arc::new(AtomicBool::new(false));
    let queued = Arc::new(AtomicU64::new(0));
    queued.fetch_add(EnvView::of(&env).queue(0, 40), Ordering::SeqCst);
    let feeder = {
        let (stop, queued) = (stop.clone(), queued.clone());
        let env = EnvView::of(&env);
        std::thread::spawn(move || {
            let mut batch = 1;
            while !stop.load(Ordering::SeqCst) {
                let n = env.queue(batch, 20);
                queued.fetch_add(n, Ordering::SeqCst);
                batch += 1;
            }
        })
    };

    // Wait until the worker has finished a run: indexing has started.
    let deadline = Instant::now() + Duration::from_secs(120);
    while unfinished(&client, &api).await >= queued.load(Ordering::SeqCst) {
        assert!(Instant::now() < deadline, "the worker finished no run");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let done_before = queued.load(Ordering::SeqCst) - unfinished(&client, &api).await;

    let mut polls = 0u32;
    let mut failures = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(300);
    loop {
        let reply = client.get(api.url("/ready")).send().await.expect("ready");
        let status = reply.status();
        if status != StatusCode::OK {
            failures.push(format!(
                "{status}: {}",
                reply.text().await.unwrap_or_default()
            ));
        }
        polls += 1;
        let done_now = queued
            .load(Ordering::SeqCst)
            .saturating_sub(unfinished(&client, &api).await);
        // 200 polls, during which the worker finished runs: the polls overlapped indexing.
        if polls >= 200 && done_now >= done_before + 20 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the worker finished only {} runs in {polls} polls",
            done_now - done_before
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    stop.store(true, Ordering::SeqCst);
    feeder.join().expect("feeder");
    assert!(
        failures.is_empty(),
        "{} of {polls} polls were not 200: {:?}\nAPI log:\n{}\nworker log:\n{}",
        failures.len(),
        &failures[..failures.len().min(5)],
        api.logs(),
        worker_log.lock().map(|l| l.clone()).unwrap_or_default()
    );
    worker.kill();
}

/// What the feeder thread needs of an [`Env`] (the `TempDir` stays with the test).
struct EnvView {
    dir: PathBuf,
    vars: Vec<(String, String)>,
}

impl EnvView {
    fn of(env: &Env) -> EnvView {
        EnvView {
            dir: env.path().to_path_buf(),
            vars: env.vars.clone(),
        }
    }

    /// Queues `count` new documents through `shelf import --mode queue` (its own process,
    /// like an operator's); the number of runs it queued.
    fn queue(&self, batch: u64, count: u64) -> u64 {
        let dir = self.dir.join(format!("incoming-{batch}"));
        std::fs::create_dir_all(&dir).expect("mkdir");
        for i in 0..count {
            let seed = batch * 1_000 + i;
            std::fs::write(dir.join(format!("doc-{seed}.txt")), document(seed, 600))
                .expect("write");
        }
        let mut cmd = Command::new(crate::support::shelf_bin());
        for (key, _) in std::env::vars() {
            if key.starts_with("SHELF_") {
                cmd.env_remove(key);
            }
        }
        let out = cmd
            .args([
                "import",
                &dir.display().to_string(),
                "--mode",
                "queue",
                "--json",
            ])
            .envs(self.vars.iter().map(|(k, v)| (k, v)))
            .output()
            .expect("import");
        let report: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
        report["files"]
            .as_array()
            .map(|f| f.iter().filter(|r| r["run_status"] == "queued").count() as u64)
            .unwrap_or(0)
    }
}

/// A small tmpfs mounted for one test, unmounted when dropped (after the processes using it,
/// which the test declares later and so drops first).
struct Tmpfs {
    dir: tempfile::TempDir,
}

impl Tmpfs {
    /// Mounts `size` (as `mount -o size=` reads it) on a fresh directory; `None` when this
    /// host cannot mount (not root, no tmpfs, a container without the capability).
    fn mount(size: &str) -> Option<Tmpfs> {
        let dir = tempfile::tempdir().expect("tempdir");
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir.path())
            .output()
            .ok()?;
        out.status.success().then_some(Tmpfs { dir }).or_else(|| {
            eprintln!(
                "skipped: cannot mount a tmpfs here ({}); run as root to test a full disk",
                String::from_utf8_lossy(&out.stderr).trim()
            );
            None
        })
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let unmounted = Command::new("umount")
            .arg(self.dir.path())
            .status()
            .is_ok_and(|s| s.success());
        if !unmounted {
            // Something still holds a file open: detach it now, freed once closed.
            let _ = Command::new("umount")
                .arg("-l")
                .arg(self.dir.path())
                .status();
        }
    }
}

/// Appends to `file` until the volume refuses (`ENOSPC`): the volume is then full.
fn fill(file: &Path) {
    use std::io::Write;
    let mut out = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(file)
        .expect("filler");
    let chunk = vec![0x5a_u8; 64 * 1024];
    loop {
        if let Err(e) = out.write_all(&chunk).and_then(|()| out.flush()) {
            assert_eq!(e.raw_os_error(), Some(28), "filling stopped by {e}");
            return;
        }
    }
}

/// Free bytes of the volume holding `path`, as `stat -f` reports them (blocks available to
/// unprivileged users times the block size).
fn free_bytes(path: &Path) -> u64 {
    let out = Command::new("stat")
        .args(["-f", "-c", "%a %S"])
        .arg(path)
        .output()
        .expect("stat -f");
    let text = String::from_utf8_lossy(&out.stdout);
    let mut parts = text
        .split_whitespace()
        .map(|n| n.parse::<u64>().unwrap_or(0));
    parts.next().unwrap_or(0) * parts.next().unwrap_or(0)
}

/// A full disk is a resource limit, not an internal error. On a 48 MiB tmpfs with
/// `SHELF_MIN_FREE_BYTES` at 8 MiB: below the floor, uploads, batches and imports (API and CLI)
/// answer 507 `insufficient_storage`, `/ready` 503 with the reason, and a worker started then
/// claims nothing (its queued runs stay queued, none is left `running`); with the volume
/// completely full, deleting a document does not answer 500; once the filler is removed,
/// everything resumes by itself: the worker finishes every run, `/ready` is 200 again, uploads
/// work, and no document was lost. Before, uploads answered 400 `ingest_failed`, the delete 500
/// `server_error`, `/ready` 200 (its probe never flushed), and workers kept claiming runs that
/// then failed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_disk_refuses_new_work_pauses_workers_and_recovers_by_itself() {
    let Some(tmpfs) = Tmpfs::mount("48m") else {
        return;
    };
    let data = tmpfs.path().join("data");
    let filler = tmpfs.path().join("filler");
    let env = Env::new()
        .with("SHELF_DATA_DIR", &data.display().to_string())
        .with("SHELF_MIN_FREE_BYTES", &(8u64 << 20).to_string())
        .with("SHELF_WORKER_POLL_MS", "20");
    let import_root = env.path().join("import-root");
    std::fs::create_dir_all(&import_root).expect("import root");
    std::fs::write(import_root.join("later.txt"), document(99, 200)).expect("write");
    let env = migrated(env.with("SHELF_API_IMPORT_ROOT", &import_root.display().to_string()));
    let api = Api::start(&env);
    let client = client();

    // Documents stored and queued while there is room; no worker runs yet.
    let mut documents = Vec::new();
    let mut runs = Vec::new();
    for seed in 0..6 {
        let (status, doc) = upload(
            &client,
            &api,
            &format!("doc-{seed}.txt"),
            document(seed, 400).into_bytes(),
        )
        .await;
        assert_eq!(status, StatusCode::CREATED, "{doc}");
        let id = doc["id"].as_str().expect("id").to_string();
        let run: Value = client
            .post(api.url("/runs"))
            .json(&serde_json::json!({"document_id": id, "processing_mode": "queue"}))
            .send()
            .await
            .expect("run")
            .json()
            .await
            .expect("json");
        assert_eq!(run["status"], "queued", "{run}");
        runs.push(run["id"].as_str().expect("run id").to_string());
        documents.push(id);
    }

    // Below the floor: fill the volume, then give back 2 MiB.
    fill(&filler);
    let full_len = std::fs::metadata(&filler).expect("filler").len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&filler)
        .and_then(|f| f.set_len(full_len - (2 << 20)))
        .expect("truncate");
    let free = free_bytes(tmpfs.path());
    assert!(free > 0 && free < 8 << 20, "{free} bytes free");

    let ready = client.get(api.url("/ready")).send().await.expect("ready");
    assert_eq!(ready.status(), StatusCode::SERVICE_UNAVAILABLE);
    let body: Value = ready.json().await.expect("json");
    assert_eq!(body["code"], "service_unavailable");
    assert_eq!(
        body["detail"],
        "free disk space is below SHELF_MIN_FREE_BYTES"
    );

    let (status, refused) = upload(&client, &api, "new.txt", document(50, 100).into_bytes()).await;
    assert_eq!(status, StatusCode::INSUFFICIENT_STORAGE, "{refused}");
    assert_eq!(refused["code"], "insufficient_storage");
    assert!(
        refused["detail"]
            .as_str()
            .is_some_and(|d| d.contains("SHELF_MIN_FREE_BYTES")),
        "{refused}"
    );
    let (status, refused) = post_files(
        &client,
        &api,
        "/documents/batch",
        "files",
        &[("b.txt", document(51, 100).into_bytes())],
    )
    .await;
    assert_eq!(status, StatusCode::INSUFFICIENT_STORAGE, "{refused}");
    let import = client
        .post(api.url("/imports"))
        .json(&serde_json::json!({"source_dir": "later.txt", "processing_mode": "none"}))
        .send()
        .await
        .expect("import");
    assert_eq!(import.status(), StatusCode::INSUFFICIENT_STORAGE);
    let cli = env.run(&[
        "import",
        &import_root.join("later.txt").display().to_string(),
        "--json",
    ]);
    assert!(!cli.status.success(), "shelf import must fail");
    let cli: Value = serde_json::from_slice(&cli.stdout).unwrap_or(Value::Null);
    assert_eq!(cli["code"], "insufficient_storage", "{cli}");
    // Nor does `shelf process` run a queued run in its own process: it stays queued.
    let process = env.run(&["process", &documents[0], "--json"]);
    assert!(!process.status.success(), "shelf process must fail");
    let process: Value = serde_json::from_slice(&process.stdout).unwrap_or(Value::Null);
    assert_eq!(process["code"], "insufficient_storage", "{process}");

    // A worker started now claims nothing, and says why.
    let mut worker = env.spawn(&["worker", "--concurrency", "2"]);
    let worker_log = drain(worker.child.stderr.take().expect("stderr"));
    let log = || worker_log.lock().map(|l| l.clone()).unwrap_or_default();
    wait_for(
        Duration::from_secs(60),
        "the worker to pause claiming",
        || log().contains("claiming paused").then_some(()),
    );
    let queue = get_json(&client, &api, "/queue").await;
    assert_eq!(queue["queued"], runs.len() as u64, "{queue}");
    assert_eq!(queue["running"], 0, "{queue}");

    // Completely full: a delete is no internal error, and reads still answer.
    fill(&filler);
    assert_eq!(free_bytes(tmpfs.path()), 0);
    let gone = documents.pop().expect("a document");
    let delete = client
        .delete(api.url(&format!("/documents/{gone}")))
        .send()
        .await
        .expect("delete");
    let delete_status = delete.status();
    let delete_body: Value = delete.json().await.unwrap_or(Value::Null);
    assert_ne!(
        delete_status,
        StatusCode::INTERNAL_SERVER_ERROR,
        "{delete_body}"
    );
    assert!(
        delete_status.is_success() || delete_body["code"] == "insufficient_storage",
        "{delete_status} {delete_body}"
    );
    if !delete_status.is_success() {
        documents.push(gone.clone());
    }
    let listed = client
        .get(api.url("/documents"))
        .send()
        .await
        .expect("list");
    assert_eq!(listed.status(), StatusCode::OK);
    let metrics = get_json(&client, &api, "/metrics").await;
    let refusals = &metrics["metrics"]["shelf_storage_refusals_total"]["samples"][0]["value"];
    assert!(refusals.as_f64().is_some_and(|n| n >= 3.0), "{refusals}");
    assert_eq!(
        metrics["metrics"]["shelf_storage_free_bytes"]["samples"][0]["value"],
        0.0
    );
    let queue = get_json(&client, &api, "/queue").await;
    assert_eq!(queue["running"], 0, "{queue}");

    // Space returns: everything resumes by itself.
    std::fs::remove_file(&filler).expect("remove the filler");
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let queue = get_json(&client, &api, "/queue").await;
        if queue["queued"] == 0 && queue["running"] == 0 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the runs never ended: {queue}\n{}",
            log()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(log().contains("claiming resumed"), "{}", log());
    for run in &runs {
        let run: Value = get_json(&client, &api, &format!("/runs/{run}")).await;
        let deleted_with_its_document = run["code"] == "not_found";
        assert!(
            run["status"] == "succeeded" || deleted_with_its_document,
            "{run}"
        );
    }
    let ready = client.get(api.url("/ready")).send().await.expect("ready");
    assert_eq!(ready.status(), StatusCode::OK);
    let (status, doc) = upload(&client, &api, "after.txt", document(60, 100).into_bytes()).await;
    assert_eq!(status, StatusCode::CREATED, "{doc}");
    for id in &documents {
        let doc = get_json(&client, &api, &format!("/documents/{id}")).await;
        assert_eq!(doc["status"], "ready", "{doc}");
    }
    let listed = get_json(&client, &api, "/documents").await;
    assert_eq!(listed["total"], documents.len() as u64 + 1, "{listed}");
    worker.kill();
}
