//! `/imports*` through the router: a successful import with its manifest, status and page
//! manifest, and every error code these routes answer with.

use serde_json::json;

use crate::common::*;

async fn app_with_root(extra: &[(&str, &str)]) -> (tempfile::TempDir, TestApp) {
    let root = tempfile::tempdir().expect("root");
    std::fs::create_dir_all(root.path().join("docs")).expect("mkdir");
    std::fs::write(
        root.path().join("docs/a.txt"),
        "Alpha text about farriers.\n",
    )
    .expect("write");
    std::fs::write(root.path().join("docs/b.md"), "# Beta\n\nSecond file.\n").expect("write");
    let mut vars = vec![(
        "SHELF_API_IMPORT_ROOT".to_string(),
        root.path().display().to_string(),
    )];
    vars.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    let app = TestApp::with(vars).await;
    (root, app)
}

#[tokio::test]
async fn an_import_answers_its_report_and_status_pages_it() {
    let (root, app) = app_with_root(&[]).await;
    let reply = app
        .post_json(
            "/imports",
            json!({"source_dir": "docs", "processing_mode": "none", "manifest_path": "m.json"}),
        )
        .await;
    assert_eq!(reply.status.as_u16(), 200, "{}", reply.text());
    let report = reply.json();
    assert_eq!(report["kind"], "shelf_import_report");
    assert_eq!(report["summary"]["converted"], 2, "{report:#}");
    assert_eq!(app.count("documents").await, 2);
    assert!(root.path().join("m.json").is_file());

    let page = app
        .get("/imports/status?manifest_path=m.json&limit=1&offset=1")
        .await
        .json();
    assert_eq!(page["total"], 2);
    assert_eq!(page["files"][0]["path"], report["files"][1]["path"]);
    let pages = app
        .get("/imports/page-manifest?manifest_path=m.json")
        .await
        .json();
    assert_eq!(pages["totals"]["files"], 0, "no PDF or image: {pages:#}");

    app.get("/imports/status?manifest_path=m.json&limit=1001")
        .await
        .assert_error(422, "validation_error");
    app.get("/imports/status")
        .await
        .assert_error(422, "validation_error");
    app.get("/imports/status?manifest_path=missing.json")
        .await
        .assert_error(400, "invalid_manifest_path");
    app.get("/imports/page-manifest?manifest_path=m.json&failures_only=perhaps")
        .await
        .assert_error(422, "validation_error");
}

#[tokio::test]
async fn every_refusal_has_its_code() {
    let (root, app) = app_with_root(&[
        ("SHELF_API_MAX_IMPORT_FILES", "1"),
        ("SHELF_API_MAX_IMPORT_MANIFEST_BYTES", "64"),
    ])
    .await;
    std::fs::write(root.path().join("other.json"), b"[1, 2, 3]").expect("write");
    std::fs::write(
        root.path().join("big.json"),
        format!(
            r#"{{"kind": "shelf_import_report", "pad": "{}"}}"#,
            "x".repeat(100)
        ),
    )
    .expect("write");
    let cases = [
        (json!({"source_dir": "../x"}), 400, "invalid_import_path"),
        (
            json!({"source_dir": "/etc/passwd"}),
            400,
            "invalid_import_path",
        ),
        (
            json!({"source_dir": "docs/a.txt", "manifest_path": "other.json"}),
            400,
            "invalid_manifest_path",
        ),
        (
            json!({"source_dir": "docs/a.txt", "manifest_path": "big.json"}),
            413,
            "import_manifest_too_large",
        ),
        (
            json!({"source_dir": "docs/a.txt", "output_mode": "new-directory", "output_dir": "docs/a.txt"}),
            400,
            "invalid_output_dir",
        ),
        (json!({"source_dir": "docs"}), 413, "import_too_large"),
        (
            json!({"source_dir": "docs", "format": "html"}),
            422,
            "validation_error",
        ),
        (
            json!({"source_dir": "docs", "output_mode": "original", "output_dir": "o"}),
            422,
            "validation_error",
        ),
        (
            json!({"source_dir": "docs", "resume": true}),
            422,
            "validation_error",
        ),
        (
            json!({"source_dir": "docs", "unknown": 1}),
            422,
            "validation_error",
        ),
    ];
    for (body, status, code) in cases {
        app.post_json("/imports", body.clone())
            .await
            .assert_error(status, code);
    }
    assert_eq!(app.count("documents").await, 0, "nothing was ingested");
    assert_eq!(
        std::fs::read(root.path().join("other.json")).expect("read"),
        b"[1, 2, 3]"
    );
    app.get("/imports/status?manifest_path=big.json")
        .await
        .assert_error(413, "import_manifest_too_large");
}

#[tokio::test]
async fn without_a_root_imports_are_off() {
    let app = TestApp::new().await;
    let reply = app
        .post_json("/imports", json!({"source_dir": "/tmp"}))
        .await;
    let body = reply.assert_error(400, "invalid_import_path");
    assert!(
        body["detail"]
            .as_str()
            .unwrap_or_default()
            .contains("SHELF_API_IMPORT_ROOT")
    );
    app.get("/imports/status?manifest_path=m.json")
        .await
        .assert_error(400, "invalid_import_path");
    app.get("/imports/page-manifest?manifest_path=m.json")
        .await
        .assert_error(400, "invalid_import_path");
}
