//! `shelf pipeline check FILE`, `shelf pipeline graph NAME`, `shelf pipeline list`.

use crate::output::{errln, out, outln};
use std::path::PathBuf;
use std::process::ExitCode;

use shelf_engine::pipeline::GraphFormat;

use crate::CliResult;
use crate::output::{OrFail, print_json};

#[derive(clap::Subcommand)]
pub enum Command {
    /// Validate a pipeline file; problems are printed as FILE:LINE:COLUMN: message.
    Check {
        file: PathBuf,
        #[arg(long)]
        json: bool,
    },
    /// Draw a pipeline's stage graph.
    Graph {
        /// A pipeline name (SHELF_PIPELINES_DIR/<name>.yaml or built in) or a file path.
        name: String,
        #[arg(long, default_value = "text", value_parser = ["text", "mermaid", "dot"])]
        format: String,
    },
    /// List the pipelines available.
    List {
        #[arg(long)]
        json: bool,
    },
}

pub async fn run(command: Command) -> CliResult {
    // Checking pipelines needs the stage registry, not a database; a scratch one keeps this
    // command free of side effects on the real data directory.
    let scratch = tempfile::tempdir().map_err(|e| {
        crate::output::Failure::new(
            format!("cannot create a scratch directory: {e}"),
            "server_error",
            1,
        )
    })?;
    let json = matches!(
        command,
        Command::Check { json: true, .. } | Command::List { json: true }
    );
    let mut settings = super::settings(json)?;
    crate::logging::init(&settings, true, json)?;
    settings.storage.data_dir = scratch.path().to_path_buf();
    settings.storage.database_path = scratch.path().join("scratch.sqlite");
    // A check needs no shared database: never migrate or touch the configured PostgreSQL.
    settings.storage.database_url = None;
    let shelf = shelf_app::Shelf::open(settings).await.or_fail(json)?;
    match command {
        Command::Check { file, json } => match shelf.check_pipeline_file(&file) {
            Ok(p) => {
                if json {
                    print_json(&serde_json::json!({
                        "file": file, "valid": true, "sha256": p.sha256,
                        "stages": p.stages.iter().map(|s| &s.name).collect::<Vec<_>>(),
                    }));
                } else {
                    outln!(
                        "{}: ok ({} stages, sha256 {})",
                        file.display(),
                        p.stages.len(),
                        p.sha256
                    );
                }
                Ok(ExitCode::SUCCESS)
            }
            Err(shelf_app::AppError::Pipeline(shelf_engine::PipelineError::Invalid {
                file,
                diagnostics,
            })) => {
                if json {
                    print_json(&serde_json::json!({
                        "file": file, "valid": false, "code": "invalid_pipeline", "diagnostics": diagnostics,
                    }));
                } else {
                    for d in &diagnostics {
                        errln!("{file}:{}:{}: {}", d.line, d.column, d.message);
                    }
                }
                Ok(ExitCode::from(crate::output::EXIT_FAILED))
            }
            Err(e) => Err(crate::output::Failure::from_app(e, json)),
        },
        Command::Graph { name, format } => {
            let path = PathBuf::from(&name);
            let pipeline = if path.is_file() {
                shelf.check_pipeline_file(&path)
            } else {
                shelf.load_pipeline(&name)
            }
            .or_fail(false)?;
            let format = GraphFormat::parse(&format).unwrap_or(GraphFormat::Text);
            out!("{}", pipeline.render(format));
            Ok(ExitCode::SUCCESS)
        }
        Command::List { json } => {
            let names = shelf_app::pipelines::names(shelf.settings.pipeline.dir.as_deref());
            if json {
                print_json(&names);
            } else {
                for n in names {
                    outln!("{n}");
                }
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}
