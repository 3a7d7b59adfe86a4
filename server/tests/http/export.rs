//! `GET /documents/{id}/export`: formats, headers (disposition, stem, security), stem rules,
//! the format checked before the lookup, and transcript citations on real SRT and WebVTT files
//! (also in search results).

use serde_json::{Value, json};

use crate::common::*;

const MEETING: &[u8] =
    include_bytes!("../../../tests/corpus/office/webvtt/sources/webvtt_example_01.vtt");
const NETFLIX: &[u8] =
    include_bytes!("../../../tests/corpus/transcripts/webvtt-py/netflix_chicas_del_cable.vtt");
const ASCII_SRT: &[u8] = include_bytes!("../../../tests/corpus/transcripts/srt/ascii.srt");

/// Uploads and processes a document; returns its id.
async fn processed(app: &TestApp, filename: &str, bytes: &[u8]) -> String {
    let doc = app.upload_ok(filename, bytes).await;
    let run = app
        .post_json(
            "/runs",
            json!({"document_id": doc, "processing_mode": "process"}),
        )
        .await
        .json();
    let run = app.wait_terminal(run["id"].as_str().expect("run id")).await;
    assert_eq!(run["status"], "succeeded", "{run}");
    doc
}

/// Sets the classifier's outputs directly, so the stem rules are tested on known values.
async fn set_title(app: &TestApp, doc: &str, code: Option<&str>, title_sql: Option<&str>) {
    let code = code.map_or("NULL".to_string(), |c| format!("'{c}'"));
    let title = title_sql.unwrap_or("NULL");
    app.sql(&format!(
        "UPDATE documents SET classification = {code}, title = {title}, \
         summary = 'A talk about the sky.', tags = '[\"astronomy\",\"interview\"]' \
         WHERE id = '{doc}'"
    ))
    .await;
}

fn assert_security_headers(reply: &Reply) {
    assert_eq!(reply.header("x-content-type-options"), Some("nosniff"));
    assert_eq!(reply.header("x-frame-options"), Some("DENY"));
    assert_eq!(reply.header("referrer-policy"), Some("no-referrer"));
    assert_eq!(reply.header("cache-control"), Some("no-store"));
    assert!(reply.header("permissions-policy").is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_format_with_its_headers() {
    let app = TestApp::new().await;
    let doc = processed(&app, "meeting.vtt", MEETING).await;
    set_title(&app, &doc, Some("520"), Some("'Café über Sterne'")).await;

    let json_reply = app
        .get(&format!("/documents/{doc}/export?format=json"))
        .await;
    assert_eq!(json_reply.status, 200, "{}", json_reply.text());
    assert_eq!(json_reply.header("content-type"), Some("application/json"));
    assert_security_headers(&json_reply);
    let body = json_reply.json();
    for field in [
        "document_id",
        "filename",
        "classification",
        "title",
        "summary",
        "tags",
        "suggested_stem",
        "text",
    ] {
        assert!(body.get(field).is_some(), "{field}: {body}");
    }
    assert_eq!(body["document_id"], doc.as_str());
    assert_eq!(body["classification"], "520");
    assert_eq!(body["title"], "Café über Sterne");
    assert_eq!(body["tags"], json!(["astronomy", "interview"]));
    assert!(body.get("transcript_citation").is_none(), "{body}");
    let text = body["text"].as_str().expect("text").to_string();
    assert!(text.contains("New York City"), "{text}");

    let stem = "520%20Caf%C3%A9%20%C3%BCber%20Sterne";
    assert_eq!(json_reply.header("x-shelf-export-stem"), Some(stem));
    assert_eq!(
        json_reply.header("content-disposition"),
        Some(
            format!(
                "attachment; filename=\"520 Caf_ _ber Sterne.json\"; filename*=UTF-8''{stem}.json"
            )
            .as_str()
        )
    );

    let txt = app
        .get(&format!("/documents/{doc}/export?format=txt"))
        .await;
    assert_eq!(txt.status, 200, "{}", txt.text());
    assert_eq!(
        txt.header("content-type"),
        Some("text/plain; charset=utf-8")
    );
    assert_security_headers(&txt);
    assert_eq!(txt.text(), text, "plain text is the cleaned text verbatim");
    assert!(
        txt.header("content-disposition")
            .is_some_and(|d| d.ends_with(&format!("filename*=UTF-8''{stem}.txt")))
    );

    let md = app.get(&format!("/documents/{doc}/export?format=md")).await;
    assert_eq!(md.status, 200, "{}", md.text());
    assert_eq!(
        md.header("content-type"),
        Some("text/markdown; charset=utf-8")
    );
    assert_security_headers(&md);
    let md = md.text();
    assert!(md.starts_with("> A talk about the sky.\n"), "{md}");
    assert!(md.contains("**Classification:** 520"), "{md}");
    assert!(md.contains("**Tags:** astronomy, interview"), "{md}");
    assert!(!md.contains("## Citation"), "{md}");
    assert!(md.trim_end().ends_with(text.trim_end()), "{md}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_titles_and_the_filename_fallback() {
    let app = TestApp::new().await;
    let doc = processed(&app, "meeting.vtt", MEETING).await;
    set_title(
        &app,
        &doc,
        Some("000"),
        Some("'../../etc/passwd\"' || char(13) || char(10)"),
    )
    .await;
    let reply = app
        .get(&format!("/documents/{doc}/export?format=txt"))
        .await;
    assert_eq!(reply.status, 200, "{}", reply.text());
    let disposition = reply.header("content-disposition").expect("disposition");
    assert_eq!(
        disposition,
        "attachment; filename=\"000 .. .. etc passwd.txt\"; \
         filename*=UTF-8''000%20..%20..%20etc%20passwd.txt"
    );
    assert_eq!(
        reply.header("x-shelf-export-stem"),
        Some("000%20..%20..%20etc%20passwd")
    );

    // No title: the source filename's stem, whatever the code.
    set_title(&app, &doc, Some("520"), None).await;
    let reply = app.get(&format!("/documents/{doc}/export?format=md")).await;
    assert_eq!(reply.header("x-shelf-export-stem"), Some("meeting"));
    assert_eq!(
        reply.header("content-disposition"),
        Some("attachment; filename=\"meeting.md\"; filename*=UTF-8''meeting.md")
    );
}

#[tokio::test]
async fn the_format_is_checked_before_the_lookup() {
    let app = TestApp::new().await;
    for query in ["?format=pdf", "", "?format=JSON", "?format="] {
        app.get(&format!("/documents/doc_0000000000000000/export{query}"))
            .await
            .assert_error(400, "bad_request");
    }
    app.get("/documents/doc_0000000000000000/export?format=json")
        .await
        .assert_error(404, "not_found");
    // Ingested, never processed: no succeeded run, so nothing to export.
    let doc = app.upload_ok("notes.txt", b"Some notes.\n").await;
    app.get(&format!("/documents/{doc}/export?format=txt"))
        .await
        .assert_error(404, "not_found");
    let long = "a".repeat(4097);
    app.get(&format!(
        "/documents/{doc}/export?format=json&citation_quote={long}"
    ))
    .await
    .assert_error(422, "validation_error");
}

fn citation_of(app_reply: &Reply) -> Value {
    assert_eq!(app_reply.status, 200, "{}", app_reply.text());
    app_reply.json()["transcript_citation"].clone()
}

/// Percent-encodes a query value (every byte but letters and digits).
fn q(text: &str) -> String {
    text.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() {
                char::from(b).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn citations_in_a_real_webvtt_file() {
    let app = TestApp::new().await;
    let doc = processed(&app, "chicas.vtt", NETFLIX).await;
    let segments = shelf_documents::segments(&app.shelf().db, &doc)
        .await
        .expect("segments");
    assert!(segments.len() > 100, "{}", segments.len());
    let export = |quote: &str| {
        format!(
            "/documents/{doc}/export?format=json&citation_quote={}",
            q(quote)
        )
    };

    // Exact: across the line break of one cue and into the next cue.
    let exact = citation_of(
        &app.get(&export(
            "las mujeres éramos algo así como adornos que se llevaban a las fiestas",
        ))
        .await,
    );
    assert_eq!(exact["strategy"], "exact", "{exact}");
    assert_eq!(exact["confidence"], 1.0);
    let (first, last) = (
        exact["segment_start"].as_u64().expect("start") as usize,
        exact["segment_end"].as_u64().expect("end") as usize,
    );
    assert_eq!(last, first + 1, "{exact}");
    assert!(segments[first].text.contains("las mujeres"));
    assert_eq!(exact["start_seconds"], segments[first].start_seconds);
    assert_eq!(exact["end_seconds"], segments[last].end_seconds);
    assert_eq!(exact["start_seconds"], 9.64);
    assert_eq!(exact["end_seconds"], 16.44);

    // Normalized: case, punctuation and spacing differ.
    let normalized = citation_of(
        &app.get(&export("LAS MUJERES ÉRAMOS... algo así,   como adornos"))
            .await,
    );
    assert_eq!(normalized["strategy"], "normalized", "{normalized}");
    assert!(normalized["confidence"].as_f64().expect("confidence") < 1.0);
    assert_eq!(normalized["segment_start"], exact["segment_start"]);

    // Fuzzy: a misspelt word and a dropped one.
    let fuzzy = citation_of(
        &app.get(&export(
            "las mujeres eramos algo como adornos que se llevaban a las fiestas para presumir",
        ))
        .await,
    );
    assert_eq!(fuzzy["strategy"], "fuzzy", "{fuzzy}");
    let confidence = fuzzy["confidence"].as_f64().expect("confidence");
    assert!((0.8..1.0).contains(&confidence), "{fuzzy}");
    assert_eq!(fuzzy["segment_start"], exact["segment_start"]);
    assert_eq!(fuzzy["segment_end"], exact["segment_end"]);

    // Absent: no citation, never a wrong one.
    for quote in [
        "the quick brown fox jumps over the lazy dog",
        "las mujeres de Marte conducen autobuses amarillos por la noche",
    ] {
        let reply = app.get(&export(quote)).await;
        assert_eq!(citation_of(&reply), Value::Null, "{quote}");
    }

    // Markdown: a Citation block with hh:mm:ss times.
    let md = app
        .get(&format!(
            "/documents/{doc}/export?format=md&citation_quote={}",
            q("las mujeres éramos algo así como adornos")
        ))
        .await
        .text();
    assert!(md.contains("## Citation"), "{md}");
    assert!(md.contains("00:00:09 – 00:00:13"), "{md}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn citations_in_a_real_srt_file_and_not_in_other_documents() {
    let app = TestApp::new().await;
    let doc = processed(&app, "ascii.srt", ASCII_SRT).await;
    let reply = app
        .get(&format!(
            "/documents/{doc}/export?format=json&citation_quote={}",
            q("oh look ascii everywhere")
        ))
        .await;
    let citation = citation_of(&reply);
    assert_eq!(citation["strategy"], "exact", "{citation}");
    assert_eq!(citation["text"], "oh look ascii everywhere");
    assert_eq!(citation["start_seconds"], 31.5);
    assert_eq!(citation["end_seconds"], 36.57);
    assert_eq!(
        citation["segment_end"].as_u64(),
        citation["segment_start"].as_u64().map(|s| s + 1)
    );

    // A plain-text document has no transcript: no citation even for words it contains.
    let notes = processed(&app, "notes.txt", b"oh look ascii everywhere\n").await;
    let reply = app
        .get(&format!(
            "/documents/{notes}/export?format=json&citation_quote={}",
            q("oh look ascii everywhere")
        ))
        .await;
    assert_eq!(citation_of(&reply), Value::Null);

    // Search results: the transcript hit carries the citation of the query, the text one not.
    let results = app
        .post_json("/search/results", json!({"query": "ascii everywhere"}))
        .await;
    assert_eq!(results.status, 200, "{}", results.text());
    let results = results.json();
    let hits = results["results"].as_array().expect("results");
    assert_eq!(hits.len(), 2, "{results}");
    for hit in hits {
        if hit["document_id"] == doc.as_str() {
            let c = &hit["transcript_citation"];
            assert_eq!(c["text"], "ascii everywhere", "{hit}");
            assert_eq!(c["strategy"], "exact");
            assert_eq!(c["start_seconds"], 34.1);
        } else {
            assert!(hit.get("transcript_citation").is_none(), "{hit}");
        }
    }
    // One word is cited in the cue that holds it.
    let results = app
        .post_json("/search/results", json!({"query": "look"}))
        .await
        .json();
    let hit = results["results"]
        .as_array()
        .and_then(|hits| hits.iter().find(|h| h["document_id"] == doc.as_str()))
        .expect("the transcript is a hit");
    assert_eq!(hit["transcript_citation"]["text"], "look", "{hit}");
    assert_eq!(hit["transcript_citation"]["start_seconds"], 31.5);
}
