//! The API's load limits against the real `shelf api`: event streams capped per client (the
//! cap counts an IPv6 /64 as one client, and a disconnected stream gives its slot back), a
//! stream ended at its lifetime and resumed with `Last-Event-ID` without losing an event, the
//! rate limit keying IPv6 clients by network, and denials of a flood aggregated in the audit
//! trail. Clients are told apart through `X-Forwarded-For` from a trusted loopback proxy.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use reqwest::{Client, Response, StatusCode};
use serde_json::Value;

use crate::api::{Api, client, migrated};
use crate::support::{Env, wait_for};

const TEXT: &[u8] = b"Coopers bend staves into barrels and hoop them with iron.\n";

/// An environment whose API believes `X-Forwarded-For` from loopback.
fn proxied() -> Env {
    Env::new().with("SHELF_API_TRUSTED_PROXY_CIDRS", "127.0.0.1/32,::1/128")
}

async fn stream_from(client: &Client, api: &Api, run_id: &str, from: &str) -> Response {
    client
        .get(api.url(&format!("/runs/{run_id}/events/stream")))
        .header("x-forwarded-for", from)
        .send()
        .await
        .expect("stream")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn event_streams_are_capped_per_client_and_a_disconnect_frees_the_slot() {
    let env = migrated(proxied().with("SHELF_API_MAX_STREAMS_PER_CLIENT", "2"));
    // No worker: the run stays queued, so its streams stay open.
    let (_doc, run_id) = env.queue(&env.write("barrels.txt", TEXT));
    let api = Api::start(&env);
    let client = client();

    // Two addresses of one /64 are one client: its two streams fill the cap.
    let first = stream_from(&client, &api, &run_id, "2001:db8:1:2::1").await;
    assert_eq!(first.status(), StatusCode::OK);
    let second = stream_from(&client, &api, &run_id, "2001:db8:1:2:ffff::2").await;
    assert_eq!(second.status(), StatusCode::OK);
    let refused = stream_from(&client, &api, &run_id, "2001:db8:1:2::3").await;
    assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
    let retry_after: u64 = refused
        .headers()
        .get("retry-after")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse().ok())
        .expect("Retry-After");
    // The oldest stream ends at its lifetime (300 s by default) at the latest.
    assert!((1..=300).contains(&retry_after), "{retry_after}");
    let body: Value = refused.json().await.expect("json");
    assert_eq!(body["code"], "too_many_streams", "{body}");
    assert!(body["detail"].is_string(), "{body}");

    // Other clients are not affected: another /64, and IPv4 (also written IPv4-mapped).
    let mut others = Vec::new();
    for from in ["2001:db8:1:3::1", "192.0.2.1", "::ffff:192.0.2.1"] {
        let other = stream_from(&client, &api, &run_id, from).await;
        assert_eq!(other.status(), StatusCode::OK, "{from}");
        others.push(other);
    }
    let third_v4 = stream_from(&client, &api, &run_id, "192.0.2.1").await;
    assert_eq!(third_v4.status(), StatusCode::TOO_MANY_REQUESTS);

    // A client that goes away gives its slot back.
    drop(first);
    let deadline = Instant::now() + Duration::from_secs(60);
    let reopened = loop {
        let attempt = stream_from(&client, &api, &run_id, "2001:db8:1:2::4").await;
        if attempt.status() == StatusCode::OK {
            break attempt;
        }
        assert_eq!(attempt.status(), StatusCode::TOO_MANY_REQUESTS);
        assert!(
            Instant::now() < deadline,
            "the closed stream's slot never came back"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    // And the cap holds again.
    let refused = stream_from(&client, &api, &run_id, "2001:db8:1:2::5").await;
    assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
    drop((second, reopened, others));
}

/// The `id:` sequences of a stream's events, whether it sent `done`, and whether it ended with
/// the lifetime's `retry:` hint.
fn parse_stream(text: &str) -> (Vec<u64>, Option<String>, bool) {
    let mut ids = Vec::new();
    let mut done = None;
    let mut retry = false;
    for block in text.split("\n\n") {
        if block.lines().any(|l| l == "event: done") {
            done = block
                .lines()
                .find_map(|l| l.strip_prefix("data: "))
                .map(str::to_string);
        }
        if block.lines().any(|l| l.starts_with("retry:")) {
            retry = true;
        }
        ids.extend(
            block
                .lines()
                .filter_map(|l| l.strip_prefix("id: "))
                .filter_map(|s| s.parse::<u64>().ok()),
        );
    }
    (ids, done, retry)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_ends_at_its_lifetime_and_resumes_with_last_event_id_missing_nothing() {
    let env = migrated(Env::new().with("SHELF_API_STREAM_MAX_SECONDS", "1"));
    let (_doc, run_id) = env.queue(&env.write("barrels.txt", TEXT));
    let api = Api::start(&env);
    let client = client();
    let path = format!("/runs/{run_id}/events/stream");

    // Nothing runs the run yet: the stream sends what exists, then ends by itself.
    let text = tokio::time::timeout(
        Duration::from_secs(60),
        client
            .get(api.url(&path))
            .send()
            .await
            .expect("stream")
            .text(),
    )
    .await
    .expect("the stream ended at its lifetime")
    .expect("body");
    let (mut seen, done, retry) = parse_stream(&text);
    assert!(done.is_none(), "{text}");
    assert!(retry, "the stream ends with a retry hint: {text}");
    assert!(text.contains("retry: 1000"), "{text}");
    assert_eq!(seen, [1], "{text}");

    // A worker runs it while the client keeps reconnecting where it left off.
    let _worker = env.spawn(&["worker"]);
    let deadline = Instant::now() + Duration::from_secs(180);
    let mut reconnects = 0;
    let done = loop {
        assert!(Instant::now() < deadline, "the run never ended: {seen:?}");
        let last = seen.last().copied().unwrap_or(0);
        let text = client
            .get(api.url(&path))
            .header("last-event-id", last.to_string())
            .send()
            .await
            .expect("stream")
            .text()
            .await
            .expect("body");
        reconnects += 1;
        let (ids, done, retry) = parse_stream(&text);
        seen.extend(ids);
        if let Some(done) = done {
            break done;
        }
        assert!(
            retry,
            "a stream without done ended with a retry hint: {text}"
        );
    };
    assert!(done.contains("\"status\":\"succeeded\""), "{done}");
    // Every event once, in order, across every reconnection.
    let expected: Vec<u64> = (1..=seen.len() as u64).collect();
    assert_eq!(seen, expected, "after {reconnects} reconnections");
    assert!(seen.len() > 3, "{seen:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_rate_limit_counts_an_ipv6_network_as_one_client() {
    let env = migrated(proxied().with("SHELF_API_RATE_LIMIT_PER_MINUTE", "2"));
    let api = Api::start(&env);
    let client = client();
    let status = |from: &'static str| {
        let request = client
            .get(api.url("/documents"))
            .header("x-forwarded-for", from);
        async move { request.send().await.expect("get").status().as_u16() }
    };
    // Rotating addresses inside one /64 does not buy more requests; within the minute's window
    // (one starts at a client's first request), the third is refused.
    assert_eq!(status("2001:db8:7:1::1").await, 200);
    assert_eq!(status("2001:db8:7:1:abcd::2").await, 200);
    assert_eq!(status("2001:db8:7:1:ffff:ffff:ffff:ffff").await, 429);
    assert_eq!(status("2001:db8:7:2::1").await, 200, "another network");
    // An IPv4-mapped address is the IPv4 client.
    assert_eq!(status("198.51.100.7").await, 200);
    assert_eq!(status("::ffff:198.51.100.7").await, 200);
    assert_eq!(status("198.51.100.7").await, 429);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_unauthenticated_requests_is_one_audit_row_per_client_and_minute() {
    let env = migrated(proxied().with("SHELF_API_KEY", "limits-key-0123456789"));
    let api = Api::start(&env);
    let client = client();
    const FLOOD: u64 = 120;
    let started = Instant::now();
    for i in 1..=FLOOD {
        // A new address of one /64 each time.
        let reply = client
            .get(api.url("/documents"))
            .header("x-forwarded-for", format!("2001:db8:9:1::{i:x}"))
            .send()
            .await
            .expect("get");
        assert_eq!(reply.status(), StatusCode::UNAUTHORIZED);
    }
    // And one denial from elsewhere.
    let reply = client
        .get(api.url("/documents"))
        .header("x-forwarded-for", "203.0.113.8")
        .send()
        .await
        .expect("get");
    assert_eq!(reply.status(), StatusCode::UNAUTHORIZED);
    let minutes = started.elapsed().as_secs() / 60 + 2;

    let page = wait_for(Duration::from_secs(30), "every denial stored", || {
        let page = env.json(&["admin", "api-audit", "--json", "--limit", "1000"]);
        (page["denials"].as_u64() == Some(FLOOD + 1)).then_some(page)
    });
    let rows = page["events"].as_array().expect("events");
    let flood: Vec<&Value> = rows
        .iter()
        .filter(|r| r["client_key"] == "2001:db8:9:1::/64")
        .collect();
    // One row per minute the flood touched (one, unless it crossed a minute), holding the count.
    assert!(
        !flood.is_empty() && flood.len() as u64 <= minutes,
        "{} rows for one client: {page:#}",
        flood.len()
    );
    let counted: u64 = flood.iter().filter_map(|r| r["count"].as_u64()).sum();
    assert_eq!(counted, FLOOD, "{page:#}");
    let distinct_minutes: BTreeSet<&str> = flood
        .iter()
        .filter_map(|r| r["created_at"].as_str())
        .filter_map(|t| t.get(..16))
        .collect();
    assert_eq!(distinct_minutes.len(), flood.len(), "{page:#}");
    for row in &flood {
        assert_eq!(row["reason"], "missing_credential");
        assert_eq!(row["path"], "/documents");
    }
    let other: Vec<&Value> = rows
        .iter()
        .filter(|r| r["client_key"] == "203.0.113.8")
        .collect();
    assert_eq!(other.len(), 1, "{page:#}");
    assert_eq!(other[0]["count"], 1);
    assert_eq!(page["total"].as_u64(), Some(rows.len() as u64));
}
