//! `shelf export` and `GET /documents/{id}/export` with the real binary: a real WebVTT
//! transcript imported and processed (mock provider), exported in each format from the CLI
//! (stdout and `--output`), with a transcript citation, then over HTTP from a real `shelf api`.

use serde_json::Value;

use crate::api::{Api, client, migrated};
use crate::support::{Env, corpus};

const QUOTE: &str = "las mujeres éramos algo así como adornos";

fn run_ok(env: &Env, args: &[&str]) -> Vec<u8> {
    let out = env.run(args);
    assert!(
        out.status.success(),
        "shelf {args:?} failed ({:?}): {}",
        out.status.code(),
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transcript_exported_from_the_cli_and_the_api() {
    let env = migrated(Env::new());
    let source = corpus("transcripts/webvtt-py/netflix_chicas_del_cable.vtt");
    let report = env.json(&["import", source.to_str().expect("path"), "--json"]);
    let record = &report["files"][0];
    assert_eq!(record["run_status"], "succeeded", "{report}");
    let doc = record["document_id"]
        .as_str()
        .expect("document id")
        .to_string();

    // JSON on stdout, with the citation.
    let json: Value = serde_json::from_slice(&run_ok(
        &env,
        &[
            "export",
            &doc,
            "--format",
            "json",
            "--citation-quote",
            QUOTE,
        ],
    ))
    .expect("JSON export");
    assert_eq!(json["document_id"], doc.as_str());
    let text = json["text"].as_str().expect("text").to_string();
    assert!(!text.is_empty());
    let citation = &json["transcript_citation"];
    assert_eq!(citation["strategy"], "exact", "{json}");
    assert_eq!(citation["start_seconds"], 9.64);

    // Plain text: the cleaned text verbatim.
    let txt = run_ok(&env, &["export", &doc, "--format", "txt"]);
    assert_eq!(String::from_utf8_lossy(&txt), text);

    // Markdown to a file, atomically; the citation block has hh:mm:ss times.
    let out_path = env.path().join("out").join("chicas.md");
    std::fs::create_dir_all(out_path.parent().expect("parent")).expect("mkdir");
    let printed = run_ok(
        &env,
        &[
            "export",
            &doc,
            "--format",
            "md",
            "--citation-quote",
            QUOTE,
            "--output",
            out_path.to_str().expect("path"),
        ],
    );
    assert!(printed.is_empty(), "nothing on stdout with --output");
    let md = std::fs::read_to_string(&out_path).expect("written");
    assert!(md.contains("**Classification:**"), "{md}");
    assert!(md.contains("## Citation"), "{md}");
    assert!(md.contains("00:00:09 – 00:00:13"), "{md}");
    assert!(md.trim_end().ends_with(text.trim_end()));
    let leftovers = std::fs::read_dir(out_path.parent().expect("parent"))
        .expect("dir")
        .count();
    assert_eq!(leftovers, 1, "no temporary file is left behind");

    // An unknown document: the not-found exit code; a bad format: clap's usage error.
    let missing = env.run(&["export", "doc_0000000000000000", "--format", "txt"]);
    assert_eq!(missing.status.code(), Some(3));
    let bad = env.run(&["export", &doc, "--format", "pdf"]);
    assert_eq!(bad.status.code(), Some(2));
    let help = run_ok(&env, &["export", "--help"]);
    let help = String::from_utf8_lossy(&help);
    assert!(
        help.contains("--citation-quote") && help.contains("--output"),
        "{help}"
    );

    // The same exports over HTTP from a real `shelf api`.
    let api = Api::start(&env);
    let http = client();
    for (format, content_type) in [
        ("json", "application/json"),
        ("txt", "text/plain; charset=utf-8"),
        ("md", "text/markdown; charset=utf-8"),
    ] {
        let reply = http
            .get(api.url(&format!("/documents/{doc}/export?format={format}")))
            .send()
            .await
            .expect("export");
        assert_eq!(reply.status(), 200, "{format}");
        let header = |name: &str| {
            reply
                .headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default()
                .to_string()
        };
        assert_eq!(header("content-type"), content_type);
        assert_eq!(header("x-content-type-options"), "nosniff");
        assert_eq!(header("cache-control"), "no-store");
        let stem = header("x-shelf-export-stem");
        assert!(!stem.is_empty());
        assert!(
            header("content-disposition").starts_with("attachment; filename=\""),
            "{}",
            header("content-disposition")
        );
        assert!(
            header("content-disposition").ends_with(&format!("filename*=UTF-8''{stem}.{format}"))
        );
        let body = reply.text().await.expect("body");
        if format == "txt" {
            assert_eq!(body, text);
        }
    }
    let bad = http
        .get(api.url("/documents/doc_0000000000000000/export?format=pdf"))
        .send()
        .await
        .expect("export");
    assert_eq!(bad.status(), 400);
    let body: Value = bad.json().await.expect("error body");
    assert_eq!(body["code"], "bad_request");
}
