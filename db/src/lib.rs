//! Shelf's storage layer, below every crate that keeps rows: where the database is and how to
//! open it (`DatabaseTarget`, `connect_target`), one SQL text for SQLite and PostgreSQL
//! (`sql::SqlExt`), the one write API (`Database::write`, on the SQLite writer thread or the
//! pool), the process's write gate (`begin_write`), what an error means (busy, transient,
//! damaged, full), the pieces of SQL a table's owner hands other crates (`SqlFragment`), and
//! database passwords kept out of every text (`secrets`). It knows no table.

mod connect;
mod failure;
mod fragment;
mod gate;
pub mod secrets;
pub mod sql;
mod write;
mod writer;

pub use connect::{BUSY_TIMEOUT, DatabaseTarget, connect, connect_target};
pub use failure::*;
pub use fragment::SqlFragment;
pub use gate::{WriteTxn, begin_write};
pub use write::{Database, Row, Tx};
