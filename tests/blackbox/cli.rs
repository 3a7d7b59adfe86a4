//! The `shelf` CLI end to end on real documents: import, process in-process and through the
//! queue, search, runs, pipelines, admin, and refusals of hostile input.

use std::time::Duration;

use serde_json::Value;

use crate::support::{Env, corpus, wait_for};

#[test]
fn search_filters_and_facets_from_the_cli() {
    let env = Env::new();
    env.write(
        "notes/alpha-notes.txt",
        "Farriers shoe horses with iron shoes.\n",
    );
    env.write(
        "notes/beta-notes.txt",
        "A farrier trims hooves before shoeing.\n",
    );
    let dir = env.path().join("notes");
    let report = env.json(&["import", dir.to_str().unwrap(), "--json"]);
    assert_eq!(report["summary"]["runs_succeeded"], 2, "{report:#}");

    let ids = |extra: &[&str]| -> Vec<String> {
        let mut args = vec!["search", "farrier", "--json"];
        args.extend_from_slice(extra);
        let hits = env.json(&args);
        let mut ids: Vec<String> = hits["document_ids"]
            .as_array()
            .expect("ids")
            .iter()
            .map(|v| v.as_str().unwrap_or_default().to_owned())
            .collect();
        ids.sort();
        ids
    };
    let all = ids(&[]);
    assert_eq!(all.len(), 2, "{all:?}");
    assert_eq!(ids(&["--filename", "ALPHA"]).len(), 1);
    assert!(ids(&["--after", "2999-01-01T00:00:00Z"]).is_empty());
    assert_eq!(ids(&["--before", "2999-01-01T00:00:00Z"]), all);
    assert_eq!(ids(&["--status", "ready"]), all);

    let facets = env.json(&["search", "farrier", "--facets", "--json"]);
    let filenames = facets["filenames"].as_array().expect("filename facet");
    assert_eq!(filenames.len(), 2, "{facets:#}");
    let one = env.json(&["search", "farrier", "--facets", "--limit", "1", "--json"]);
    assert_eq!(
        one["filenames"].as_array().map(Vec::len),
        Some(1),
        "{one:#}"
    );

    let bad = env.run(&["search", "farrier", "--after", "last tuesday", "--json"]);
    assert_eq!(bad.status.code(), Some(2));
    let error: Value = serde_json::from_slice(&bad.stdout).expect("json error");
    assert!(error["code"].as_str().is_some(), "{error}");
}

#[test]
fn importing_a_directory_processes_and_indexes_every_document() {
    let env = Env::new();
    let report = env.json(&["import", corpus("text").to_str().unwrap(), "--json"]);
    let files = report["files"].as_array().unwrap();
    assert_eq!(files.len(), 10, "{report:#}");
    assert_eq!(report["summary"]["failed"], 0, "{report:#}");
    assert_eq!(report["summary"]["runs_succeeded"], 10, "{report:#}");
    // Two of the docling files have identical bytes: content addressing stores them once.
    let ids: std::collections::BTreeSet<&str> = files
        .iter()
        .map(|f| f["document_id"].as_str().unwrap())
        .collect();
    assert_eq!(
        report["summary"]["duplicates"],
        (files.len() - ids.len()) as u64
    );
    for id in &ids {
        assert!(id.starts_with("doc_") && id.len() == 20, "{id}");
    }

    let hits = env.json(&["search", "quick brown dog", "--details", "--json"]);
    let phototest = files
        .iter()
        .find(|f| f["path"].as_str().unwrap().ends_with("phototest.txt"))
        .unwrap();
    assert_eq!(hits["results"][0]["document_id"], phototest["document_id"]);
    assert!(
        hits["results"][0]["snippet"]
            .as_str()
            .unwrap()
            .contains("<mark>")
    );
    assert_eq!(hits["results"][0]["source"], "cleaned");
    let raw = env.json(&["search", "misfits", "--scope", "raw", "--json"]);
    assert!(raw["total"].as_u64().unwrap() <= 1);

    let runs = env.json(&["runs", "--json", "--limit", "100"]);
    assert_eq!(runs["total"].as_u64(), Some(10));
}

#[test]
fn the_same_bytes_give_the_same_document() {
    let env = Env::new();
    let a = env.write("a/notes.md", "# Notes\n\nSame bytes, two names.\n");
    let b = env.write("b/other-name.md", "# Notes\n\nSame bytes, two names.\n");
    let first = env.json(&["import", a.to_str().unwrap(), "--mode", "none", "--json"]);
    let second = env.json(&["import", b.to_str().unwrap(), "--mode", "none", "--json"]);
    assert_eq!(
        first["files"][0]["document_id"],
        second["files"][0]["document_id"]
    );
    assert_eq!(first["files"][0]["duplicate"], false);
    assert_eq!(second["files"][0]["duplicate"], true);
    assert!(
        first["files"][0]["run_id"].is_null(),
        "mode none makes no run"
    );
}

#[test]
fn text_encodings_are_decoded_and_binary_is_refused() {
    let env = Env::new();
    let utf16: Vec<u8> = [0xFF, 0xFE]
        .into_iter()
        .chain(
            "Ünïcode façade text in UTF-16"
                .encode_utf16()
                .flat_map(|u| u.to_le_bytes()),
        )
        .collect();
    let dir = env.path().join("mixed");
    env.write("mixed/utf16.txt", utf16);
    // Without a byte-order mark (as some tools write UTF-16), and UTF-32 with and without one:
    // read, not refused at the door as binary for their NUL bytes.
    let wide_text = "Wide text without a mark: the parser reads every letter of it.";
    let utf16be: Vec<u8> = wide_text
        .encode_utf16()
        .flat_map(|u| u.to_be_bytes())
        .collect();
    let utf16le: Vec<u8> = wide_text
        .encode_utf16()
        .flat_map(|u| u.to_le_bytes())
        .collect();
    let utf32le: Vec<u8> = [0xFF, 0xFE, 0, 0]
        .into_iter()
        .chain(wide_text.chars().flat_map(|c| (c as u32).to_le_bytes()))
        .collect();
    let utf32be: Vec<u8> = wide_text
        .chars()
        .flat_map(|c| (c as u32).to_be_bytes())
        .collect();
    env.write("mixed/fake-text-utf-16-be.txt", utf16be);
    env.write("mixed/fake-text-utf-16-le.txt", utf16le);
    env.write("mixed/utf-32-le-bom.txt", utf32le);
    env.write("mixed/utf-32-be.txt", utf32be);
    env.write(
        "mixed/latin1.txt",
        b"caf\xe9 cr\xe8me br\xfbl\xe9e, a dessert\n",
    );
    env.write(
        "mixed/binary.txt",
        b"\x00\x01\x02\x03ELF binary pretending to be text\x00",
    );
    env.write(
        "mixed/archive.txt",
        std::fs::read(corpus("hostile/archives-renamed/small_archive-zip.txt")).unwrap(),
    );
    env.write("mixed/image.png", b"\x89PNG\r\n\x1a\n");
    let out = env.run(&["import", dir.to_str().unwrap(), "--json"]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "a failed file makes the command fail"
    );
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let by_name = |name: &str| {
        report["files"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["path"].as_str().unwrap().ends_with(name))
            .unwrap()
            .clone()
    };
    assert_eq!(by_name("utf16.txt")["run_status"], "succeeded");
    for name in [
        "fake-text-utf-16-be.txt",
        "fake-text-utf-16-le.txt",
        "utf-32-le-bom.txt",
        "utf-32-be.txt",
    ] {
        let file = by_name(name);
        assert_eq!(file["run_status"], "succeeded", "{file:#}");
    }
    let found = env.json(&["search", "parser reads every letter", "--json"]);
    assert!(
        found["total"].as_u64() >= Some(4),
        "the wide texts are searchable: {found:#}"
    );
    assert_eq!(by_name("latin1.txt")["run_status"], "succeeded");
    assert_eq!(
        by_name("binary.txt")["error"]["code"],
        "unsupported_file_type"
    );
    assert_eq!(
        by_name("archive.txt")["error"]["code"],
        "archive_not_supported"
    );
    // Images are accepted; until OCR is built their runs fail clearly, never silently empty.
    let image = by_name("image.png");
    assert_eq!(image["run_status"], "failed", "{image:#}");
    // The record carries the failing stage's stable code, the run too (not `run_failed`).
    let code = image["error"]["code"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(!code.is_empty() && code != "run_failed", "{image:#}");
    let run = env.json(&[
        "runs",
        image["run_id"].as_str().unwrap_or_default(),
        "--json",
    ]);
    assert_eq!(run["error_code"], code.as_str(), "{run:#}");
    assert!(
        run["error"]
            .as_str()
            .unwrap_or_default()
            .contains(&format!("({code})")),
        "{run:#}"
    );
    let hits = env.json(&["search", "façade", "--json"]);
    assert_eq!(hits["total"], 1);
    let hits = env.json(&["search", "crème brûlée", "--json"]);
    assert_eq!(hits["total"], 1);
}

#[test]
fn every_renamed_archive_and_bomb_is_refused() {
    let env = Env::new();
    for dir in ["hostile/archives-renamed", "hostile/bombs"] {
        let out = env.run(&["import", corpus(dir).to_str().unwrap(), "--json"]);
        assert_eq!(out.status.code(), Some(1));
        let report: Value = serde_json::from_slice(&out.stdout).unwrap();
        for file in report["files"].as_array().unwrap() {
            assert_eq!(file["status"], "failed", "{file}");
            assert_eq!(file["error"]["code"], "archive_not_supported", "{file}");
        }
        assert_eq!(report["summary"]["ingested"], 0);
    }
    let docs = env.json(&["runs", "--json"]);
    assert_eq!(docs["total"], 0, "nothing was stored or run");
}

#[test]
fn queued_runs_are_processed_by_a_worker_process() {
    let env = Env::new();
    assert!(env.run(&["migrate"]).status.success());
    let file = env.write(
        "queue.md",
        "# Queue\n\nProcessed by a separate worker process.\n",
    );
    let (document_id, run_id) = env.queue(&file);
    let queue = env.json(&["admin", "queue", "--json"]);
    assert_eq!(queue["counts"]["queued"], 1);
    let _worker = env.spawn(&["worker", "--concurrency", "2"]);
    let run = wait_for(
        Duration::from_secs(30),
        "the worker to finish the run",
        || {
            let run = env.json(&["runs", &run_id, "--json"]);
            (run["status"] == "succeeded").then_some(run)
        },
    );
    let stages: Vec<(&str, &str)> = run["stages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (s["name"].as_str().unwrap(), s["status"].as_str().unwrap()))
        .collect();
    assert_eq!(
        stages,
        [
            ("extract", "succeeded"),
            ("ocr", "skipped"),
            ("correct", "skipped"),
            ("clean", "succeeded"),
            ("classify", "succeeded"),
            ("summarize", "succeeded"),
            ("embed", "skipped"),
            ("index", "succeeded"),
        ]
    );
    assert_eq!(run["document_id"], document_id.as_str());
    assert_eq!(run["pipeline"], "default");
    assert_eq!(run["pipeline_sha256"].as_str().unwrap().len(), 64);
    let hits = env.json(&["search", "separate worker", "--json"]);
    assert_eq!(hits["total"], 1);
}

#[test]
fn failed_runs_can_be_retried_reusing_finished_stages() {
    let env = Env::new();
    // An operator pipeline that stops after OCR; an image that is not one fails there.
    let pipelines = env.path().join("pipelines");
    env.write(
        "pipelines/ocr-only.yaml",
        "version: 1\nstages:\n  extract: { uses: extract }\n  ocr: { uses: ocr, needs: [extract], when: extract.needs_ocr }\n",
    );
    let env = env.with("SHELF_PIPELINES_DIR", pipelines.to_str().unwrap());
    let file = env.write("scan.png", b"\x89PNG\r\n\x1a\n scanned page");
    let out = env.run(&[
        "import",
        file.to_str().unwrap(),
        "--pipeline",
        "ocr-only",
        "--json",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let run_id = report["files"][0]["run_id"].as_str().unwrap();
    let failed = env.json(&["runs", run_id, "--json"]);
    assert_eq!(failed["status"], "failed");
    assert!(
        failed["error"]
            .as_str()
            .unwrap()
            .contains("(image_unreadable)"),
        "{failed:#}"
    );

    // Retrying a run that did not fail is refused.
    let out = env.run(&["admin", "run-retry", "run_0000000000000000", "--json"]);
    assert_eq!(out.status.code(), Some(3));
    let retried = env.run(&["admin", "run-retry", run_id, "--process", "--json"]);
    let retried: Value = serde_json::from_slice(&retried.stdout).unwrap();
    assert_eq!(retried["retry_of"], run_id);
    assert_eq!(retried["attempt"], 2);
    let extract = &retried["stages"][0];
    assert_eq!(extract["reused_from"], run_id, "{retried:#}");
    let starts = retried["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == "stage_started" && e["stage"] == "extract")
        .count();
    assert_eq!(starts, 0, "extract's checkpoint is reused");
    assert_eq!(retried["status"], "failed", "the image is still unreadable");
    let queued_file = env.write("queued.txt", "Queued text.\n");
    let (_, queued_run) = env.queue(&queued_file);
    let out = env.run(&["admin", "run-retry", &queued_run, "--json"]);
    assert_eq!(out.status.code(), Some(1));
    let err: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(err["code"], "run_not_failed");
}

#[test]
fn canceling_a_queued_run_is_immediate() {
    let env = Env::new();
    let file = env.write("c.txt", "cancel me\n");
    let (_, run_id) = env.queue(&file);
    let answer = env.json(&["admin", "run-cancel", &run_id, "--json"]);
    assert_eq!(answer["outcome"], "canceled");
    assert_eq!(answer["status"], "canceled");
    let queue = env.json(&["admin", "queue", "--json"]);
    assert_eq!(queue["total"], 0);
}

#[test]
fn pipeline_check_prints_file_line_and_column() {
    let env = Env::new();
    let bad = env.write(
        "bad.yaml",
        "version: 1\nstages:\n  extract: { uses: extract }\n  clean:\n    uses: clean\n    needs: [extrct]\n    with: { prompt_version: cmos_v4, temperature: 2 }\n",
    );
    let out = env.run(&["pipeline", "check", bad.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    let path = bad.display();
    assert!(
        stderr.contains(&format!("{path}:6:13: stage `clean` needs `extrct`")),
        "{stderr}"
    );
    assert!(
        stderr.contains(&format!(
            "{path}:7:38: bad option for stage `clean` (clean): unknown field `temperature`"
        )),
        "{stderr}"
    );

    let good = env.json(&["pipeline", "check", "../pipelines/default.yaml", "--json"]);
    assert_eq!(good["valid"], true);
    let dot = env.run(&["pipeline", "graph", "default", "--format", "dot"]);
    assert!(String::from_utf8_lossy(&dot.stdout).contains("\"clean\" -> \"classify\""));
    let text = env.run(&["pipeline", "graph", "default"]);
    assert!(
        String::from_utf8_lossy(&text.stdout)
            .contains("ocr (uses ocr) needs [extract] when extract.needs_ocr")
    );
}

#[test]
fn a_database_from_a_newer_shelf_is_refused() {
    let env = Env::new();
    assert!(env.run(&["migrate"]).status.success());
    let db = env.path().join("data/shelf.sqlite");
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        use sea_orm::ConnectionTrait;
        let conn = sea_orm::Database::connect(format!("sqlite://{}?mode=rw", db.display()))
            .await
            .unwrap();
        conn.execute_unprepared("INSERT INTO seaql_migrations (version, applied_at) VALUES ('m29990101_000001_future', 0)")
            .await
            .unwrap();
    });
    for args in [&["migrate"][..], &["worker"][..]] {
        let out = env.run(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains("newer shelf") && stderr.contains("m29990101_000001_future"),
            "{stderr}"
        );
    }
}

#[test]
fn bad_settings_are_all_reported_with_exit_code_2() {
    let env = Env::new()
        .with("SHELF_WORKER_CONCURRENCY", "lots")
        .with("SHELF_LLM_MAX_CONCURRENCY", "many")
        .with("SHELF_WORKER_MAX_RUNS", "0")
        .with("SHELF_LLM_PROVIDER", "gpt");
    let out = env.run(&["runs"]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    for named in [
        "SHELF_WORKER_CONCURRENCY=lots",
        "SHELF_LLM_MAX_CONCURRENCY=many: expected auto or a whole number",
        "SHELF_WORKER_MAX_RUNS must be at least 1",
        "SHELF_LLM_PROVIDER=gpt",
    ] {
        assert!(stderr.contains(named), "{named}: {stderr}");
    }
    // A worker told to run no runs at once is refused by the flag's own check.
    let zero = Env::new().run(&["worker", "--concurrency", "0"]);
    assert_eq!(zero.status.code(), Some(2), "{zero:?}");
}

#[test]
fn help_is_everywhere() {
    let env = Env::new();
    for args in [
        &["--help"][..],
        &["import", "--help"],
        &["worker", "--help"],
        &["pipeline", "check", "--help"],
        &["admin", "run-cancel", "--help"],
    ] {
        let out = env.run(args);
        assert!(out.status.success(), "{args:?}");
        assert!(String::from_utf8_lossy(&out.stdout).contains("Usage:"));
    }
    assert_eq!(env.run(&["no-such-command"]).status.code(), Some(2));
}
