//! One module per `shelf` command.

pub mod admin;
pub mod api;
pub mod export;
pub mod health;
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
    crate::logging::init(&settings, true);
    Shelf::open_migrating(settings)
        .await
        .map_err(|e| Failure::from_app(e, json))
}

/// The shared lock a long-running service holds on its data directory for as long as it runs,
/// so that a restore refuses to swap the database under it (`shelf_app::admin::lock`).
pub fn hold_data_dir(settings: &Settings) -> Result<shelf_app::admin::lock::DataDirLock, Failure> {
    shelf_app::admin::lock::hold_shared(&settings.data_dir)
        .map_err(|e| Failure::from_app(e.into(), false))
}
