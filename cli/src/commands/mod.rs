//! One module per `shelf` command.

pub mod admin;
pub mod api;
pub mod delete;
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

use std::io::Write;
use std::net::SocketAddr;

use shelf_app::{Settings, Shelf};

use crate::output::{EXIT_FAILED, EXIT_USAGE, Failure};

/// A failure to bind a listener: configuration refusals are usage errors (exit 2).
pub fn bind_failure(e: shelf_server::BindError) -> Failure {
    let exit = if e.is_configuration() {
        EXIT_USAGE
    } else {
        EXIT_FAILED
    };
    Failure::new(e.to_string(), "bind_failed", exit)
}

/// The language-model check before model work starts (`Shelf::check_model`): a server that
/// does not answer, refuses the key or lacks the model stops the command here, with the
/// provider's code and a message naming the setting; configuration is a usage error (exit 2).
pub async fn check_model(shelf: &Shelf, json: bool) -> Result<(), Failure> {
    shelf.check_model().await.map(drop).map_err(|e| Failure {
        exit: match e.code {
            "provider_unreachable" | "provider_timeout" | "provider_unavailable" => EXIT_FAILED,
            _ => EXIT_USAGE,
        },
        code: e.code.to_string(),
        detail: e.message,
        json,
    })
}

/// Logs and prints the one stdout line of a listener, `{what} listening on http://ADDR`,
/// which scripts and tests read for the port when port 0 picked one; logs go to stderr.
pub fn announce(what: &str, addr: std::io::Result<SocketAddr>) -> Result<SocketAddr, Failure> {
    let addr = addr.map_err(|e| {
        Failure::new(
            format!("cannot read the bound address: {e}"),
            "bind_failed",
            EXIT_FAILED,
        )
    })?;
    tracing::info!(%addr, listener = what, "listening");
    let mut stdout = std::io::stdout().lock();
    let _ = writeln!(stdout, "{what} listening on http://{addr}");
    let _ = stdout.flush();
    Ok(addr)
}

pub fn settings(json: bool) -> Result<Settings, Failure> {
    Settings::from_process_env().map_err(|e| Failure {
        detail: e.to_string(),
        code: "invalid_configuration".into(),
        exit: EXIT_USAGE,
        json,
    })
}

/// Settings, logging and an opened Shelf for a one-shot command (migrations applied), with the
/// data directory's shared lock held until the process exits: opening applies migrations, and
/// most commands write (`import`, `process`, `delete`, run cancel and retry...), so none may
/// run while a restore swaps the database, and no restore may start while one runs.
pub async fn open(json: bool) -> Result<Shelf, Failure> {
    let settings = settings(json)?;
    crate::logging::init(&settings, true, json)?;
    hold_for_process(&settings, json)?;
    Shelf::open(settings)
        .await
        .map_err(|e| Failure::from_app(e, json))
}

/// The shared lock a long-running service holds on its data directory for as long as it runs,
/// so that a restore refuses to swap the database under it (`shelf_app::admin::lock`).
pub fn hold_data_dir(settings: &Settings) -> Result<shelf_app::admin::lock::DataDirLock, Failure> {
    shelf_app::admin::lock::hold_shared(&settings.storage.data_dir)
        .map_err(|e| Failure::from_app(e.into(), false))
}

/// The lock of [`hold_for_process`], never dropped: the kernel releases it when the process
/// ends, however it ends.
static PROCESS_LOCK: std::sync::OnceLock<shelf_app::admin::lock::DataDirLock> =
    std::sync::OnceLock::new();

/// Takes the data directory's shared lock for the rest of the process (a second call is a
/// no-op): for one-shot commands, whose work and background tasks may outlive any one value.
/// Refused with `restore_in_progress` while a restore holds the directory.
pub fn hold_for_process(settings: &Settings, json: bool) -> Result<(), Failure> {
    if PROCESS_LOCK.get().is_some() {
        return Ok(());
    }
    let lock = shelf_app::admin::lock::hold_shared(&settings.storage.data_dir)
        .map_err(|e| Failure::from_app(e.into(), json))?;
    // Another thread may have won the race; its lock is as good, and this one drops.
    let _ = PROCESS_LOCK.set(lock);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_one_shot_command_holds_the_lock_until_the_process_ends() {
        let dir = tempfile::tempdir().expect("tempdir");
        let vars = [(
            "SHELF_DATA_DIR".to_string(),
            dir.path().display().to_string(),
        )];
        let settings = Settings::from_vars(&vars.into_iter().collect()).expect("settings");
        hold_for_process(&settings, true).expect("first");
        hold_for_process(&settings, true).expect("a second call is a no-op");
        let restore = shelf_app::admin::lock::hold_exclusive(dir.path(), "db-restore");
        assert_eq!(restore.expect_err("held").code(), "database_in_use");
        // Another holder (a second command on the same directory) still shares it.
        assert!(shelf_app::admin::lock::hold_shared(dir.path()).is_ok());
    }
}
