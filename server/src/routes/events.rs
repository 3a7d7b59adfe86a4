//! Run events: pages (`/events`, `/events/records`) and server-sent event streams that follow
//! a run to its end (`/events/stream`, `/events/records/stream`). Streams resume after
//! `Last-Event-ID`, send heartbeat comments while idle, end with `event: done` once the run is
//! terminal, and end early (without `done`) when the server shuts down or after
//! `SHELF_API_STREAM_MAX_SECONDS` (then with a `retry:` hint: the client reconnects with
//! `Last-Event-ID` and misses nothing). A client holds at most
//! `SHELF_API_MAX_STREAMS_PER_CLIENT` streams; its slot is given back when its stream's
//! response is dropped, whether the stream ended or the client went away. A stream reads the
//! database when the run's events change (`shelf_engine::event_signal`), and otherwise only on
//! a slow fallback timer.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::time::Duration;

use axum::Json;
use axum::extract::{Extension, State};
use axum::http::{HeaderMap, HeaderValue};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures::Stream;
use serde::Deserialize;
use serde_json::json;
use shelf_app::AppError;
use shelf_engine::EventRecord;
use shelf_engine::event_signal::Follower;
use tokio::time::Instant;
use utoipa::IntoParams;
use utoipa_axum::routes;

use crate::auth::Identity;
use crate::error::{ApiError, ErrorBody, ErrorCode};
use crate::extract::{ApiPath, ApiQuery, MAX_OFFSET, page_limit, page_offset};
use crate::model::events::{EventLines, EventRecordOut, EventRecords, SseEvent, event_line};
use crate::policy::Policy;
use crate::rate_limit::StreamSlot;
use crate::routes::Resource;
use crate::state::AppState;

pub fn routes() -> Resource {
    Resource::new()
        .route(Policy::Read, routes!(lines))
        .route(Policy::Read, routes!(records))
        .route(Policy::Read, routes!(stream_lines))
        .route(Policy::Read, routes!(stream_records))
}

/// Events read per database round trip while streaming.
const STREAM_PAGE: u64 = 500;

/// The reconnection delay a stream that reached its lifetime asks of the client.
const RECONNECT_AFTER: Duration = Duration::from_secs(1);

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct EventsQuery {
    /// Default 500, at most 1000.
    #[param(minimum = 1, maximum = 1000)]
    pub limit: Option<u64>,
    /// Events to skip: the page starts at sequence `offset + 1`.
    #[param(minimum = 0, maximum = 9_007_199_254_740_991_u64)]
    pub offset: Option<u64>,
}

async fn page(
    state: &AppState,
    id: &str,
    q: EventsQuery,
) -> Result<(Vec<EventRecord>, u64, u64, String), ApiError> {
    let limit = page_limit("limit", q.limit, 500, 1000)?;
    let offset = page_offset(&["query", "offset"], q.offset)?;
    let events = state.shelf.events(id, offset, limit).await?;
    let status = state.shelf.run(id).await?.status.as_str().to_string();
    Ok((events, limit, offset, status))
}

/// Run events as text lines
#[utoipa::path(
    get, path = "/runs/{id}/events", operation_id = "list_run_events", tag = "events",
    params(("id" = String, Path, description = "Run id"), EventsQuery),
    responses((status = 200, body = EventLines), (status = 404, body = ErrorBody))
)]
pub async fn lines(
    State(state): State<AppState>,
    ApiPath(id): ApiPath<String>,
    ApiQuery(q): ApiQuery<EventsQuery>,
) -> Result<Json<EventLines>, ApiError> {
    let (events, limit, offset, run_status) = page(&state, &id, q).await?;
    Ok(Json(EventLines {
        events: events.iter().map(event_line).collect(),
        limit,
        offset,
        run_status,
    }))
}

/// Run events as records
#[utoipa::path(
    get, path = "/runs/{id}/events/records", operation_id = "list_run_event_records", tag = "events",
    params(("id" = String, Path, description = "Run id"), EventsQuery),
    responses((status = 200, body = EventRecords), (status = 404, body = ErrorBody))
)]
pub async fn records(
    State(state): State<AppState>,
    ApiPath(id): ApiPath<String>,
    ApiQuery(q): ApiQuery<EventsQuery>,
) -> Result<Json<EventRecords>, ApiError> {
    let (events, limit, offset, run_status) = page(&state, &id, q).await?;
    Ok(Json(EventRecords {
        events: events.into_iter().map(EventRecordOut::from).collect(),
        limit,
        offset,
        run_status,
    }))
}

/// Follow run events as text lines
///
/// `text/event-stream`: one event per run event (`id:` its sequence, `data:` the line), then
/// `event: done` with `{run_id, status}` once the run is terminal. Resume with `Last-Event-ID`.
#[utoipa::path(
    get, path = "/runs/{id}/events/stream", operation_id = "stream_run_events", tag = "events",
    params(
        ("id" = String, Path, description = "Run id"),
        ("Last-Event-ID" = Option<u64>, Header, nullable = false, description = "Resume after this sequence (digits only)", minimum = 0, maximum = 9_007_199_254_740_991_u64),
    ),
    responses(
        (status = 200, description = "Event stream", content_type = "text/event-stream", body = SseEvent),
        (status = 404, body = ErrorBody),
        (status = 429, description = TOO_MANY, body = ErrorBody),
    )
)]
pub async fn stream_lines(
    State(state): State<AppState>,
    ApiPath(id): ApiPath<String>,
    identity: Option<Extension<Identity>>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    stream(state, id, identity, &headers, Format::Lines).await
}

/// Follow run events as records
///
/// `text/event-stream`: `event: run-event`, `id:` the sequence, `data:` the JSON record; then
/// `event: done` with `{run_id, status}` once the run is terminal. Resume with `Last-Event-ID`.
#[utoipa::path(
    get, path = "/runs/{id}/events/records/stream", operation_id = "stream_run_event_records", tag = "events",
    params(
        ("id" = String, Path, description = "Run id"),
        ("Last-Event-ID" = Option<u64>, Header, nullable = false, description = "Resume after this sequence (digits only)", minimum = 0, maximum = 9_007_199_254_740_991_u64),
    ),
    responses(
        (status = 200, description = "Event stream", content_type = "text/event-stream", body = SseEvent),
        (status = 404, body = ErrorBody),
        (status = 429, description = TOO_MANY, body = ErrorBody),
    )
)]
pub async fn stream_records(
    State(state): State<AppState>,
    ApiPath(id): ApiPath<String>,
    identity: Option<Extension<Identity>>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    stream(state, id, identity, &headers, Format::Records).await
}

/// The 429 of the stream routes.
const TOO_MANY: &str = "`too_many_streams`: the client holds `SHELF_API_MAX_STREAMS_PER_CLIENT` \
     open streams; or `rate_limited`: the identity's window is used up (both with `Retry-After`)";

#[derive(Debug, Clone, Copy)]
enum Format {
    Lines,
    Records,
}

fn last_event_id(headers: &HeaderMap) -> Result<i64, ApiError> {
    let Some(value) = headers.get("last-event-id") else {
        return Ok(0);
    };
    // Exactly what the schema declares: digits, at most MAX_OFFSET (no sign, no spaces).
    value
        .to_str()
        .ok()
        .filter(|v| !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()))
        .and_then(|v| v.parse::<u64>().ok())
        .filter(|v| *v <= MAX_OFFSET)
        .and_then(|v| i64::try_from(v).ok())
        .ok_or_else(|| {
            ApiError::invalid(
                &["header", "last-event-id"],
                "Last-Event-ID must be an event sequence (a whole number)",
                "int_parsing",
            )
        })
}

async fn stream(
    state: AppState,
    run_id: String,
    identity: Option<Extension<Identity>>,
    headers: &HeaderMap,
    format: Format,
) -> Result<Response, ApiError> {
    let after = last_event_id(headers)?;
    // The auth middleware names every request it lets through; only a router called without
    // it (none is) would leave a stream unnamed.
    let identity = identity.map_or_else(|| "ip:unknown".to_string(), |Extension(i)| i.0);
    let slot = state.streams.acquire(&identity).map_err(|retry_after| {
        ApiError::new(
            ErrorCode::TooManyStreams,
            format!(
                "This client already holds {} open event streams; close one or retry later",
                state.shelf.settings.api.max_streams_per_client
            ),
        )
        .retry_after(retry_after)
    })?;
    // Subscribed before the first read: events committed after it wake the stream.
    let follower = Follower::new(&run_id);
    state.shelf.run(&run_id).await?;
    let heartbeat = state.options.sse_heartbeat;
    let deadline =
        Instant::now() + Duration::from_secs(state.shelf.settings.api.stream_max_seconds);
    let follow = Follow {
        state,
        run_id,
        after,
        pending: VecDeque::new(),
        terminal: None,
        finished: false,
        format,
        follower,
        deadline,
        _slot: slot,
    };
    let sse = Sse::new(follow.into_stream())
        .keep_alive(KeepAlive::new().interval(heartbeat).text("heartbeat"));
    let mut response = sse.into_response();
    // Reverse proxies (nginx) must pass events on as they come.
    response
        .headers_mut()
        .insert("x-accel-buffering", HeaderValue::from_static("no"));
    Ok(response)
}

/// The state of one stream.
struct Follow {
    state: AppState,
    run_id: String,
    /// The last sequence sent.
    after: i64,
    pending: VecDeque<EventRecord>,
    /// The terminal status, once seen; `done` follows the events read after it.
    terminal: Option<String>,
    finished: bool,
    format: Format,
    /// Wakes the stream when the run's events change.
    follower: Follower,
    /// When the stream ends by itself (`SHELF_API_STREAM_MAX_SECONDS`).
    deadline: Instant,
    /// The stream's place under the client's cap, given back when the response is dropped.
    _slot: StreamSlot,
}

impl Follow {
    fn into_stream(self) -> impl Stream<Item = Result<Event, Infallible>> {
        futures::stream::unfold(self, |mut follow| async move {
            let event = follow.next().await?;
            Some((Ok(event), follow))
        })
    }

    fn render(&self, record: EventRecord) -> Event {
        let event = Event::default().id(record.sequence.to_string());
        match self.format {
            Format::Lines => event.data(event_line(&record)),
            Format::Records => event.event("run-event").data(
                serde_json::to_string(&EventRecordOut::from(record))
                    .unwrap_or_else(|_| "{}".to_string()),
            ),
        }
    }

    fn failed(&mut self, error: impl std::fmt::Display) -> Event {
        tracing::error!(run_id = %self.run_id, error = %error, "event stream failed");
        self.finished = true;
        Event::default()
            .event("error")
            .data(json!({"detail": "Internal server error", "code": "server_error"}).to_string())
    }

    /// The last event of a stream that reached its lifetime: the reconnection delay, and why.
    fn expired(&mut self) -> Event {
        self.finished = true;
        Event::default()
            .retry(RECONNECT_AFTER)
            .comment("stream lifetime reached; reconnect with Last-Event-ID")
    }

    async fn next(&mut self) -> Option<Event> {
        loop {
            if self.finished {
                return None;
            }
            if Instant::now() >= self.deadline {
                return Some(self.expired());
            }
            if let Some(record) = self.pending.pop_front() {
                self.after = record.sequence;
                return Some(self.render(record));
            }
            let store = self.state.shelf.engine.store();
            match store.events(&self.run_id, self.after, STREAM_PAGE).await {
                Ok(events) if !events.is_empty() => {
                    self.pending.extend(events);
                    continue;
                }
                Ok(_) => {}
                Err(e) => return Some(self.failed(e)),
            }
            if let Some(status) = self.terminal.take() {
                self.finished = true;
                return Some(
                    Event::default()
                        .event("done")
                        .data(json!({"run_id": self.run_id, "status": status}).to_string()),
                );
            }
            match self.state.shelf.run(&self.run_id).await {
                Ok(run) if run.status.is_terminal() => {
                    // Read once more: events committed before the terminal status are
                    // visible now, and must precede `done`.
                    self.terminal = Some(run.status.as_str().to_string());
                    continue;
                }
                Ok(_) => {}
                Err(AppError::NotFound(_)) => {
                    // The run's document was deleted while it was followed.
                    self.finished = true;
                    return Some(Event::default().event("error").data(
                        json!({"detail": "Run not found", "code": "not_found"}).to_string(),
                    ));
                }
                Err(e) => return Some(self.failed(e)),
            }
            tokio::select! {
                () = self.follower.changed() => {}
                () = tokio::time::sleep(self.state.options.sse_poll) => {}
                () = tokio::time::sleep_until(self.deadline) => return Some(self.expired()),
                () = self.state.shutdown.cancelled() => return None,
            }
        }
    }
}
