//! Extractor of universal files (being built).

use crate::{Control, ExtractError, Extraction, Input, Limits};

pub fn extract(
    _input: Input<'_>,
    _limits: &Limits,
    _control: &Control,
) -> Result<Extraction, ExtractError> {
    Err(ExtractError::unsupported("this extractor is not built yet"))
}
