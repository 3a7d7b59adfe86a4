//! Lingering on refused requests. When a request is refused before its body was read (a
//! refused filename, a denied credential, an over-limit upload), closing the connection with
//! unread bytes in the socket makes the kernel reset it, and clients often lose the error
//! response with it. So after an error response, whatever is left of the body is read and
//! dropped, bounded in bytes and time, before the response goes out.

use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::{Body, Bytes, HttpBody};
use axum::extract::Request;
use axum::http::header;
use axum::middleware::Next;
use axum::response::Response;
use http_body::{Frame, SizeHint};

/// The most bytes read after a refusal; past it the connection is closed.
pub const LINGER_BYTES: u64 = 64 << 20;
/// The longest a refusal waits for the rest of a body.
pub const LINGER_TIME: Duration = Duration::from_secs(5);

/// A body whose inner stream stays reachable after the handler dropped it.
struct Shared(Arc<Mutex<Body>>);

fn poll_shared(
    body: &Mutex<Body>,
    cx: &mut Context<'_>,
) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
    // Only this request's handler and then this middleware touch the lock, one after the other.
    let mut inner = body.lock().unwrap_or_else(|p| p.into_inner());
    Pin::new(&mut *inner).poll_frame(cx)
}

impl HttpBody for Shared {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        poll_shared(&self.0, cx)
    }

    fn is_end_stream(&self) -> bool {
        self.0.lock().map(|b| b.is_end_stream()).unwrap_or(false)
    }

    fn size_hint(&self) -> SizeHint {
        self.0.lock().map(|b| b.size_hint()).unwrap_or_default()
    }
}

/// Reads and drops what is left of a body, within [`LINGER_BYTES`] and [`LINGER_TIME`].
async fn drain(body: Arc<Mutex<Body>>) {
    let mut budget = LINGER_BYTES;
    let read = async {
        loop {
            let frame = std::future::poll_fn(|cx| poll_shared(&body, cx)).await;
            match frame {
                Some(Ok(frame)) => {
                    let len = frame.data_ref().map_or(0, |d| d.len() as u64);
                    budget = budget.saturating_sub(len);
                    if budget == 0 {
                        return;
                    }
                }
                Some(Err(_)) | None => return,
            }
        }
    };
    let _ = tokio::time::timeout(LINGER_TIME, read).await;
}

/// The middleware.
pub async fn linger_on_error(req: Request, next: Next) -> Response {
    // A client waiting for `100 Continue` has sent nothing yet: there is nothing to drain, and
    // polling the body would invite it to start sending.
    let awaits_continue = req
        .headers()
        .get(header::EXPECT)
        .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"100-continue"));
    let (parts, body) = req.into_parts();
    if awaits_continue || body.is_end_stream() {
        return next.run(Request::from_parts(parts, body)).await;
    }
    let shared = Arc::new(Mutex::new(body));
    let req = Request::from_parts(parts, Body::new(Shared(shared.clone())));
    let response = next.run(req).await;
    if response.status().is_client_error() || response.status().is_server_error() {
        drain(shared).await;
    }
    response
}
