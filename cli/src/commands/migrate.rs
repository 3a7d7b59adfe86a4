//! `shelf migrate`: apply pending migrations (services also apply them at start; this runs them
//! ahead of an upgrade, or reports the schema state).

use crate::output::outln;
use std::process::ExitCode;

use shelf_app::db;

use crate::CliResult;
use crate::output::{OrFail, print_json};

#[derive(clap::Args)]
pub struct Args {
    /// Print the schema status as JSON.
    #[arg(long)]
    json: bool,
}

pub async fn run(args: Args) -> CliResult {
    let settings = super::settings(args.json)?;
    crate::logging::init(&settings, true, args.json)?;
    // Migrations write: never under a restore, and no restore under them.
    super::hold_for_process(&settings, args.json)?;
    let conn = db::connect_settings(&settings, 2)
        .await
        .or_fail(args.json)?;
    let migrated = db::migrate(&conn).await.or_fail(args.json)?;
    if args.json {
        print_json(&serde_json::json!({
            "database": settings.database_display(),
            "applied_now": migrated.applied_now,
            "applied_migrations": migrated.status.applied,
        }));
    } else if migrated.applied_now.is_empty() {
        outln!(
            "database {} is up to date ({} migrations)",
            settings.database_display(),
            migrated.status.applied.len()
        );
    } else {
        for name in &migrated.applied_now {
            outln!("applied {name}");
        }
        outln!("database {} is up to date", settings.database_display());
    }
    Ok(ExitCode::SUCCESS)
}
