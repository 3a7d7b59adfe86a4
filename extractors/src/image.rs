//! Raster images (PNG, JPEG, TIFF with all its pages, BMP, GIF, WebP): no text layer, so the
//! extraction lists their pages for the `ocr` stage and carries no text.

use crate::detect::image_kind;
use crate::{Control, ExtractError, Extraction, Input, Limits, Metadata, Page};

/// The most TIFF directories (pages) walked; a cycle in the directory chain stops there too.
const MAX_TIFF_PAGES: u32 = 10_000;

pub fn extract(
    input: Input<'_>,
    _limits: &Limits,
    control: &Control,
) -> Result<Extraction, ExtractError> {
    let Some(kind) = image_kind(input.bytes) else {
        return Err(ExtractError::unsupported(format!(
            "the .{} file is not a PNG, JPEG, TIFF, BMP, GIF or WebP image",
            input.extension
        )));
    };
    let pages = if kind == "TIFF" {
        tiff_page_count(input.bytes, control)?
    } else {
        1
    };
    Ok(Extraction {
        pages: (1..=pages)
            .map(|number| Page {
                number,
                text: String::new(),
                has_text_layer: false,
            })
            .collect(),
        metadata: Metadata {
            page_count: Some(pages),
            ..Metadata::default()
        },
        ..Extraction::default()
    })
}

/// Counts a TIFF's image file directories by following their chain.
fn tiff_page_count(bytes: &[u8], control: &Control) -> Result<u32, ExtractError> {
    let little = bytes.starts_with(b"II");
    let u16_at = |at: usize| -> Option<u16> {
        let b: [u8; 2] = bytes.get(at..at + 2)?.try_into().ok()?;
        Some(if little {
            u16::from_le_bytes(b)
        } else {
            u16::from_be_bytes(b)
        })
    };
    let u32_at = |at: usize| -> Option<u32> {
        let b: [u8; 4] = bytes.get(at..at + 4)?.try_into().ok()?;
        Some(if little {
            u32::from_le_bytes(b)
        } else {
            u32::from_be_bytes(b)
        })
    };
    let malformed = || ExtractError::malformed("the TIFF file's directory chain is damaged");
    let mut offset = u32_at(4).ok_or_else(malformed)? as usize;
    let mut pages = 0u32;
    let mut seen = std::collections::HashSet::new();
    while offset != 0 {
        control.check()?;
        if !seen.insert(offset) || pages >= MAX_TIFF_PAGES {
            break;
        }
        let entries = u16_at(offset).ok_or_else(malformed)? as usize;
        pages += 1;
        offset = u32_at(offset + 2 + entries * 12).ok_or_else(malformed)? as usize;
    }
    if pages == 0 {
        return Err(ExtractError::malformed("the TIFF file has no image"));
    }
    Ok(pages)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn run(bytes: &[u8], ext: &str) -> Result<Extraction, ExtractError> {
        extract(
            Input {
                path: Path::new("x"),
                bytes,
                extension: ext,
            },
            &Limits::default(),
            &Control::default(),
        )
    }

    #[test]
    fn a_png_is_one_page_needing_ocr() {
        let extraction = run(b"\x89PNG\r\n\x1a\n....", "png").unwrap();
        assert_eq!(extraction.pages_needing_ocr(), vec![1]);
        assert!(extraction.markdown.is_empty());
    }

    #[test]
    fn tiff_pages_are_counted_and_cycles_stop() {
        // Two directories of zero entries: at 8 (next 14) and 14 (next 8: a cycle).
        let mut tiff = b"II*\0\x08\0\0\0".to_vec();
        tiff.extend([0, 0, 14, 0, 0, 0]);
        tiff.extend([0, 0, 8, 0, 0, 0]);
        assert_eq!(run(&tiff, "tif").unwrap().pages.len(), 2);
        assert_eq!(
            run(b"II*\0\xff\xff\0\0", "tif").unwrap_err().code,
            "malformed_document"
        );
        assert_eq!(
            run(b"hello", "png").unwrap_err().code,
            "unsupported_file_type"
        );
    }
}
