//! `/documents/{id}/okf` and `/export/okf`: the concept of one document, 404s for missing and
//! unprocessed documents, and bundles filtered by prefix, tag and limit, with `skipped`.

use serde_json::{Value, json};

use crate::common::*;

/// Uploads and processes a text document, then files it under `code` with `title` and `tags`
/// (the mock classifier's codes are hashes; tests choose their own).
async fn processed(
    app: &TestApp,
    name: &str,
    text: &str,
    code: &str,
    title: &str,
    tags: &[&str],
) -> String {
    let id = app.upload_ok(name, text.as_bytes()).await;
    let run = app
        .post_json(
            "/runs",
            json!({"document_id": id, "processing_mode": "process"}),
        )
        .await
        .json();
    let run = app.wait_terminal(run["id"].as_str().expect("run id")).await;
    assert_eq!(run["status"], "succeeded", "{run}");
    let tags = serde_json::to_string(&tags)
        .expect("tags")
        .replace('\'', "''");
    app.sql(&format!(
        "UPDATE documents SET classification = '{code}', classification_label = NULL, \
         title = '{}', tags = '{tags}' WHERE id = '{id}'",
        title.replace('\'', "''")
    ))
    .await;
    id
}

/// The front matter of a Markdown file, as YAML text.
fn front_matter(text: &str) -> &str {
    text.strip_prefix("---\n")
        .and_then(|rest| rest.split_once("\n---\n"))
        .map(|(fm, _)| fm)
        .unwrap_or_default()
}

fn concept_paths(bundle: &Value) -> Vec<String> {
    bundle["files"]
        .as_object()
        .map(|files| {
            files
                .keys()
                .filter(|p| !p.ends_with("index.md"))
                .cloned()
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_documents_concept_and_its_404s() {
    let app = TestApp::new().await;
    let horses = processed(
        &app,
        "horses.txt",
        "Horses are large domesticated equines.\nThey graze.\n",
        "636.1",
        "Horses: a \"guide\" # 1",
        &["horses"],
    )
    .await;
    let ponies = processed(
        &app,
        "ponies.txt",
        "Ponies are small horses.\n",
        "636.1",
        "Ponies",
        &["ponies"],
    )
    .await;

    let reply = app.get(&format!("/documents/{horses}/okf")).await;
    assert_eq!(reply.status, 200, "{}", reply.text());
    let concept = reply.json();
    assert_eq!(
        concept["path"],
        "600-technology/630-agriculture/636-animal-husbandry/636-1-animal-husbandry/horses-a-guide-1.md"
    );
    let content = concept["content"].as_str().expect("content");
    assert!(content.starts_with("---\ntype: concept\n"), "{content}");
    assert!(
        content.contains("title: \"Horses: a \\\"guide\\\" # 1\"\n"),
        "{content}"
    );
    assert!(content.contains(&format!("resource: \"urn:shelf:doc:{horses}\"\n")));
    assert!(content.contains("dewey_code: \"636.1\"\n"));
    assert!(content.contains("dewey_label: \"Animal husbandry\"\n"));
    assert!(
        content.contains("Horses are large domesticated equines."),
        "{content}"
    );
    assert!(
        content.contains("## Related\n\n- [Ponies](ponies.md)\n"),
        "{content}"
    );
    assert_eq!(front_matter(content).lines().count(), 10, "{content}");
    let other = app.get(&format!("/documents/{ponies}/okf")).await.json();
    assert!(
        other["content"]
            .as_str()
            .unwrap_or_default()
            .contains("(horses-a-guide-1.md)"),
        "{other}"
    );

    app.get("/documents/doc_0000000000000000/okf")
        .await
        .assert_error(404, "not_found");
    let unprocessed = app.upload_ok("later.txt", b"Not processed yet.\n").await;
    app.get(&format!("/documents/{unprocessed}/okf"))
        .await
        .assert_error(404, "not_found");
    app.sql(&format!(
        "UPDATE documents SET classification = NULL WHERE id = '{ponies}'"
    ))
    .await;
    app.get(&format!("/documents/{ponies}/okf"))
        .await
        .assert_error(404, "not_found");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bundles_filter_limit_and_skip() {
    let app = TestApp::new().await;
    let horses = processed(
        &app,
        "horses.txt",
        "Horses graze.\n",
        "636.1",
        "Horses",
        &["horses", "Farm"],
    )
    .await;
    let ponies = processed(
        &app,
        "ponies.txt",
        "Ponies are small.\n",
        "636.1",
        "Ponies",
        &["ponies", "farm"],
    )
    .await;
    let algebra = processed(
        &app,
        "algebra.txt",
        "Algebra uses symbols.\n",
        "512",
        "Algebra",
        &["math"],
    )
    .await;
    let waiting = app.upload_ok("waiting.txt", b"Waiting for a run.\n").await;

    let all = app.get("/export/okf").await;
    assert_eq!(all.status, 200, "{}", all.text());
    let all = all.json();
    assert_eq!(all["okf_version"], "0.1");
    assert_eq!(all["concepts"], 3);
    assert_eq!(all["truncated"], false);
    assert_eq!(all["skipped"], json!([waiting]));
    assert_eq!(all["skipped_documents"][0]["reason"], "no_cleaned_output");
    assert_eq!(all["skipped_documents"][0]["filename"], "waiting.txt");
    let files = all["files"].as_object().expect("files");
    let root = files["index.md"].as_str().expect("root index");
    assert!(
        front_matter(root).contains("okf_version: \"0.1\""),
        "{root}"
    );
    assert!(files.contains_key("500-science/510-mathematics/512-algebra/index.md"));
    let dir = "600-technology/630-agriculture/636-animal-husbandry/636-1-animal-husbandry";
    let leaf = files[&format!("{dir}/index.md")]
        .as_str()
        .expect("leaf index");
    assert!(
        leaf.contains("- [Horses](horses.md)\n- [Ponies](ponies.md)\n"),
        "{leaf}"
    );
    let single = app.get(&format!("/documents/{algebra}/okf")).await.json();
    assert_eq!(
        files[single["path"].as_str().expect("path")],
        single["content"]
    );

    let prefixed = app
        .get("/export/okf?classification_prefix=636")
        .await
        .json();
    assert_eq!(
        concept_paths(&prefixed),
        vec![format!("{dir}/horses.md"), format!("{dir}/ponies.md")]
    );
    // Unclassified documents are under no prefix.
    assert_eq!(prefixed["skipped"], json!([]));

    let tagged = app.get("/export/okf?tag=PONIES").await.json();
    assert_eq!(concept_paths(&tagged), vec![format!("{dir}/ponies.md")]);
    let ponies_md = tagged["files"][format!("{dir}/ponies.md")]
        .as_str()
        .unwrap_or_default();
    assert!(ponies_md.contains(&format!("urn:shelf:doc:{ponies}")));
    // Related links only point at concepts inside the bundle.
    assert!(!ponies_md.contains("horses.md"), "{ponies_md}");
    let farm = app.get("/export/okf?tag=farm").await.json();
    assert_eq!(farm["concepts"], 2);
    assert!(
        farm["files"][format!("{dir}/horses.md")]
            .as_str()
            .unwrap_or_default()
            .contains("- [Ponies](ponies.md)")
    );
    let _ = horses;

    let limited = app.get("/export/okf?limit=1").await.json();
    assert_eq!(limited["concepts"], 1);
    assert_eq!(limited["truncated"], true);
    assert_eq!(concept_paths(&limited).len(), 1);

    app.sql(&format!(
        "UPDATE documents SET classification = NULL WHERE id = '{algebra}'"
    ))
    .await;
    let after = app.get("/export/okf").await.json();
    assert_eq!(after["concepts"], 2);
    let reasons: Vec<&str> = after["skipped_documents"]
        .as_array()
        .map(|s| s.iter().filter_map(|d| d["reason"].as_str()).collect())
        .unwrap_or_default();
    assert!(reasons.contains(&"no_classification"), "{after}");
    assert!(reasons.contains(&"no_cleaned_output"), "{after}");
}

#[tokio::test]
async fn bundle_parameters_are_validated() {
    let app = TestApp::new().await;
    for query in [
        "limit=0",
        "limit=1001",
        "limit=abc",
        "limit=-1",
        "classification_prefix=abc",
        "classification_prefix=6%25",
    ] {
        let reply = app.get(&format!("/export/okf?{query}")).await;
        reply.assert_error(422, "validation_error");
    }
    let long_tag = "t".repeat(201);
    app.get(&format!("/export/okf?tag={long_tag}"))
        .await
        .assert_error(422, "validation_error");
    let empty = app
        .get("/export/okf?limit=1000&classification_prefix=&tag=")
        .await;
    assert_eq!(empty.status, 200, "{}", empty.text());
    let empty = empty.json();
    assert_eq!(empty["concepts"], 0);
    assert_eq!(empty["files"].as_object().map(|f| f.len()), Some(1));
}
