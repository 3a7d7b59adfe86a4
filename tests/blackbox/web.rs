//! The web pages of the real `shelf api` over HTTP, without a browser: redirects to the
//! sign-in, the session cookie's flags, the Origin check on every change a cookie (or a
//! sign-in) makes, scopes, escaping of a hostile file name, the CSP and security headers of
//! every page, a session ending with sign-out and with its key, and HTML for unknown pages.
//! (The journey in a real browser is `tests/browser`.)

use reqwest::header::{HeaderMap, SET_COOKIE};
use reqwest::{Client, StatusCode};
use serde_json::Value;

use crate::api::{Api, migrated};
use crate::support::Env;

const CSP: &str = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
                   frame-ancestors 'none'; form-action 'self'; base-uri 'none'";

fn no_redirects() -> Client {
    Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(std::time::Duration::from_secs(60))
        .build()
        .expect("client")
}

/// An `application/x-www-form-urlencoded` body.
fn form(pairs: &[(&str, &str)]) -> String {
    let encode = |text: &str| {
        text.bytes()
            .map(|b| match b {
                b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' => {
                    char::from(b).to_string()
                }
                _ => format!("%{b:02X}"),
            })
            .collect::<String>()
    };
    pairs
        .iter()
        .map(|(k, v)| format!("{}={}", encode(k), encode(v)))
        .collect::<Vec<_>>()
        .join("&")
}

fn location(headers: &HeaderMap) -> String {
    headers
        .get("location")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string()
}

/// Signs in with `key`; the `shelf_session=…` pair and the whole `Set-Cookie` value.
async fn sign_in(
    client: &Client,
    api: &Api,
    key: &str,
    extra: &[(&str, &str)],
) -> (String, String) {
    let mut req = client
        .post(api.url("/ui/sign-in"))
        .header("origin", api.url(""))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(form(&[("key", key), ("next", "/ui/search")]));
    for (name, value) in extra {
        req = req.header(*name, *value);
    }
    let response = req.send().await.expect("sign in");
    assert_eq!(response.status(), StatusCode::SEE_OTHER);
    assert_eq!(location(response.headers()), "/ui/search");
    let set = response
        .headers()
        .get(SET_COOKIE)
        .and_then(|v| v.to_str().ok())
        .expect("set-cookie")
        .to_string();
    let pair = set.split(';').next().unwrap_or_default().to_string();
    (pair, set)
}

async fn page(
    client: &Client,
    api: &Api,
    path: &str,
    cookie: &str,
) -> (StatusCode, HeaderMap, String) {
    let response = client
        .get(api.url(path))
        .header("cookie", cookie)
        .send()
        .await
        .expect("page");
    let status = response.status();
    let headers = response.headers().clone();
    (status, headers, response.text().await.expect("body"))
}

fn assert_page_headers(headers: &HeaderMap, path: &str) {
    let get = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string()
    };
    assert_eq!(get("content-type"), "text/html; charset=utf-8", "{path}");
    assert_eq!(get("content-security-policy"), CSP, "{path}");
    assert_eq!(get("x-frame-options"), "DENY", "{path}");
    assert_eq!(get("x-content-type-options"), "nosniff", "{path}");
    assert_eq!(get("referrer-policy"), "same-origin", "{path}");
    assert_eq!(get("cache-control"), "no-store", "{path}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pages_sessions_and_their_guards_over_the_wire() {
    let mut env = migrated(
        Env::new()
            .with("SHELF_API_KEYS", "read:web-read-key,write:web-write-key")
            // The test's own address is a trusted proxy, so X-Forwarded-Proto is believed.
            .with("SHELF_API_TRUSTED_PROXY_CIDRS", "127.0.0.1/32"),
    );
    let mut api = Api::start_with(&env, &["api", "--port", "0", "--workers", "1"]);
    let client = no_redirects();

    // Not signed in: to the sign-in page, coming back afterwards.
    let r = client.get(api.url("/")).send().await.expect("root");
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    assert_eq!(location(r.headers()), "/ui/");
    let (status, headers, _) = page(&client, &api, "/ui/?tag=a%26b", "").await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    assert_eq!(
        location(&headers),
        "/ui/sign-in?next=%2Fui%2F%3Ftag%3Da%2526b"
    );
    let (status, headers, body) = page(&client, &api, "/ui/sign-in", "").await;
    assert_eq!(status, StatusCode::OK);
    assert_page_headers(&headers, "/ui/sign-in");
    assert!(
        body.contains("id=\"sign-in\"") && body.contains("type=\"password\""),
        "{body}"
    );
    // The API itself still answers JSON without a credential.
    let r = client.get(api.url("/documents")).send().await.expect("api");
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);

    // A sign-in needs this server's Origin (login CSRF), then a valid key.
    let r = client
        .post(api.url("/ui/sign-in"))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(form(&[("key", "web-write-key")]))
        .send()
        .await
        .expect("no origin");
    assert_eq!(r.status(), StatusCode::FORBIDDEN);
    let body: Value = r.json().await.expect("json");
    assert_eq!(body["code"], "cross_origin_request");
    let r = client
        .post(api.url("/ui/sign-in"))
        .header("origin", api.url(""))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(form(&[("key", "wrong")]))
        .send()
        .await
        .expect("wrong key");
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    assert!(r.headers().get(SET_COOKIE).is_none());
    assert!(
        r.text()
            .await
            .expect("body")
            .contains("That key is not valid")
    );

    let (write, set) = sign_in(&client, &api, "web-write-key", &[]).await;
    for flag in ["HttpOnly", "SameSite=Strict", "Path=/", "Max-Age=43200"] {
        assert!(set.contains(flag), "{set}");
    }
    assert!(!set.contains("Secure"), "plain HTTP: {set}");
    let (_, set_tls) = sign_in(
        &client,
        &api,
        "web-write-key",
        &[("x-forwarded-proto", "https")],
    )
    .await;
    assert!(set_tls.ends_with("; Secure"), "{set_tls}");

    // A hostile file name renders as text.
    let xss = "<img src=x onerror=alert(1)>.txt";
    let api_client = crate::api::client();
    let write_key = |req: reqwest::RequestBuilder| req.header("x-api-key", "web-write-key");
    let form = reqwest::multipart::Form::new().part(
        "file",
        reqwest::multipart::Part::bytes(
            b"Horses graze in green fields. <img src=x onerror=alert(1)> & <script>alert(2)</script>\n"
                .to_vec(),
        )
        .file_name(xss),
    );
    let r = write_key(api_client.post(api.url("/documents")))
        .multipart(form)
        .send()
        .await
        .expect("upload");
    assert_eq!(r.status(), StatusCode::CREATED);
    let doc: Value = r.json().await.expect("json");
    let id = doc["id"].as_str().expect("id").to_string();
    let (status, headers, body) = page(&client, &api, "/ui/", &write).await;
    assert_eq!(status, StatusCode::OK);
    assert_page_headers(&headers, "/ui/");
    // Stored names are normalized (`<`, `>` become `_`); what is left shows as text.
    assert!(
        body.contains(">_img src=x onerror=alert(1)_.txt</a>"),
        "{body}"
    );
    assert!(!body.contains("<img"), "{body}");
    assert!(body.contains("id=\"upload\""), "a write session may upload");
    assert!(!body.contains("<script>"), "no inline script");
    assert!(!body.contains(" style="), "no inline style");

    // The cookie authenticates the API; its changes need this server's Origin.
    let r = client
        .get(api.url("/documents"))
        .header("cookie", &write)
        .send()
        .await
        .expect("list");
    assert_eq!(r.status(), StatusCode::OK);
    let reprocess = format!("/documents/{id}/reprocess");
    for origin in [None, Some("http://evil.example")] {
        let mut req = client.post(api.url(&reprocess)).header("cookie", &write);
        if let Some(origin) = origin {
            req = req.header("origin", origin);
        }
        let r = req.send().await.expect("reprocess");
        assert_eq!(r.status(), StatusCode::FORBIDDEN, "{origin:?}");
        let body: Value = r.json().await.expect("json");
        assert_eq!(body["code"], "cross_origin_request");
    }
    let r = client
        .post(api.url(&reprocess))
        .header("cookie", &write)
        .header("origin", api.url(""))
        .send()
        .await
        .expect("reprocess");
    assert_eq!(r.status(), StatusCode::CREATED);
    let run: Value = r.json().await.expect("json");
    let run_id = run["id"].as_str().expect("run id").to_string();
    crate::support::wait_for(
        std::time::Duration::from_secs(120),
        "the run to succeed",
        || {
            let out = env.run(&["runs", &run_id, "--json"]);
            let run: Value = serde_json::from_slice(&out.stdout).ok()?;
            assert_ne!(run["status"], "failed", "{run}");
            (run["status"] == "succeeded").then_some(())
        },
    );
    // A key in a header needs no Origin (scripts), as before.
    let r = write_key(api_client.get(api.url("/documents")))
        .send()
        .await
        .expect("key");
    assert_eq!(r.status(), StatusCode::OK);

    // A transcript hit links to the cue where the words were said, and the cue is there.
    let srt = "1\n00:00:01,000 --> 00:00:04,000\nFarriers trim the hooves of working horses.\n\n\
               2\n00:01:05,500 --> 00:01:09,000\nA loose shoe should be replaced at once.\n";
    let form = reqwest::multipart::Form::new().part(
        "file",
        reqwest::multipart::Part::bytes(srt.as_bytes().to_vec()).file_name("farrier.srt"),
    );
    let r = write_key(api_client.post(api.url("/documents")))
        .multipart(form)
        .send()
        .await
        .expect("upload srt");
    assert_eq!(r.status(), StatusCode::CREATED);
    let transcript: Value = r.json().await.expect("json");
    let transcript_id = transcript["id"].as_str().expect("id").to_string();
    let out = env.run(&["process", &transcript_id]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (status, _, body) = page(&client, &api, "/ui/search?q=loose+shoe&phrase=on", &write).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let anchor = format!("/ui/documents/{transcript_id}#t-65500");
    assert!(body.contains(&anchor), "{body}");
    assert!(body.contains("<mark>"), "{body}");
    let (_, _, body) = page(
        &client,
        &api,
        &format!("/ui/documents/{transcript_id}"),
        &write,
    )
    .await;
    assert!(body.contains("id=\"t-65500\""), "{body}");
    assert!(body.contains("1:05"), "{body}");

    // Every page answers with its headers.
    for path in [
        format!("/ui/documents/{id}"),
        format!("/ui/runs/{run_id}"),
        "/ui/search?q=horses".to_string(),
        "/ui/search?q=img+onerror".to_string(),
        "/ui/search?q=horses&phrase=on&mode=all&scope=raw".to_string(),
        "/ui/pipelines".to_string(),
        "/ui/operations".to_string(),
        "/ui/?status=ingested&class=6&tag=x&from=2020-01-01&to=2099-12-31".to_string(),
    ] {
        let (status, headers, body) = page(&client, &api, &path, &write).await;
        assert_eq!(status, StatusCode::OK, "{path}: {body}");
        assert_page_headers(&headers, &path);
        assert!(body.contains("<h1>"), "{path}");
        assert!(!body.contains("class=\"banner error\""), "{path}: {body}");
    }
    let (_, _, body) = page(&client, &api, "/ui/pipelines", &write).await;
    assert!(body.contains("<svg"), "{body}");
    // Text with markup in it is shown as text.
    let (_, _, body) = page(&client, &api, &format!("/ui/documents/{id}"), &write).await;
    assert!(body.contains("_img src=x onerror=alert(1)_.txt"), "{body}");
    assert!(
        body.contains("&lt;img src=x onerror=alert(1)&gt;"),
        "{body}"
    );
    assert!(
        body.contains("&lt;script&gt;alert(2)&lt;/script&gt;"),
        "{body}"
    );
    assert!(
        !body.contains("<img") && !body.contains("<script>"),
        "{body}"
    );
    assert!(body.contains("id=\"reprocess\"") && body.contains("id=\"delete\""));
    // Bad filters are a page with the code, not a crash.
    let (status, headers, body) = page(&client, &api, "/ui/?status=nope", &write).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_page_headers(&headers, "bad filter");
    assert!(body.contains("invalid_document_status"), "{body}");
    let (status, _, body) = page(&client, &api, "/ui/search?q=%21%21", &write).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert!(body.contains("invalid_search_query"), "{body}");
    // Unknown pages and documents are pages too.
    let (status, headers, body) = page(&client, &api, "/ui/nope", &write).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_page_headers(&headers, "/ui/nope");
    assert!(body.contains("not_found"));
    let (status, _, _) = page(&client, &api, "/ui/documents/doc_0000000000000000", &write).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    // Assets are open (the sign-in page needs them) and cached.
    let r = client
        .get(api.url("/ui/static/shelf.css"))
        .send()
        .await
        .expect("css");
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(r.headers()["content-type"], "text/css; charset=utf-8");
    assert!(
        r.headers()["cache-control"]
            .to_str()
            .expect("ascii")
            .contains("immutable")
    );

    // A read-scope session sees no write controls, and is refused them anyway.
    let (read, _) = sign_in(&client, &api, "web-read-key", &[]).await;
    let (_, _, body) = page(&client, &api, "/ui/", &read).await;
    assert!(!body.contains("id=\"upload\""), "{body}");
    assert!(!body.contains("/ui/operations"), "{body}");
    let (_, _, body) = page(&client, &api, &format!("/ui/documents/{id}"), &read).await;
    assert!(!body.contains("id=\"reprocess\"") && !body.contains("id=\"delete\""));
    assert!(body.contains("id=\"export-md\""));
    let (status, headers, body) = page(&client, &api, "/ui/operations", &read).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert_page_headers(&headers, "operations as reader");
    assert!(body.contains("insufficient_scope"));
    let r = client
        .post(api.url(&format!("/ui/documents/{id}/reprocess")))
        .header("cookie", &read)
        .header("origin", api.url(""))
        .send()
        .await
        .expect("reprocess as reader");
    assert_eq!(r.status(), StatusCode::FORBIDDEN);
    let r = client
        .delete(api.url(&format!("/documents/{id}")))
        .header("cookie", &read)
        .header("origin", api.url(""))
        .send()
        .await
        .expect("delete as reader");
    assert_eq!(r.status(), StatusCode::FORBIDDEN);
    let body: Value = r.json().await.expect("json");
    assert_eq!(body["code"], "insufficient_scope");

    // Sign-out ends the session on the server: the old cookie is worth nothing.
    let r = client
        .post(api.url("/ui/sign-out"))
        .header("cookie", &read)
        .header("origin", api.url(""))
        .send()
        .await
        .expect("sign out");
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    let cleared = r.headers()[SET_COOKIE].to_str().expect("ascii").to_string();
    assert!(cleared.contains("Max-Age=0"), "{cleared}");
    let (status, headers, _) = page(&client, &api, "/ui/", &read).await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    assert!(location(&headers).starts_with("/ui/sign-in"));
    let r = client
        .get(api.url("/documents"))
        .header("cookie", &read)
        .send()
        .await
        .expect("api");
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);

    // A session lasts while its key does: restarted without the write key, the write session
    // is over.
    api.process.kill();
    env = env.with("SHELF_API_KEYS", "read:web-read-key");
    let api = Api::start(&env);
    let (status, headers, _) = page(&client, &api, "/ui/", &write).await;
    assert_eq!(
        status,
        StatusCode::SEE_OTHER,
        "the removed key's session still works"
    );
    assert!(location(&headers).starts_with("/ui/sign-in"));
}
