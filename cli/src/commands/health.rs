//! `shelf health`: asks a running API for `GET /health` and exits 0 only on `200` with
//! `{"status": "healthy"}`. The container's HEALTHCHECK uses it, so the image needs no curl.

use crate::output::outln;
use std::process::ExitCode;
use std::time::Duration;

use crate::CliResult;
use crate::output::{EXIT_FAILED, Failure};

#[derive(clap::Args)]
pub struct Args {
    /// The URL to ask (default: http://127.0.0.1:SHELF_API_PORT/health).
    #[arg(long)]
    url: Option<String>,
    /// Give up after this many seconds.
    #[arg(long, default_value_t = 5)]
    timeout: u64,
}

fn unhealthy(detail: String) -> Failure {
    Failure::new(detail, "unhealthy", EXIT_FAILED)
}

pub async fn run(args: Args) -> CliResult {
    let url = match args.url {
        Some(url) => url,
        None => format!(
            "http://127.0.0.1:{}/health",
            super::settings(false)?.api.port
        ),
    };
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(args.timeout.max(1)))
        .build()
        .map_err(|e| unhealthy(format!("cannot build an HTTP client: {e}")))?;
    let response = client
        .get(&url)
        .send()
        .await
        .map_err(|e| unhealthy(format!("{url}: {e}")))?;
    let status = response.status();
    let body: serde_json::Value = response
        .json()
        .await
        .map_err(|e| unhealthy(format!("{url}: answered {status} without JSON: {e}")))?;
    if status.is_success() && body["status"] == "healthy" {
        outln!("healthy");
        Ok(ExitCode::SUCCESS)
    } else {
        Err(unhealthy(format!("{url}: answered {status}: {body}")))
    }
}
