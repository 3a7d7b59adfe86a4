//! Open Knowledge Format (OKF v0.1) bundles: a concept file per processed document at its
//! Dewey path, an `index.md` in every folder, the root's carrying `okf_version`. `render` is
//! pure; `walk` reads the database a page at a time, so neither front end ever holds the
//! texts of a whole library. Layout and rules: docs/okf.md.

pub mod render;
pub mod walk;

pub use render::{ConceptInput, IndexBuilder, RelatedLink, concept_dir, folders, slugify};
pub use walk::{OkfBundle, OkfConcept, OkfFile, OkfFilter, OkfSkipped, OkfWalk, SkipReason};

/// The Open Knowledge Format version Shelf writes (also in `/version`).
pub const OKF_VERSION: &str = "0.1";
