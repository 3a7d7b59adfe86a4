//! The JSON shapes of run events: records, pages of lines or records, and one server-sent
//! event as a client parses it.

use serde::Serialize;
use shelf_engine::EventRecord;
use utoipa::ToSchema;

/// One run event.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct EventRecordOut {
    /// Gap-free from 1 within a run; also the SSE `id`.
    pub sequence: i64,
    pub stage: String,
    pub kind: String,
    pub message: String,
    pub created_at: String,
}

impl From<EventRecord> for EventRecordOut {
    fn from(e: EventRecord) -> Self {
        EventRecordOut {
            sequence: e.sequence,
            stage: e.stage,
            kind: e.kind,
            message: e.message,
            created_at: e.created_at,
        }
    }
}

/// The text line `/events` and `/events/stream` show for an event.
pub fn event_line(e: &EventRecord) -> String {
    format!("[{}] {}: {}", e.created_at, e.stage, e.message)
}

/// `GET /runs/{id}/events`: event lines.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct EventLines {
    pub events: Vec<String>,
    pub limit: u64,
    pub offset: u64,
    /// The run's status when the page was read (a terminal status means no more events).
    pub run_status: String,
}

/// `GET /runs/{id}/events/records`: structured events.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct EventRecords {
    pub events: Vec<EventRecordOut>,
    pub limit: u64,
    pub offset: u64,
    pub run_status: String,
}

/// One server-sent event as a client parses it from the stream: `event` (absent for the
/// plain `message` events of the line stream, `run-event` or `done` otherwise), `id` (the run
/// event's sequence, for `Last-Event-ID`) and `data` (a line, or a JSON record).
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct SseEvent {
    pub data: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub event: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::mirror::{assert_mirrors, keys};

    /// The same fields: the mirror exists because the engine stays free of schema derives.
    #[test]
    fn event_record_out_mirrors_event_record() {
        let record = EventRecord {
            sequence: 1,
            stage: "extract".into(),
            kind: "info".into(),
            message: "started".into(),
            created_at: "2026-11-21T10:00:00.000Z".into(),
        };
        assert_mirrors(
            "EventRecord",
            keys(&record),
            keys(&EventRecordOut::from(record.clone())),
            &[],
            &[],
        );
    }
}
