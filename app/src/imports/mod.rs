//! Imports of local files and directories, for `POST /imports` and `shelf import` alike:
//! validated requests (`request`), path rules (`paths`), outputs (`convert`), the import
//! report and its atomic writes (`manifest`), page manifests (`page_manifest`), the import
//! loop (`run`) and the hot folder (`watch`). See docs/imports.md.

pub mod convert;
pub mod error;
pub mod manifest;
pub mod page_manifest;
pub mod paths;
pub mod request;
pub mod run;
pub mod watch;

pub use error::ImportError;
pub use manifest::{FileRecord, FileStatus, ImportReport, ReportStatus, StatusPage, Summary};
pub use page_manifest::{PageManifest, PageProgress};
pub use paths::Boundary;
pub use request::ImportRequest;
pub use run::{ImportLimits, Progress};
