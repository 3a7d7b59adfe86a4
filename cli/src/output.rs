//! Printing results for people or, with `--json`, for machines; errors as `{detail, code}`;
//! exit codes: 0 success, 1 the work failed, 2 bad usage or configuration, 3 not found.

use std::process::ExitCode;

use serde::Serialize;
use shelf_app::AppError;

pub const EXIT_FAILED: u8 = 1;
pub const EXIT_USAGE: u8 = 2;
pub const EXIT_NOT_FOUND: u8 = 3;

/// A command that did not succeed: what to tell the user and how to exit.
#[derive(Debug)]
pub struct Failure {
    pub detail: String,
    pub code: String,
    pub exit: u8,
    pub json: bool,
}

impl Failure {
    pub fn new(detail: impl Into<String>, code: &str, exit: u8) -> Self {
        Failure {
            detail: detail.into(),
            code: code.to_string(),
            exit,
            json: false,
        }
    }

    pub fn from_app(error: AppError, json: bool) -> Self {
        let exit = match error.code() {
            "not_found" | "pipeline_not_found" => EXIT_NOT_FOUND,
            "invalid_configuration"
            | "invalid_pipeline"
            | "bad_request"
            | "schema_mismatch"
            | "postgres_unsupported" => EXIT_USAGE,
            _ => EXIT_FAILED,
        };
        Failure {
            detail: error.to_string(),
            code: error.code().to_string(),
            exit,
            json,
        }
    }

    pub fn report(self) -> ExitCode {
        if self.json {
            let body = serde_json::json!({ "detail": self.detail, "code": self.code });
            println!("{body}");
        } else {
            eprintln!("error: {}", self.detail);
        }
        ExitCode::from(self.exit)
    }
}

/// Attaches the `--json` choice to errors on their way out.
pub trait OrFail<T> {
    fn or_fail(self, json: bool) -> Result<T, Failure>;
}

impl<T> OrFail<T> for Result<T, AppError> {
    fn or_fail(self, json: bool) -> Result<T, Failure> {
        self.map_err(|e| Failure::from_app(e, json))
    }
}

pub fn print_json<T: Serialize>(value: &T) {
    match serde_json::to_string_pretty(value) {
        Ok(text) => println!("{text}"),
        Err(e) => eprintln!("error: cannot encode output: {e}"),
    }
}
