//! One module per `shelf` command.

pub mod admin;
pub mod api;
pub mod export;
pub mod import;
pub mod migrate;
pub mod okf;
pub mod pages;
pub mod pipeline;
pub mod process;
pub mod runs;
pub mod search;
pub mod worker;

use shelf_app::{Settings, Shelf};

use crate::output::{EXIT_USAGE, Failure};

pub fn settings(json: bool) -> Result<Settings, Failure> {
    Settings::from_process_env().map_err(|e| Failure {
        detail: e.to_string(),
        code: "invalid_configuration".into(),
        exit: EXIT_USAGE,
        json,
    })
}

/// Settings, logging and an opened Shelf for a one-shot command (migrations applied).
pub async fn open(json: bool) -> Result<Shelf, Failure> {
    let settings = settings(json)?;
    crate::logging::init(&settings, true, json)?;
    Shelf::open_migrating(settings)
        .await
        .map_err(|e| Failure::from_app(e, json))
}
