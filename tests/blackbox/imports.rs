//! Imports end to end: `shelf import` with each output mode and the tree it leaves, recursion,
//! overwrite and formats; `POST /imports` on a real `shelf api` with every path rule, the caps,
//! each processing mode, manifests (a foreign file left untouched, status paging), the page
//! manifest of a scanned PDF read through OCR; a SIGKILLed import resumed without converting
//! anything twice; and a hot folder across a restart.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::api::{Api, client, get_json, migrated};
use crate::support::{Env, corpus, tree, wait_for};

/// A small source tree: two top-level documents and one in a subdirectory.
fn sources(env: &Env, name: &str) -> PathBuf {
    env.write(&format!("{name}/alpha.txt"), "Farriers shoe horses.\n");
    env.write(
        &format!("{name}/beta.md"),
        "# Beta\n\nA **farrier** trims hooves.\n",
    );
    env.write(
        &format!("{name}/sub/gamma.txt"),
        "Gamma in a subdirectory.\n",
    );
    env.path().join(name)
}

fn s(path: &Path) -> String {
    path.display().to_string()
}

#[test]
fn each_output_mode_leaves_its_tree() {
    let env = Env::new();
    let src = sources(&env, "src");

    // workspace (default), not recursive: outputs under <data>/converted/<dir>-<hash>/.
    let report = env.json(&["import", &s(&src), "--mode", "none", "--json"]);
    assert_eq!(report["summary"]["converted"], 2, "{report:#}");
    assert_eq!(report["summary"]["runs_succeeded"], 0);
    let converted = env.path().join("data/converted");
    let ws = tree(&converted);
    assert_eq!(ws.len(), 2, "{ws:?}");
    assert!(
        ws[0].starts_with("src-") && ws[0].ends_with("/alpha.txt.md"),
        "{ws:?}"
    );
    assert!(ws[1].ends_with("/beta.md.md"), "{ws:?}");
    assert_eq!(
        tree(&src),
        ["alpha.txt", "beta.md", "sub/gamma.txt"],
        "nothing beside the sources"
    );

    // Again: outputs exist, so files are skipped; --overwrite converts them again.
    let again = env.json(&["import", &s(&src), "--mode", "none", "--json"]);
    assert_eq!(again["summary"]["skipped"], 2, "{again:#}");
    assert_eq!(again["files"][0]["error"]["code"], "output_exists");
    let over = env.json(&[
        "import",
        &s(&src),
        "--mode",
        "none",
        "--overwrite",
        "--json",
    ]);
    assert_eq!(over["summary"]["converted"], 2, "{over:#}");

    // new-directory, recursive, txt: the source tree mirrored under the new directory.
    let out = env.path().join("out/new");
    let report = env.json(&[
        "import",
        &s(&src),
        "--mode",
        "none",
        "--recursive",
        "--format",
        "txt",
        "--output-mode",
        "new-directory",
        "--output-dir",
        &s(&out),
        "--json",
    ]);
    assert_eq!(report["summary"]["converted"], 3, "{report:#}");
    assert_eq!(
        tree(&out),
        ["alpha.txt.txt", "beta.md.txt", "sub/gamma.txt.txt"]
    );
    let beta = std::fs::read_to_string(out.join("beta.md.txt")).unwrap();
    assert!(
        beta.contains("A farrier trims hooves.") && !beta.contains("**"),
        "{beta}"
    );

    // original: beside each source; a second import does not take the outputs as sources.
    let orig = sources(&env, "orig");
    let report = env.json(&[
        "import",
        &s(&orig),
        "--mode",
        "none",
        "--recursive",
        "--output-mode",
        "original",
        "--json",
    ]);
    assert_eq!(report["summary"]["converted"], 3, "{report:#}");
    assert_eq!(
        tree(&orig),
        [
            "alpha.txt",
            "alpha.txt.md",
            "beta.md",
            "beta.md.md",
            "sub/gamma.txt",
            "sub/gamma.txt.md"
        ]
    );
    let again = env.json(&[
        "import",
        &s(&orig),
        "--mode",
        "none",
        "--recursive",
        "--output-mode",
        "original",
        "--json",
    ]);
    assert_eq!(again["summary"]["files"], 3, "{again:#}");

    // subdirectory: shelf-converted/ beside the sources, at each level.
    let subd = sources(&env, "subd");
    env.json(&[
        "import",
        &s(&subd),
        "--mode",
        "none",
        "--recursive",
        "--output-mode",
        "subdirectory",
        "--json",
    ]);
    assert_eq!(
        tree(&subd),
        [
            "alpha.txt",
            "beta.md",
            "shelf-converted/alpha.txt.md",
            "shelf-converted/beta.md.md",
            "sub/gamma.txt",
            "sub/shelf-converted/gamma.txt.md",
        ]
    );

    // A single file in workspace mode lands directly under converted/.
    let single = env.json(&[
        "import",
        &s(&src.join("alpha.txt")),
        "--mode",
        "none",
        "--overwrite",
        "--json",
    ]);
    assert_eq!(
        single["files"][0]["output"],
        s(&converted.join("alpha.txt.md")),
        "{single:#}"
    );

    // Refusals before anything is converted.
    let bad = env.run(&[
        "import",
        &s(&src),
        "--output-mode",
        "new-directory",
        "--json",
    ]);
    assert_eq!(bad.status.code(), Some(2));
    let error: Value = serde_json::from_slice(&bad.stdout).unwrap();
    assert_eq!(error["code"], "validation_error", "{error}");
}

/// `POST /imports` and its error body.
async fn post_import(api: &Api, body: Value) -> (StatusCode, Value) {
    let reply = client()
        .post(api.url("/imports"))
        .json(&body)
        .send()
        .await
        .expect("post /imports");
    let status = reply.status();
    (status, reply.json().await.expect("json"))
}

#[tokio::test]
async fn server_imports_follow_the_path_rules_caps_and_modes() {
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("x.txt"), "outside the root").unwrap();
    let env = Env::new();
    let root = env.path().join("root");
    let env = migrated(
        env.with("SHELF_API_IMPORT_ROOT", &s(&root))
            .with("SHELF_API_MAX_IMPORT_FILES", "4")
            .with("SHELF_API_MAX_IMPORT_MANIFEST_BYTES", "8000"),
    );
    sources(&env, "root/docs");
    env.write("root/many/1.txt", "one");
    for i in 2..=5 {
        env.write(&format!("root/many/{i}.txt"), format!("file {i}"));
    }
    env.write("root/big/a.txt", "x".repeat(3000));
    std::os::unix::fs::symlink(outside.path().join("x.txt"), root.join("docs/link.txt")).unwrap();
    std::os::unix::fs::symlink(outside.path(), root.join("linked")).unwrap();
    let foreign = env.write("root/foreign.json", r#"{"not": "an import report"}"#);
    let api = Api::start(&env);

    let code = |(status, body): (StatusCode, Value)| {
        (
            status.as_u16(),
            body["code"].as_str().unwrap_or_default().to_string(),
        )
    };
    let refused = [
        (
            json!({"source_dir": s(&outside.path().join("x.txt"))}),
            400,
            "invalid_import_path",
        ),
        (
            json!({"source_dir": "docs/../docs"}),
            400,
            "invalid_import_path",
        ),
        (
            json!({"source_dir": "docs/link.txt"}),
            400,
            "invalid_import_path",
        ),
        (
            json!({"source_dir": "linked/x.txt"}),
            400,
            "invalid_import_path",
        ),
        (
            json!({"source_dir": "docs/missing.txt"}),
            400,
            "invalid_import_path",
        ),
        (
            json!({"source_dir": "docs", "manifest_path": "linked/m.json"}),
            400,
            "invalid_manifest_path",
        ),
        (
            json!({"source_dir": "docs", "output_mode": "new-directory", "output_dir": "linked/out"}),
            400,
            "invalid_output_dir",
        ),
        (
            json!({"source_dir": "docs", "output_mode": "new-directory", "output_dir": "linked"}),
            400,
            "invalid_output_dir",
        ),
        (
            json!({"source_dir": "docs", "output_dir": "out"}),
            422,
            "validation_error",
        ),
        (
            json!({"source_dir": "docs", "format": "pdf"}),
            422,
            "validation_error",
        ),
        (
            json!({"source_dir": "docs", "processing_mode": "later"}),
            422,
            "validation_error",
        ),
        (json!({"source_dir": "many"}), 413, "import_too_large"),
        (
            json!({"source_dir": "docs", "manifest_path": "foreign.json"}),
            400,
            "invalid_manifest_path",
        ),
    ];
    for (body, status, expected) in refused {
        assert_eq!(
            code(post_import(&api, body.clone()).await),
            (status, expected.to_string()),
            "{body}"
        );
    }
    // Nothing was ingested or written by the refused imports, and the foreign file is intact.
    assert_eq!(get_json(&client(), &api, "/documents").await["total"], 0);
    assert!(!env.path().join("data/converted").exists());
    assert!(!outside.path().join("out").exists());
    assert_eq!(
        std::fs::read_to_string(&foreign).unwrap(),
        r#"{"not": "an import report"}"#
    );

    // none: ingested and converted, no run; the report is also the manifest.
    let (status, report) = post_import(
        &api,
        json!({"source_dir": "docs", "processing_mode": "none", "recursive": true, "manifest_path": "m.json"}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{report:#}");
    assert_eq!(report["summary"]["converted"], 3, "{report:#}");
    assert_eq!(report["summary"]["runs_succeeded"], 0);
    let symlinked = report["files"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["path"].as_str().unwrap().ends_with("link.txt"));
    assert_eq!(
        symlinked.unwrap()["error"]["code"],
        "invalid_import_path",
        "{report:#}"
    );
    let manifest: Value =
        serde_json::from_slice(&std::fs::read(root.join("m.json")).unwrap()).unwrap();
    assert_eq!(manifest, report);

    // Status pages through the manifest's records.
    let page = get_json(
        &client(),
        &api,
        "/imports/status?manifest_path=m.json&limit=2&offset=1",
    )
    .await;
    assert_eq!(page["total"], 4, "{page:#}");
    assert_eq!(page["files"].as_array().unwrap().len(), 2);
    assert_eq!(page["files"][0]["path"], report["files"][1]["path"]);
    assert_eq!(page["summary"], report["summary"]);
    let reply = client()
        .get(api.url("/imports/status?limit=2"))
        .send()
        .await
        .unwrap();
    assert_eq!(reply.status(), StatusCode::UNPROCESSABLE_ENTITY);
    let reply = client()
        .get(api.url("/imports/status?manifest_path=foreign.json"))
        .send()
        .await
        .unwrap();
    assert_eq!(reply.status(), StatusCode::BAD_REQUEST);

    // queue: runs are queued for a worker; process: run here to the end.
    let (_, queued) = post_import(
        &api,
        json!({"source_dir": "docs/alpha.txt", "processing_mode": "queue", "output_mode": "new-directory", "output_dir": "q"}),
    )
    .await;
    assert_eq!(queued["files"][0]["run_status"], "queued", "{queued:#}");
    assert!(root.join("q/alpha.txt.md").is_file());
    let (_, processed) = post_import(
        &api,
        json!({"source_dir": "docs/beta.md", "output_mode": "new-directory", "output_dir": "p"}),
    )
    .await;
    assert_eq!(processed["options"]["processing_mode"], "process");
    assert_eq!(
        processed["files"][0]["run_status"], "succeeded",
        "{processed:#}"
    );

    // The manifest cap: the byte cap of a directory, then a manifest over its read cap.
    let env_big = post_import(
        &api,
        json!({"source_dir": "big", "processing_mode": "none"}),
    )
    .await;
    assert_eq!(code(env_big).0, 200);
    let (_, five) = post_import(
        &api,
        json!({"source_dir": "docs", "processing_mode": "none", "recursive": true, "overwrite": true,
               "manifest_path": "big.json", "output_mode": "new-directory", "output_dir": "b"}),
    )
    .await;
    assert_eq!(five["summary"]["converted"], 3, "{five:#}");
    let _ = std::fs::write(root.join("big.json"), {
        let mut padded = five.clone();
        padded["source"] = json!("y".repeat(10_000));
        serde_json::to_vec(&padded).unwrap()
    });
    let reply = client()
        .get(api.url("/imports/status?manifest_path=big.json"))
        .send()
        .await
        .unwrap();
    assert_eq!(reply.status(), StatusCode::PAYLOAD_TOO_LARGE);
    let body: Value = reply.json().await.unwrap();
    assert_eq!(body["code"], "import_manifest_too_large");
}

#[tokio::test]
async fn server_imports_need_a_root_and_cap_bytes() {
    let env = migrated(Env::new().with("SHELF_API_MAX_IMPORT_BYTES", "100"));
    env.write("docs/a.txt", "a");
    let api = Api::start(&env);
    let (status, body) =
        post_import(&api, json!({"source_dir": s(&env.path().join("docs"))})).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(body["code"], "invalid_import_path");
    assert!(
        body["detail"]
            .as_str()
            .unwrap()
            .contains("SHELF_API_IMPORT_ROOT"),
        "{body}"
    );
    drop(api);

    let root = s(env.path());
    let env = env.with("SHELF_API_IMPORT_ROOT", &root);
    env.write("docs/b.txt", "b".repeat(200));
    let api = Api::start(&env);
    let (status, body) = post_import(&api, json!({"source_dir": "docs"})).await;
    assert_eq!(
        (status, body["code"].as_str()),
        (StatusCode::PAYLOAD_TOO_LARGE, Some("import_too_large"))
    );
    assert_eq!(get_json(&client(), &api, "/documents").await["total"], 0);
}

#[tokio::test]
async fn a_scanned_pdf_gets_a_page_manifest() {
    let env = Env::new();
    let root = env.path().join("root");
    std::fs::create_dir_all(root.join("scans")).unwrap();
    std::fs::copy(
        corpus("ocr/rotated-pdf/ocr_test_rotated_180.pdf"),
        root.join("scans/scan.pdf"),
    )
    .unwrap();
    let env = migrated(env.with("SHELF_API_IMPORT_ROOT", &s(&root)));
    let api = Api::start(&env);
    let (status, report) = post_import(
        &api,
        json!({"source_dir": "scans", "processing_mode": "process", "manifest_path": "scans.json"}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{report:#}");
    let file = &report["files"][0];
    assert_eq!(file["status"], "converted", "{report:#}");
    let text = std::fs::read_to_string(file["output"].as_str().unwrap()).unwrap();
    assert!(!text.trim().is_empty(), "the OCR text is the output");
    let sidecar: Value =
        serde_json::from_slice(&std::fs::read(file["pages_manifest"].as_str().unwrap()).unwrap())
            .unwrap();
    assert_eq!(sidecar["kind"], "shelf_page_manifest");
    assert_eq!(sidecar["run_id"], file["run_id"], "{sidecar:#}");
    assert_eq!(sidecar["sources"]["ocr"], 1, "{sidecar:#}");
    assert_eq!(sidecar["status"], "complete");
    assert!(
        sidecar["average_confidence"].as_f64().unwrap() > 50.0,
        "{sidecar:#}"
    );
    // The sidecar holds the run's page records, as the document's page listing shows them.
    let doc = file["document_id"].as_str().unwrap();
    let listing = get_json(&client(), &api, &format!("/documents/{doc}/pages")).await;
    for field in [
        "rotation_degrees",
        "confidence",
        "attempts",
        "source",
        "chars",
    ] {
        assert_eq!(
            sidecar["page_list"][0][field], listing["pages"][0][field],
            "{field}: {listing:#}"
        );
    }
    assert!(sidecar["attempts"].as_u64().unwrap() >= 1);

    let all = get_json(
        &client(),
        &api,
        "/imports/page-manifest?manifest_path=scans.json",
    )
    .await;
    assert_eq!(all["totals"]["files"], 1, "{all:#}");
    assert_eq!(all["files"][0]["page_list"], sidecar["page_list"]);
    let failures = get_json(
        &client(),
        &api,
        "/imports/page-manifest?manifest_path=scans.json&failures_only=true",
    )
    .await;
    assert_eq!(failures["totals"], all["totals"], "{failures:#}");
    let listed: Vec<&Value> = failures["files"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|f| f["page_list"].as_array().unwrap())
        .collect();
    let expected: Vec<&Value> = sidecar["page_list"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| {
            p["source"] == "failed"
                || !p["error"].is_null()
                || !p["warnings"].as_array().unwrap().is_empty()
        })
        .collect();
    assert_eq!(listed, expected, "{failures:#}");
    let reply = client()
        .get(api.url("/imports/page-manifest?manifest_path=scans.json&failures_only=maybe"))
        .send()
        .await
        .unwrap();
    assert_eq!(reply.status(), StatusCode::UNPROCESSABLE_ENTITY);
}

fn read_manifest(path: &Path) -> Option<Value> {
    serde_json::from_slice(&std::fs::read(path).ok()?).ok()
}

#[test]
fn a_sigkilled_import_resumes_without_converting_twice() {
    // A run the killed import held is taken over once its lease lapses.
    let env = migrated(
        Env::new()
            .with("SHELF_WORKER_LEASE_SECONDS", "2")
            .with("SHELF_WORKER_HEARTBEAT_MS", "500"),
    );
    for i in 0..40 {
        env.write(
            &format!("many/doc-{i:02}.txt"),
            format!("Document number {i} about horses and farriers.\n"),
        );
    }
    let dir = env.path().join("many");
    let manifest = env.path().join("import.json");
    let args = ["import", &s(&dir), "--manifest", &s(&manifest), "--json"];
    let mut first = env.spawn(&args);
    wait_for(Duration::from_secs(120), "a few files imported", || {
        read_manifest(&manifest).filter(|m| m["summary"]["done"].as_u64() >= Some(3))
    });
    first.kill();
    // Whatever instant the kill came at, the manifest is a whole report.
    let killed = read_manifest(&manifest).expect("the last good report");
    let done: BTreeSet<String> = killed["files"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["status"] == "converted")
        .map(|f| f["path"].as_str().unwrap().to_string())
        .collect();
    assert!(
        done.len() < 40,
        "the kill came mid-way: {} of 40 done",
        done.len()
    );
    let converted = env.path().join("data/converted");
    let mtimes = |paths: &BTreeSet<String>| -> Vec<std::time::SystemTime> {
        let report = read_manifest(&manifest).unwrap();
        report["files"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|f| paths.contains(f["path"].as_str().unwrap()))
            .map(|f| {
                std::fs::metadata(f["output"].as_str().unwrap())
                    .unwrap()
                    .modified()
                    .unwrap()
            })
            .collect()
    };
    let before = mtimes(&done);

    let mut resume = args.to_vec();
    resume.push("--resume");
    let report = env.json(&resume);
    let summary = &report["summary"];
    assert_eq!(summary["files"], 40, "{summary}");
    assert_eq!(summary["failed"], 0, "{report:#}");
    assert_eq!(
        summary["reused"].as_u64(),
        Some(done.len() as u64),
        "{summary}"
    );
    // The file the kill interrupted may have its output already: skipped, not redone.
    assert!(summary["skipped"].as_u64().unwrap() <= 1, "{summary}");
    assert_eq!(
        summary["converted"].as_u64().unwrap() + summary["skipped"].as_u64().unwrap(),
        40
    );
    assert_eq!(
        mtimes(&done),
        before,
        "reused outputs were not written again"
    );
    let outputs = tree(&converted);
    assert_eq!(outputs.len(), 40, "{outputs:?}");
    let paths: BTreeSet<&str> = report["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["path"].as_str().unwrap())
        .collect();
    assert_eq!(paths.len(), 40, "one record per file");
    // One run per document succeeded; none of the reused ones ran again.
    let runs = env.json(&["runs", "--json", "--limit", "500"]);
    let succeeded: Vec<&Value> = runs["runs"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["status"] == "succeeded")
        .collect();
    let documents: BTreeSet<&str> = succeeded
        .iter()
        .map(|r| r["document_id"].as_str().unwrap())
        .collect();
    assert_eq!(
        documents.len(),
        succeeded.len(),
        "a document processed twice"
    );
    // The run in flight at the kill was taken over, not left behind for a worker to do again.
    let unfinished: Vec<&Value> = runs["runs"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["status"] == "queued" || r["status"] == "running")
        .collect();
    assert!(unfinished.is_empty(), "{unfinished:#?}");
}

#[test]
fn a_resumed_import_takes_over_the_run_it_finds_instead_of_starting_another() {
    let env = migrated(Env::new());
    let file = env.write("one/horses.txt", "Farriers shoe horses.\n");
    // What an import killed between submitting a run and recording it leaves: a queued run.
    let (document, queued) = env.queue(&file);
    let manifest = env.path().join("resume.json");
    let import = |resume: bool| {
        let mut args = vec![
            "import".to_string(),
            s(&env.path().join("one")),
            "--overwrite".into(),
            "--manifest".into(),
            s(&manifest),
            "--json".into(),
        ];
        if resume {
            args.push("--resume".into());
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let report = env.json(&args);
        let record = report["files"][0].clone();
        assert_eq!(record["status"], "converted", "{report:#}");
        assert_eq!(record["document_id"], document.as_str());
        record["run_id"].as_str().unwrap().to_string()
    };
    let runs_of_document = || {
        let runs = env.json(&["runs", "--json", "--limit", "500"]);
        runs["runs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| (r["id"].as_str().unwrap().to_string(), r["status"].clone()))
            .collect::<Vec<_>>()
    };
    // Resume runs the queued run here rather than creating a second one.
    assert_eq!(import(true), queued);
    assert_eq!(
        runs_of_document(),
        vec![(queued.clone(), json!("succeeded"))]
    );
    // And takes a succeeded run as it is (a kill after the run ended, before the manifest).
    std::fs::remove_file(&manifest).unwrap();
    assert_eq!(import(true), queued);
    assert_eq!(runs_of_document().len(), 1);
    // Outside resume, importing the same file again processes it again.
    let again = import(false);
    assert_ne!(again, queued);
    assert_eq!(runs_of_document().len(), 2);
}

#[test]
fn a_hot_folder_imports_new_files_once_across_restarts() {
    let env = migrated(Env::new());
    let inbox = env.path().join("inbox");
    std::fs::create_dir_all(&inbox).unwrap();
    let manifest = env.path().join("hot.json");
    let args = [
        "import",
        &s(&inbox),
        "--watch",
        "--poll-ms",
        "100",
        "--mode",
        "none",
        "--manifest",
        &s(&manifest),
        "--json",
    ];
    let converted = |n: u64| {
        let manifest = manifest.clone();
        move || read_manifest(&manifest).filter(|m| m["summary"]["converted"].as_u64() >= Some(n))
    };

    let mut watcher = env.spawn(&args);
    env.write("inbox/first.txt", "The first file of the hot folder.\n");
    wait_for(Duration::from_secs(60), "the first file", converted(1));
    env.write("inbox/second.md", "# Second\n\nArrived while watching.\n");
    let report = wait_for(Duration::from_secs(60), "the second file", converted(2));
    assert_eq!(report["status"], "watching");
    assert!(
        watcher.terminate(Duration::from_secs(30)).is_some(),
        "the watcher stops on SIGTERM"
    );
    assert_eq!(read_manifest(&manifest).unwrap()["status"], "interrupted");

    let mut watcher = env.spawn(&args);
    env.write("inbox/third.txt", "After the restart.\n");
    let report = wait_for(Duration::from_secs(60), "the third file", converted(3));
    watcher.kill();
    let files = report["files"].as_array().unwrap();
    assert_eq!(files.len(), 3, "{report:#}");
    let reused: Vec<bool> = files.iter().map(|f| f["reused"] == true).collect();
    assert_eq!(reused, [true, true, false], "{report:#}");
    assert_eq!(tree(&env.path().join("data/converted")).len(), 3);
    // Only one of each was ingested: a restart took the manifest's records over.
    let ids: BTreeSet<&str> = files
        .iter()
        .map(|f| f["document_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids.len(), 3);
}
