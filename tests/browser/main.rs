//! The web pages in a real browser: headless Chromium over WebDriver (chromedriver) against a
//! real `shelf api` and `shelf worker`, in one journey with one server and one browser session
//! (issue 26): sign in, drag-and-drop upload of a PDF and a scan, a run followed live to its
//! end, the document, a phrase search and a facet, the Markdown export with the session cookie,
//! a hostile name rendered as text, sign out, and a read-only key that sees no write actions.
//! Every page is screenshotted into the artefacts directory and checked for content.

#[path = "../blackbox/support.rs"]
mod support;

mod browser;

use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::{Value, json};

use browser::{Browser, Chromedriver, DEADLINE, artifacts_dir, session};
use support::{Env, announced, corpus, drain};

const WRITE_KEY: &str = "browser-write-key";
const READ_KEY: &str = "browser-read-key";
/// A name and first line that would run script if a page put it in the HTML unescaped.
const HOSTILE: &str = "<img src=x onerror=alert(1)>";
/// A phrase of the PDF's text layer (tests/corpus/pdf/pypdf/crazyones.pdf).
const PHRASE: &str = "round pegs in the square holes";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_person_uses_shelf_from_a_real_browser() {
    let started = Instant::now();
    let env = Env::new().with(
        "SHELF_API_KEYS",
        &format!("write:{WRITE_KEY},read:{READ_KEY}"),
    );
    let mut api = env.spawn(&["api", "--port", "0"]);
    let (base, api_log) = announced(&mut api, "shelf api listening on ");
    let driver = Chromedriver::start();
    let client = session(&driver).await;
    let artifacts = artifacts_dir();
    let browser = Browser {
        client: client.clone(),
        base,
        artifacts: artifacts.clone(),
    };
    // The journey runs as a task so that a failed assertion still ends the browser session
    // (a chromedriver killed with a session open leaves its Chromium behind).
    let outcome = tokio::spawn(journey(browser, env)).await;
    let _ = client.close().await;
    drop(driver);
    if let Err(failure) = outcome {
        eprintln!(
            "shelf api log:\n{}",
            api_log.lock().map(|l| l.clone()).unwrap_or_default()
        );
        eprintln!("screenshots in {}", artifacts.display());
        std::panic::resume_unwind(failure.into_panic());
    }
    eprintln!(
        "browser journey took {:.1} s; screenshots in {}",
        started.elapsed().as_secs_f64(),
        artifacts.display()
    );
}

async fn journey(b: Browser, env: Env) {
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(60))
        .build()
        .expect("client");

    // 1. Auth is on: the root sends a person to the sign-in form. A wrong key is refused on
    // the page; the write key signs in and lands on the library.
    b.goto("/").await;
    b.until(
        "the sign-in form",
        "return location.pathname === '/ui/sign-in' && !!document.getElementById('sign-in');",
        vec![],
    )
    .await;
    b.page("01-sign-in", "Sign in", "").await;
    sign_in(&b, "not-a-key").await;
    let refused = b.text(".banner.error").await;
    assert!(
        refused.contains("That key is not valid"),
        "wrong key: {refused:?}"
    );
    assert_eq!(b.count("#sign-in").await, 1, "the form is shown again");
    sign_in(&b, WRITE_KEY).await;
    b.arrived("/ui/").await;
    b.element("#upload").await;
    b.page("02-library-empty", "Library", "").await;
    let cookie = session_cookie(&b).await;

    // 2. Drag and drop a PDF and a scan onto the drop zone. WebDriver cannot drag OS files, so
    // the test dispatches the events a real drop fires, carrying real File objects.
    let pdf = std::fs::read(corpus("pdf/pypdf/crazyones.pdf")).expect("corpus pdf");
    let scan = std::fs::read(corpus("ocr/tesseract/phototest.tif")).expect("corpus scan");
    let dropped = b
        .js(
            "const zone = document.getElementById('drop-zone');
             const data = new DataTransfer();
             for (const f of arguments[0]) {
               data.items.add(new File([new Uint8Array(f.bytes)], f.name, {type: f.type}));
             }
             for (const type of ['dragenter', 'dragover', 'drop']) {
               zone.dispatchEvent(new DragEvent(type,
                 {dataTransfer: data, bubbles: true, cancelable: true}));
             }
             return data.files.length;",
            vec![json!([
                {"name": "crazyones.pdf", "type": "application/pdf", "bytes": pdf},
                {"name": "phototest.tif", "type": "image/tiff", "bytes": scan},
            ])],
        )
        .await;
    assert_eq!(dropped, json!(2));
    let uploaded = b
        .until(
            "two ingested uploads and the summary",
            "const items = [...document.querySelectorAll('#upload-progress li.upload-item')];
             const failed = items.filter(li => li.classList.contains('failed'));
             if (failed.length) return {failed: failed.map(li => li.textContent)};
             const done = items.filter(li => li.classList.contains('ingested'));
             const summary = document.getElementById('upload-done');
             if (done.length < 2 || !summary) return null;
             return {
               summary: summary.textContent,
               progress: items.every(li => !!li.querySelector('progress')),
               items: done.map(li => ({
                 name: li.dataset.name,
                 href: (li.querySelector('a[href^=\"/ui/documents/\"]') || {}).pathname || null,
               })),
             };",
            vec![],
        )
        .await;
    assert!(uploaded.get("failed").is_none(), "refused: {uploaded}");
    assert_eq!(
        uploaded["progress"], true,
        "a progress bar per file: {uploaded}"
    );
    let summary = uploaded["summary"].as_str().unwrap_or_default();
    assert!(summary.contains("2 uploaded"), "{summary:?}");
    let link = |name: &str| -> String {
        uploaded["items"]
            .as_array()
            .and_then(|items| items.iter().find(|i| i["name"] == name))
            .and_then(|i| i["href"].as_str())
            .unwrap_or_else(|| panic!("no link for {name}: {uploaded}"))
            .to_string()
    };
    let pdf_page = link("crazyones.pdf");
    let scan_page = link("phototest.tif");
    b.page("03-library-uploaded", "Library", "").await;

    // 3. A run of each, followed from the document page's runs table (pressing Reprocess when
    // the upload queued none). No worker runs yet, so the PDF's run page is open, and
    // following its events, while the run is still queued: the page must see it finish by
    // itself.
    let _scan_run = open_run(&b, &scan_page, "04-run-scan-queued").await;
    let pdf_run = open_run(&b, &pdf_page, "05-run-queued").await;
    assert_eq!(b.text("#run-status").await, "queued");
    b.until(
        "the live event stream",
        "const live = document.getElementById('live');
         return !!live && live.textContent.includes('Following live');",
        vec![],
    )
    .await;
    let mut worker = env.spawn(&["worker"]);
    let worker_log = drain(worker.child.stderr.take().expect("worker stderr"));
    let _worker_out = drain(worker.child.stdout.take().expect("worker stdout"));
    let outcome = b
        .until(
            "the run to end on the page",
            "const s = document.getElementById('run-status');
             const t = s ? s.textContent.trim() : '';
             return ['succeeded', 'failed', 'canceled'].includes(t) ? t : null;",
            vec![],
        )
        .await;
    if outcome != "succeeded" {
        b.fail(&format!(
            "run {pdf_run} ended {outcome} (worker log:\n{})",
            worker_log.lock().map(|l| l.clone()).unwrap_or_default()
        ))
        .await;
    }
    let events = b
        .until(
            "the finished run page with its events",
            "const run = document.getElementById('run');
             if (document.readyState !== 'complete' || !run
                 || run.dataset.status !== 'succeeded') return null;
             const seqs = [...document.querySelectorAll('#events li[data-seq]')]
               .map(li => Number(li.dataset.seq));
             if (!seqs.length) return null;
             return {seqs, stages: document.querySelectorAll('#stages tr td').length > 0,
                     cls: document.getElementById('run-status').className};",
            vec![],
        )
        .await;
    let seqs: Vec<u64> = serde_json::from_value(events["seqs"].clone()).expect("sequences");
    assert!(
        seqs.windows(2).all(|w| w[0] < w[1]),
        "events in order, once each: {seqs:?}"
    );
    assert_eq!(events["stages"], true, "the stages table: {events}");
    assert!(
        events["cls"]
            .as_str()
            .unwrap_or_default()
            .contains("status-succeeded"),
        "{events}"
    );
    assert_eq!(b.count("#cancel").await, 0, "no cancel once finished");
    b.page("06-run-succeeded", "", "").await;

    // 4. The document: title, metadata, the PDF's text.
    let pdf_id = pdf_page.trim_start_matches("/ui/documents/").to_string();
    let scan_id = scan_page.trim_start_matches("/ui/documents/").to_string();
    ready(&http, &b.base, &scan_id).await;
    b.goto(&pdf_page).await;
    b.arrived(&pdf_page).await;
    let text = b.text("#text pre.text").await;
    assert!(text.contains(PHRASE), "the PDF's text: {text:?}");
    assert!(b.text("p.filename").await.contains("crazyones.pdf"));
    let metadata = b.text("#metadata").await;
    assert!(b.count("#metadata dt").await >= 4, "{metadata:?}");
    for id in [
        "#reprocess",
        "#delete",
        "#export-md",
        "#export-txt",
        "#export-json",
    ] {
        assert_eq!(
            b.count(id).await,
            1,
            "{id} on the document page (write key)"
        );
    }
    b.page("07-document", "", "").await;
    b.goto(&scan_page).await;
    b.arrived(&scan_page).await;
    let scanned = b.text("#text pre.text").await;
    assert!(
        scanned.contains("quick brown"),
        "the scan's OCR text: {scanned:?}"
    );
    assert!(b.count("#pages tr td").await > 0, "the scan's page records");
    b.page("08-document-scan", "", "").await;

    // 5. Search a phrase, see it highlighted, narrow by a facet.
    b.goto("/ui/search").await;
    b.arrived("/ui/search").await;
    b.page("09-search-empty", "Search", "").await;
    b.element("#search #q")
        .await
        .send_keys(PHRASE)
        .await
        .expect("type");
    let phrase = b.element("#search #phrase").await;
    if !phrase.is_selected().await.expect("checkbox") {
        phrase.click().await.expect("check Exact phrase");
    }
    b.element("#search [type=submit]")
        .await
        .click()
        .await
        .expect("search");
    let hit = b
        .until(
            "a highlighted hit",
            "if (location.pathname !== '/ui/search' || !location.search.includes('q=')) return null;
             const mark = document.querySelector('#results li.hit mark');
             if (!mark) return null;
             const link = mark.closest('li.hit').querySelector('a[href^=\"/ui/documents/\"]');
             return {mark: mark.textContent, href: link ? link.pathname : null,
                     phrase: new URLSearchParams(location.search).get('phrase')};",
            vec![],
        )
        .await;
    assert_eq!(hit["href"], json!(pdf_page), "{hit}");
    assert_eq!(hit["phrase"], "on", "{hit}");
    let marked = hit["mark"].as_str().unwrap_or_default().to_lowercase();
    assert!(
        !marked.is_empty() && PHRASE.contains(&marked),
        "<mark> holds words of the phrase: {hit}"
    );
    b.page("10-search", "Search", "").await;
    let facet = b
        .js(
            "const links = [...document.querySelectorAll(
               '#facets ul.facet[data-facet=\"classification\"] a')]
               .filter(a => a.getAttribute('aria-current') !== 'true'
                 && new URL(a.href).searchParams.get('class'));
             return links.length ? links[0].getAttribute('href') : null;",
            vec![],
        )
        .await;
    let facet = facet
        .as_str()
        .unwrap_or_else(|| panic!("no classification facet link"))
        .to_string();
    let class = facet_class(&facet);
    b.element(&format!("#facets a[href=\"{facet}\"]"))
        .await
        .click()
        .await
        .expect("click the facet");
    let filtered = b
        .until(
            "the filtered results",
            "const p = new URLSearchParams(location.search);
             const current = document.querySelector('#facets [aria-current=\"true\"]');
             if (p.get('class') !== arguments[0] || !current) return null;
             return {current: current.textContent,
                     hits: document.querySelectorAll('#results li.hit').length};",
            vec![json!(class)],
        )
        .await;
    assert!(
        filtered["current"]
            .as_str()
            .unwrap_or_default()
            .contains(&class),
        "{filtered}"
    );
    assert_eq!(
        filtered["hits"], 1,
        "the PDF is in its own class: {filtered}"
    );
    b.page("11-search-filtered", "Search", "").await;

    // 6. The Markdown export, fetched by the page itself: the session cookie authenticates
    // the API.
    b.goto(&pdf_page).await;
    b.arrived(&pdf_page).await;
    let export = b
        .js_async(
            "const done = arguments[arguments.length - 1];
             const href = document.getElementById('export-md').getAttribute('href');
             fetch(href, {credentials: 'same-origin'})
               .then(async r => done({href, status: r.status,
                                      type: r.headers.get('content-type'),
                                      body: await r.text()}))
               .catch(e => done({error: String(e)}));",
            vec![],
        )
        .await;
    assert_eq!(export["status"], 200, "{export}");
    assert_eq!(
        export["href"],
        json!(format!("/documents/{pdf_id}/export?format=md")),
        "{export}"
    );
    let body = export["body"].as_str().unwrap_or_default();
    assert!(
        (body.starts_with("> ") || body.starts_with("**Classification:**"))
            && body.contains("\n---\n")
            && body.contains(PHRASE),
        "Markdown export: {body:?}"
    );

    // The operations page, in the write session's navigation.
    assert_eq!(
        b.count("header.site nav a[href=\"/ui/operations\"]").await,
        1,
        "Operations in the navigation (write key)"
    );
    b.goto("/ui/operations").await;
    b.arrived("/ui/operations").await;
    b.page("12-operations", "Operations", "").await;

    // 7. A hostile name (and first line, which becomes the title) renders as text.
    let hostile = upload(&http, &b.base, &format!("{HOSTILE}.txt"), HOSTILE).await;
    ready(&http, &b.base, &hostile).await;
    b.goto("/ui/").await;
    b.arrived("/ui/").await;
    let row = b
        .text(&format!("#documents tr[data-id=\"{hostile}\"]"))
        .await;
    assert!(
        row.contains(HOSTILE),
        "the row shows the name as text: {row:?}"
    );
    assert_eq!(b.count("img").await, 0, "no <img> element on the library");
    assert!(b.client.get_alert_text().await.is_err(), "an alert is open");
    b.page("13-library-hostile", "Library", "").await;
    let hostile_page = format!("/ui/documents/{hostile}");
    b.goto(&hostile_page).await;
    b.arrived(&hostile_page).await;
    assert_eq!(b.text("main#main h1").await, HOSTILE);
    assert!(b.text("#text pre.text").await.contains(HOSTILE));
    assert_eq!(b.count("img").await, 0, "no <img> element on the document");
    assert!(b.client.get_alert_text().await.is_err(), "an alert is open");
    b.page("14-document-hostile", HOSTILE, HOSTILE).await;

    // 8. Sign out: the pages ask for a key again, and the old cookie is dead server-side.
    b.element("#sign-out [type=submit]")
        .await
        .click()
        .await
        .expect("sign out");
    b.until(
        "signed out",
        "return !document.getElementById('sign-out') && document.readyState === 'complete';",
        vec![],
    )
    .await;
    b.goto("/ui/").await;
    b.until(
        "the sign-in form after signing out",
        "return location.pathname === '/ui/sign-in' && !!document.getElementById('sign-in');",
        vec![],
    )
    .await;
    let replayed = http
        .get(format!("{}/documents", b.base))
        .header("cookie", format!("shelf_session={cookie}"))
        .send()
        .await
        .expect("replay the cookie");
    assert_eq!(
        replayed.status(),
        StatusCode::UNAUTHORIZED,
        "a signed-out session"
    );

    // 9. A read key: no write actions shown, and the server refuses them anyway.
    sign_in(&b, READ_KEY).await;
    b.arrived("/ui/").await;
    b.element("#documents").await;
    assert_eq!(b.count("#upload").await, 0, "no upload form (read key)");
    assert_eq!(b.count("#drop-zone").await, 0, "no drop zone (read key)");
    assert_eq!(
        b.count("header.site nav a[href=\"/ui/operations\"]").await,
        0,
        "no Operations link (read key)"
    );
    b.page("15-library-read", "Library", "").await;
    b.goto(&pdf_page).await;
    b.arrived(&pdf_page).await;
    assert_eq!(b.count("#reprocess").await, 0, "no Reprocess (read key)");
    assert_eq!(b.count("#delete").await, 0, "no Delete (read key)");
    assert_eq!(b.count("#export-md").await, 1, "exports stay (read key)");
    b.page("16-document-read", "", "").await;
    let refused = b
        .js_async(
            "const done = arguments[arguments.length - 1];
             fetch(arguments[0], {method: 'POST', credentials: 'same-origin'})
               .then(r => done(r.status)).catch(e => done(String(e)));",
            vec![json!(format!("/ui/documents/{pdf_id}/reprocess"))],
        )
        .await;
    assert_eq!(refused, 403, "a read session's reprocess");

    // 10. The pipelines, drawn.
    b.goto("/ui/pipelines").await;
    b.arrived("/ui/pipelines").await;
    b.element(".pipeline svg").await;
    assert!(
        b.count(".pipeline pre.yaml").await > 0,
        "the YAML of each pipeline"
    );
    b.page("17-pipelines", "Pipelines", "").await;
    worker.terminate(Duration::from_secs(30));
}

/// Types `key` into the sign-in form and submits it.
async fn sign_in(b: &Browser, key: &str) {
    let field = b.element("#sign-in #key").await;
    field.clear().await.expect("clear the key field");
    field.send_keys(key).await.expect("type the key");
    b.element("#sign-in [type=submit]")
        .await
        .click()
        .await
        .expect("sign in");
    // The form's page is replaced by the answer (the library, or the form with an error).
    b.until(
        "the sign-in answer",
        "return document.readyState === 'complete' && (location.pathname !== '/ui/sign-in'
           || !!document.querySelector('.banner.error'));",
        vec![],
    )
    .await;
}

/// The session cookie's value, after checking it is what the contract says: HttpOnly (no
/// script reads it), SameSite=Strict, and no key left in the page's storage or URL.
async fn session_cookie(b: &Browser) -> String {
    let cookie = b
        .client
        .get_named_cookie("shelf_session")
        .await
        .expect("a shelf_session cookie after signing in");
    assert_eq!(cookie.http_only(), Some(true), "HttpOnly");
    // SameSite is the cookie crate's type, which fantoccini does not re-export.
    assert_eq!(
        cookie.same_site().map(|s| s.to_string()).as_deref(),
        Some("Strict"),
        "SameSite=Strict"
    );
    assert_eq!(cookie.path(), Some("/"));
    let exposed = b
        .js(
            "const stored = [localStorage, sessionStorage].flatMap(s =>
               Object.keys(s).map(k => k + '=' + s.getItem(k)));
             return {cookie: document.cookie, url: location.href,
                     stored: stored.filter(v => v.includes(arguments[0]))};",
            vec![json!(WRITE_KEY)],
        )
        .await;
    assert!(
        !exposed["cookie"]
            .as_str()
            .unwrap_or_default()
            .contains("shelf_session"),
        "{exposed}"
    );
    assert_eq!(
        exposed["stored"],
        json!([]),
        "no key in web storage: {exposed}"
    );
    assert!(
        !exposed["url"]
            .as_str()
            .unwrap_or_default()
            .contains(WRITE_KEY),
        "{exposed}"
    );
    cookie.value().to_string()
}

/// Opens a document page, then the run page of its latest run (pressing Reprocess when it has
/// none); checks and screenshots it; returns the run page's path.
async fn open_run(b: &Browser, document: &str, shot: &str) -> String {
    b.goto(document).await;
    b.arrived(document).await;
    b.element("#runs").await;
    let listed = b
        .js(
            "const a = document.querySelector('#runs a[href^=\"/ui/runs/\"]');
             return a ? a.pathname : null;",
            vec![],
        )
        .await;
    let run = match listed.as_str() {
        Some(run) => {
            eprintln!("{document}: following its run {run}");
            b.element(&format!("#runs a[href=\"{run}\"]"))
                .await
                .click()
                .await
                .expect("follow the run link");
            run.to_string()
        }
        None => {
            eprintln!("{document}: no run after the upload; pressing Reprocess");
            b.element("#reprocess button")
                .await
                .click()
                .await
                .expect("reprocess");
            let run = b
                .until(
                    "the run page after Reprocess",
                    "return location.pathname.startsWith('/ui/runs/')
                       && document.readyState === 'complete' ? location.pathname : null;",
                    vec![],
                )
                .await;
            run.as_str().unwrap_or_default().to_string()
        }
    };
    b.arrived(&run).await;
    let id = run.trim_start_matches("/ui/runs/");
    let section = b
        .js(
            "const s = document.getElementById('run');
             return s ? {id: s.dataset.runId, url: s.dataset.eventsUrl,
                         status: s.dataset.status} : null;",
            vec![],
        )
        .await;
    assert_eq!(section["id"], id, "{section}");
    assert_eq!(
        section["url"],
        json!(format!("/runs/{id}/events/records/stream")),
        "{section}"
    );
    assert_eq!(section["status"], "queued", "no worker yet: {section}");
    b.page(shot, "", "").await;
    run
}

/// The `class` parameter of a facet link.
fn facet_class(href: &str) -> String {
    let query = href.split_once('?').map(|(_, q)| q).unwrap_or_default();
    query
        .split('&')
        .find_map(|pair| pair.strip_prefix("class="))
        .unwrap_or_else(|| panic!("no class in {href}"))
        .to_string()
}

/// Uploads `text` as `name` over the API with the write key and queues its run; the id.
async fn upload(http: &reqwest::Client, base: &str, name: &str, text: &str) -> String {
    let part = reqwest::multipart::Part::bytes(text.as_bytes().to_vec())
        .file_name(name.to_string())
        .mime_str("text/plain")
        .expect("mime");
    let answer = http
        .post(format!("{base}/documents"))
        .header("x-api-key", WRITE_KEY)
        .multipart(reqwest::multipart::Form::new().part("file", part))
        .send()
        .await
        .expect("upload");
    assert_eq!(answer.status(), StatusCode::CREATED);
    let document: Value = answer.json().await.expect("document");
    let id = document["id"].as_str().expect("id").to_string();
    let run = http
        .post(format!("{base}/runs"))
        .header("x-api-key", WRITE_KEY)
        .json(&json!({"document_id": id}))
        .send()
        .await
        .expect("queue a run");
    assert_eq!(run.status(), StatusCode::CREATED);
    id
}

/// Waits until the document is `ready` (its run succeeded), over the API.
async fn ready(http: &reqwest::Client, base: &str, id: &str) {
    let deadline = Instant::now() + DEADLINE;
    loop {
        let document: Value = http
            .get(format!("{base}/documents/{id}"))
            .header("x-api-key", READ_KEY)
            .send()
            .await
            .expect("document")
            .json()
            .await
            .expect("document JSON");
        match document["status"].as_str() {
            Some("ready") => return,
            Some("failed") => panic!("{id} failed: {document}"),
            _ => {}
        }
        assert!(
            Instant::now() < deadline,
            "{id} not ready in time: {document}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
