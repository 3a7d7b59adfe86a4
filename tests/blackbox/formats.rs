//! Every kind of document through the real `shelf api` and a real `shelf worker`: a PDF, a
//! DOCX, an HTML page and an SRT transcript uploaded, processed by the default pipeline and
//! found by a phrase of each; a damaged file fails its run with a stable code and stays.

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::api::{Api, client, get_json, migrated, post_json, run_to_the_end, upload};
use crate::support::{Env, corpus};

async fn search_total(client: &reqwest::Client, api: &Api, query: &str) -> (u64, Vec<Value>) {
    let body = json!({ "query": query, "phrase": true });
    let reply = post_json(client, &api.url("/search/results"), &body).await;
    let results = reply["results"].as_array().cloned().unwrap_or_default();
    (reply["total"].as_u64().unwrap_or(0), results)
}

/// Uploads `bytes` as `name` and waits for its run to succeed: the document's id and the
/// document as the upload answered it.
async fn processed(
    client: &reqwest::Client,
    api: &Api,
    name: &str,
    bytes: Vec<u8>,
) -> (String, Value) {
    let (status, document) = upload(client, api, name, bytes).await;
    assert_eq!(status, StatusCode::CREATED, "{name}: {document}");
    let document_id = document["id"].as_str().expect("id").to_string();
    let run = run_to_the_end(client, api, &document_id).await;
    assert_eq!(run["status"], "succeeded", "{name}: {run:#}");
    (document_id, document)
}

/// A phrase search for `phrase` finds the document `document_id` (the file `name`).
async fn assert_found(
    client: &reqwest::Client,
    api: &Api,
    name: &str,
    document_id: &str,
    phrase: &str,
) {
    let (_, results) = search_total(client, api, phrase).await;
    assert!(
        results.iter().any(|r| r["document_id"] == document_id),
        "{name}: no hit for {phrase:?}: {results:#?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn documents_of_every_kind_are_processed_and_found() {
    let env = migrated(Env::new());
    let api = Api::start(&env);
    let _worker = env.spawn(&["worker"]);
    let client = client();
    let cases = [
        (
            "pdf/pypdf/crazyones.pdf",
            "crazyones.pdf",
            "the round pegs in the square holes",
        ),
        (
            "office/docx/sources/lorem_ipsum.docx",
            "lorem_ipsum.docx",
            "porttitor mollis quam",
        ),
        (
            "office/html/sources/example_01.html",
            "example_01.html",
            "first paragraph of the introduction",
        ),
        ("transcripts/srt/ascii.srt", "ascii.srt", "ascii everywhere"),
    ];
    for (path, name, phrase) in cases {
        let bytes = std::fs::read(corpus(path)).expect("corpus file");
        let (document_id, _) = processed(&client, &api, name, bytes).await;
        assert_found(&client, &api, name, &document_id, phrase).await;
    }

    // A damaged file is accepted, its run fails with a stable code, and the document stays.
    let bytes = std::fs::read(corpus("hostile/malformed/testWORD_truncated.docx")).expect("corpus");
    let (status, document) = upload(&client, &api, "truncated.docx", bytes).await;
    assert_eq!(status, StatusCode::CREATED, "{document}");
    let document_id = document["id"].as_str().expect("id").to_string();
    let run = run_to_the_end(&client, &api, &document_id).await;
    assert_eq!(run["status"], "failed", "{run:#}");
    let error = run["error"].as_str().unwrap_or("");
    assert!(
        error.starts_with("stage extract failed (malformed_document): "),
        "{run:#}"
    );
    let document = get_json(&client, &api, &format!("/documents/{document_id}")).await;
    assert_eq!(document["status"], "failed", "{document:#}");
}

/// A file is read as what its content is when its extension is wrong or unknown (issue 25):
/// a DOCX named `.doc`, a PPTX named `.ppt`, HTML, JSON and text under names Shelf does not
/// know; the format found is the document's `extension`. A password-protected workbook is
/// accepted and its run fails with `document_encrypted`; binary content under an unknown
/// name is still refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn files_are_read_as_what_their_content_is() {
    let env = migrated(Env::new());
    let api = Api::start(&env);
    let _worker = env.spawn(&["worker"]);
    let client = client();
    let read = |path: &str| std::fs::read(corpus(path)).expect("corpus file");
    let cases: Vec<(&str, Vec<u8>, &str, &str)> = vec![
        (
            "report.doc",
            read("office/docx/sources/lorem_ipsum.docx"),
            "docx",
            "porttitor mollis quam",
        ),
        (
            "slides.ppt",
            read("office/pptx/sources/powerpoint_sample.pptx"),
            "pptx",
            "",
        ),
        (
            "page",
            read("office/html/sources/example_01.html"),
            "html",
            "first paragraph of the introduction",
        ),
        (
            "export.dat",
            br#"{"title": "Harbour inventory", "note": "seventeen lanterns counted"}"#.to_vec(),
            "json",
            "seventeen lanterns counted",
        ),
        (
            "minutes.log",
            b"The committee agreed to repaint the lighthouse in spring.\n".to_vec(),
            "txt",
            "repaint the lighthouse",
        ),
    ];
    for (name, bytes, extension, phrase) in cases {
        let (document_id, document) = processed(&client, &api, name, bytes).await;
        assert_eq!(document["extension"], extension, "{name}: {document:#}");
        assert_eq!(document["filename"], name, "{document:#}");
        if !phrase.is_empty() {
            assert_found(&client, &api, name, &document_id, phrase).await;
        }
    }

    let (status, document) = upload(
        &client,
        &api,
        "budget.xlsx",
        read("office/made/password-secret.xlsx"),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{document}");
    assert_eq!(document["extension"], "xlsx");
    let document_id = document["id"].as_str().expect("id").to_string();
    let run = run_to_the_end(&client, &api, &document_id).await;
    assert_eq!(run["status"], "failed", "{run:#}");
    assert_eq!(run["error_code"], "document_encrypted", "{run:#}");

    let (status, body) = upload(
        &client,
        &api,
        "setup.bin",
        b"MZ\x90\x00\x03\x00\x00\x00\x04\x00\x00\x00\xff\xff\x00\x00".to_vec(),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(body["code"], "unsupported_file_type", "{body}");
    assert!(
        body["detail"]
            .as_str()
            .unwrap_or_default()
            .contains(".bin files are not supported"),
        "{body}"
    );
}

/// An Outlook message as Outlook stores one: a compound file of MAPI property streams
/// (subject, sender, body as UTF-16LE strings).
fn outlook_message(subject: &str, sender: &str, body: &str) -> Vec<u8> {
    use std::io::Write;
    let mut compound =
        cfb::CompoundFile::create(std::io::Cursor::new(Vec::new())).expect("compound file");
    for (tag, value) in [("0037", subject), ("0C1A", sender), ("1000", body)] {
        let bytes: Vec<u8> = value.encode_utf16().flat_map(u16::to_le_bytes).collect();
        let mut stream = compound
            .create_stream(format!("/__substg1.0_{tag}001F"))
            .expect("stream");
        stream.write_all(&bytes).expect("write");
    }
    compound.flush().expect("flush");
    compound.into_inner().into_inner()
}

/// Every format issue 25 added is uploaded, processed by the default pipeline and found by a
/// phrase of its text; what a format hides (comments, settings) is not indexed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mail_notebooks_markup_and_data_files_are_processed_and_found() {
    let env = migrated(Env::new());
    let api = Api::start(&env);
    let _worker = env.spawn(&["worker"]);
    let client = client();
    let notebook = json!({
        "nbformat": 4, "nbformat_minor": 5,
        "metadata": {"kernelspec": {"language": "python", "name": "python3"}},
        "cells": [
            {"cell_type": "markdown", "metadata": {}, "source": ["# Catch statistics\n", "The herring catch doubled in March."]},
            {"cell_type": "code", "metadata": {}, "execution_count": 1, "source": "print(2 * 21)",
             "outputs": [{"output_type": "stream", "name": "stdout", "text": ["42\n"]}]}
        ]
    })
    .to_string();
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        (
            "survey.eml",
            b"From: Ann Lee <ann@example.org>\r\nTo: harbour@example.org\r\n\
              Subject: =?UTF-8?Q?Lantern_survey_=E2=80=93_east?=\r\nDate: Tue, 2 Jan 2024 09:30:00 +0000\r\n\
              MIME-Version: 1.0\r\nContent-Type: text/plain; charset=utf-8\r\n\
              Content-Transfer-Encoding: quoted-printable\r\n\r\n\
              The eastern pier needs new lanterns before the w=\r\ninter storms.\r\n"
                .to_vec(),
            "eastern pier needs new lanterns",
        ),
        (
            "reply.msg",
            outlook_message(
                "Re: lanterns",
                "Bob Stone",
                "Order twelve brass lanterns from the chandler.",
            ),
            "twelve brass lanterns",
        ),
        ("catch.ipynb", notebook.into_bytes(), "herring catch doubled"),
        (
            "notes.rst",
            b"Lighthouse Notes\n================\n\nThe keeper logged *seventeen* storms.\n\n\
              .. a comment nobody reads\n"
                .to_vec(),
            "keeper logged seventeen storms",
        ),
        (
            "tides.org",
            b"#+TITLE: Tide tables\n* Spring tides\nThe spring tide reached the boathouse steps.\n"
                .to_vec(),
            "spring tide reached the boathouse",
        ),
        (
            "buoys.tex",
            b"\\documentclass{article}\n\\title{Buoy maintenance}\n\\begin{document}\n\
              \\section{Buoys}\nEach buoy is \\emph{repainted} every third summer. % hidden remark\n\
              \\end{document}\n"
                .to_vec(),
            "buoy is repainted every third summer",
        ),
        (
            "ferry.typ",
            b"= Ferry timetable\n#set page(width: 10cm)\nThe first ferry leaves from the north quay.\n"
                .to_vec(),
            "first ferry leaves from the north quay",
        ),
        (
            "splice.adoc",
            b"= Rope splicing\n\nA long splice keeps the rope diameter unchanged.\n".to_vec(),
            "long splice keeps the rope diameter",
        ),
        (
            "cranes.bib",
            b"@article{smith2020,\n  title = {Salt corrosion in harbour cranes},\n  \
              author = {Smith, Jane and Doe, John},\n  year = {2020},\n  journal = {Port Engineering}\n}\n"
                .to_vec(),
            "salt corrosion in harbour cranes",
        ),
        (
            "lamp.fb2",
            br#"<?xml version="1.0" encoding="utf-8"?>
<FictionBook xmlns="http://www.gribuser.ru/xml/fictionbook/2.0"><description><title-info>
<book-title>The Lamp</book-title><author><first-name>Ann</first-name><last-name>Lee</last-name></author>
</title-info></description><body><section><title><p>Chapter One</p></title>
<p>The lamp burned through the longest night.</p></section></body></FictionBook>"#
                .to_vec(),
            "lamp burned through the longest night",
        ),
        (
            "crane.dbk",
            br#"<article xmlns="http://docbook.org/ns/docbook" version="5.0"><info><title>Crane manual</title></info>
<section><title>Safety</title><para>Never lift loads above the painted line.</para></section></article>"#
                .to_vec(),
            "never lift loads above the painted line",
        ),
        (
            "gulls.nxml",
            br#"<article article-type="research-article"><front><article-meta><title-group>
<article-title>Gull migration</article-title></title-group></article-meta></front>
<body><sec><title>Results</title><p>Gulls returned to the estuary within nine days.</p></sec></body></article>"#
                .to_vec(),
            "gulls returned to the estuary",
        ),
        (
            "feeds.opml",
            br#"<opml version="2.0"><head><title>Harbour feeds</title></head>
<body><outline text="Weather warnings for fishermen" xmlUrl="https://example.org/w.xml"/></body></opml>"#
                .to_vec(),
            "weather warnings for fishermen",
        ),
        (
            "pier.svg",
            br#"<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"><title>Pier map</title>
<text x="1" y="5">Slipway closed for repairs</text></svg>"#
                .to_vec(),
            "slipway closed for repairs",
        ),
        (
            "harbour.yaml",
            b"harbour:\n  master: Ruth Okafor\n  note: dredging starts after the spring tides\n"
                .to_vec(),
            "dredging starts after the spring tides",
        ),
        (
            "fees.toml",
            b"[harbour]\nnote = \"anchorage fees rise next season\"\n".to_vec(),
            "anchorage fees rise next season",
        ),
    ];
    for (name, bytes, phrase) in cases {
        let (document_id, _) = processed(&client, &api, name, bytes).await;
        assert_found(&client, &api, name, &document_id, phrase).await;
    }
    for hidden in ["a comment nobody reads", "hidden remark"] {
        let (total, _) = search_total(&client, &api, hidden).await;
        assert_eq!(total, 0, "{hidden:?} is a comment, not text");
    }
}
