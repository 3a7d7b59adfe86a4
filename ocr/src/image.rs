//! Page images: the format from the first bytes, the dimensions from the header (checked
//! against the pixel cap before a pixel is decoded), decoding with Leptonica from memory, and
//! the owned Leptonica image (`Pix`) that every other module passes around.

use std::ptr::NonNull;
use std::sync::Once;

use leptess::capi as lept;

use crate::OcrError;

/// The raster formats OCR reads. Anything else is `image_unreadable`, even when Leptonica
/// could read it (PNM, JPEG 2000, its own formats): the accepted list is the documented one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Format {
    Png,
    Jpeg,
    Tiff,
    Bmp,
    Gif,
    WebP,
}

/// The format of `bytes` from its signature.
pub(crate) fn sniff(bytes: &[u8]) -> Option<Format> {
    let starts = |sig: &[u8]| bytes.starts_with(sig);
    if starts(b"\x89PNG\r\n\x1a\n") {
        Some(Format::Png)
    } else if starts(&[0xFF, 0xD8, 0xFF]) {
        Some(Format::Jpeg)
    } else if starts(b"II*\0") || starts(b"MM\0*") || starts(b"II+\0") || starts(b"MM\0+") {
        Some(Format::Tiff)
    } else if starts(b"BM") {
        Some(Format::Bmp)
    } else if starts(b"GIF87a") || starts(b"GIF89a") {
        Some(Format::Gif)
    } else if bytes.len() >= 12 && starts(b"RIFF") && &bytes[8..12] == b"WEBP" {
        Some(Format::WebP)
    } else {
        None
    }
}

/// An owned Leptonica image, destroyed on drop.
pub(crate) struct Pix(NonNull<lept::Pix>);

// SAFETY: a Pix is plain memory owned by this value alone (we never clone its reference
// count), so moving it to another thread is sound.
unsafe impl Send for Pix {}

impl Pix {
    /// Takes ownership of a pointer Leptonica returned (null: `None`).
    fn from_raw(raw: *mut lept::Pix) -> Option<Pix> {
        NonNull::new(raw).map(Pix)
    }

    pub(crate) fn as_ptr(&self) -> *mut lept::Pix {
        self.0.as_ptr()
    }

    pub(crate) fn width(&self) -> u32 {
        // SAFETY: the pointer is a live Pix owned by self.
        let w = unsafe { lept::pixGetWidth(self.as_ptr()) };
        u32::try_from(w).unwrap_or(0)
    }

    pub(crate) fn height(&self) -> u32 {
        // SAFETY: the pointer is a live Pix owned by self.
        let h = unsafe { lept::pixGetHeight(self.as_ptr()) };
        u32::try_from(h).unwrap_or(0)
    }

    /// The resolution stored in the file (0 when none).
    pub(crate) fn resolution(&self) -> u32 {
        // SAFETY: the pointer is a live Pix owned by self.
        let (x, y) = unsafe {
            (
                lept::pixGetXRes(self.as_ptr()),
                lept::pixGetYRes(self.as_ptr()),
            )
        };
        u32::try_from(x.max(y)).unwrap_or(0)
    }

    /// This image turned `degrees` clockwise (0, 90, 180, 270).
    pub(crate) fn rotated(&self, degrees: u32) -> Result<Pix, OcrError> {
        let quads = i32::try_from((degrees / 90) % 4).unwrap_or(0);
        // SAFETY: pixRotateOrth reads the live source and returns a new Pix (or a new
        // reference when quads is 0, which Pix's drop releases like any other).
        let raw = unsafe { lept::pixRotateOrth(self.as_ptr(), quads) };
        Pix::from_raw(raw).ok_or_else(|| OcrError::failed("cannot rotate the page image"))
    }

    /// This image scaled by `factor` (under 1 shrinks it); 1-bit pages come out grayscale.
    pub(crate) fn scaled(&self, factor: f32) -> Result<Pix, OcrError> {
        // SAFETY: pixScale reads the live source and returns a new Pix or null.
        let raw = unsafe { lept::pixScale(self.as_ptr(), factor, factor) };
        Pix::from_raw(raw).ok_or_else(|| OcrError::failed("cannot scale the page image"))
    }

    /// The rows `top..top + height` of this image (clamped to it), as a new image.
    pub(crate) fn rows(&self, top: u32, height: u32) -> Result<Pix, OcrError> {
        let to_i32 = |v: u32| i32::try_from(v).unwrap_or(i32::MAX);
        // SAFETY: boxCreate returns a new box or null; pixClipRectangle reads the live source
        // and the box, clamps the box to the image and returns a new Pix or null; the box is
        // destroyed once.
        let raw = unsafe {
            let mut rect = lept::boxCreate(0, to_i32(top), to_i32(self.width()), to_i32(height));
            if rect.is_null() {
                return Err(OcrError::failed("cannot crop the page image"));
            }
            let clipped = lept::pixClipRectangle(self.as_ptr(), rect, std::ptr::null_mut());
            lept::boxDestroy(&mut rect);
            clipped
        };
        Pix::from_raw(raw).ok_or_else(|| OcrError::failed("cannot crop the page image"))
    }

    /// How many dark pixels (under half intensity) each row holds, top to bottom.
    pub(crate) fn dark_pixels_by_row(&self) -> Result<Vec<u32>, OcrError> {
        let failed = || OcrError::failed("cannot measure the page image's rows");
        // SAFETY: pixConvertTo1 reads the live source and returns a new 1-bit Pix (dark = 1)
        // or null; pixCountPixelsByRow reads it and returns a new NUMA or null; both are
        // destroyed once, after the counts are copied out.
        unsafe {
            let mut binary = lept::pixConvertTo1(self.as_ptr(), 128);
            if binary.is_null() {
                return Err(failed());
            }
            let mut counts = lept::pixCountPixelsByRow(binary, std::ptr::null_mut());
            lept::pixDestroy(&mut binary);
            if counts.is_null() {
                return Err(failed());
            }
            let n = lept::numaGetCount(counts).max(0);
            let mut out = Vec::with_capacity(n as usize);
            for i in 0..n {
                let mut v = 0;
                lept::numaGetIValue(counts, i, &mut v);
                out.push(u32::try_from(v).unwrap_or(0));
            }
            lept::numaDestroy(&mut counts);
            Ok(out)
        }
    }

    /// This image as 8-bit gray scaled to exactly `width`×`height`, row by row (for comparing
    /// two renderings of a page at thumbnail size).
    pub(crate) fn gray_thumbnail(&self, width: u32, height: u32) -> Result<Vec<u8>, OcrError> {
        let failed = || OcrError::failed("cannot scale the page image");
        let (w, h) = (
            i32::try_from(width).map_err(|_| failed())?,
            i32::try_from(height).map_err(|_| failed())?,
        );
        // SAFETY: each Leptonica call reads a live Pix and returns a new one or null; every
        // Pix made here is destroyed once; pixGetPixel reads inside the image's bounds.
        unsafe {
            let mut gray = lept::pixConvertTo8(self.as_ptr(), 0);
            if gray.is_null() {
                return Err(failed());
            }
            let mut small = lept::pixScaleToSize(gray, w, h);
            lept::pixDestroy(&mut gray);
            if small.is_null() {
                return Err(failed());
            }
            if lept::pixGetWidth(small) != w || lept::pixGetHeight(small) != h {
                lept::pixDestroy(&mut small);
                return Err(failed());
            }
            let mut out = Vec::with_capacity((width as usize) * (height as usize));
            for y in 0..h {
                for x in 0..w {
                    let mut v: u32 = 0;
                    lept::pixGetPixel(small, x, y, &mut v);
                    out.push(u8::try_from(v).unwrap_or(u8::MAX));
                }
            }
            lept::pixDestroy(&mut small);
            Ok(out)
        }
    }

    /// Records `dpi` as the image's resolution.
    pub(crate) fn set_resolution(&mut self, dpi: u32) {
        let dpi = i32::try_from(dpi).unwrap_or(0);
        // SAFETY: the pointer is a live Pix owned by self.
        unsafe { lept::pixSetResolution(self.as_ptr(), dpi, dpi) };
    }

    /// The image as PNG bytes.
    pub(crate) fn to_png(&self) -> Result<Vec<u8>, OcrError> {
        let mut data: *mut u8 = std::ptr::null_mut();
        let mut size: usize = 0;
        // SAFETY: pixWriteMem allocates `data` with Leptonica's allocator and sets `size`; the
        // source is a live Pix.
        let failed =
            unsafe { lept::pixWriteMem(&mut data, &mut size, self.as_ptr(), lept::IFF_PNG as i32) };
        if failed != 0 || data.is_null() {
            return Err(OcrError::failed("cannot encode the page image as PNG"));
        }
        // SAFETY: on success `data` points to `size` initialized bytes that we copy, then free
        // with Leptonica's own deallocator, exactly once.
        let png = unsafe {
            let png = std::slice::from_raw_parts(data, size).to_vec();
            lept::lept_free(data.cast());
            png
        };
        Ok(png)
    }
}

impl Drop for Pix {
    fn drop(&mut self) {
        let mut raw = self.0.as_ptr();
        // SAFETY: we own this reference; pixDestroy releases it and nulls our copy.
        unsafe { lept::pixDestroy(&mut raw) };
    }
}

/// Leptonica prints every failed read to standard error; a hostile upload would fill the
/// log with it. Our errors say what went wrong instead.
fn quiet_leptonica() {
    static QUIET: Once = Once::new();
    QUIET.call_once(|| {
        // SAFETY: setMsgSeverity only stores an integer in a Leptonica global.
        unsafe {
            lept::setMsgSeverity(lept::L_SEVERITY_NONE as i32);
        }
    });
}

fn unreadable(detail: impl Into<String>) -> OcrError {
    OcrError::new("image_unreadable", detail, false)
}

/// The width and height the header of page `index` declares, read without decoding pixels.
pub(crate) fn dimensions(bytes: &[u8], format: Format, index: u32) -> Result<(u64, u64), OcrError> {
    if format != Format::Tiff && index != 0 {
        return Err(unreadable(format!(
            "the image has one page; page {index} (0-based) does not exist"
        )));
    }
    match format {
        Format::Tiff => {
            let pages = tiff::pages(bytes).map_err(unreadable)?;
            let count = pages.len();
            let page = pages.get(index as usize).ok_or_else(|| {
                unreadable(format!(
                    "the TIFF has {count} page(s); page {index} (0-based) does not exist"
                ))
            })?;
            match (page.width, page.height) {
                (Some(w), Some(h)) => Ok((w, h)),
                _ => Err(unreadable("a TIFF page has no width or height")),
            }
        }
        Format::Png => {
            // libpng needs more than the header to read the header: read IHDR here.
            let field = |at: usize| {
                bytes
                    .get(at..at + 4)
                    .map(|b| u64::from(u32::from_be_bytes([b[0], b[1], b[2], b[3]])))
            };
            if bytes.get(12..16) != Some(b"IHDR".as_slice()) {
                return Err(unreadable("the PNG does not start with its header chunk"));
            }
            match (field(16), field(20)) {
                (Some(w), Some(h)) if w > 0 && h > 0 => Ok((w, h)),
                _ => Err(unreadable("the PNG header is truncated or empty")),
            }
        }
        Format::Gif => {
            // Leptonica decodes a whole GIF to read its header: read the screen size here.
            let w = bytes.get(6..8).map(|b| u16::from_le_bytes([b[0], b[1]]));
            let h = bytes.get(8..10).map(|b| u16::from_le_bytes([b[0], b[1]]));
            match (w, h) {
                (Some(w), Some(h)) => Ok((u64::from(w), u64::from(h))),
                _ => Err(unreadable("the GIF header is truncated")),
            }
        }
        _ => {
            // Leptonica decodes no pixels to read the header of these formats.
            header_size(bytes).ok_or_else(|| unreadable("the image header cannot be read"))
        }
    }
}

/// The pages of a raster file: the TIFF's page count, 1 for the other formats.
pub(crate) fn page_count(bytes: &[u8]) -> Result<u32, OcrError> {
    match sniff(bytes) {
        Some(Format::Tiff) => {
            let pages = tiff::pages(bytes).map_err(unreadable)?;
            Ok(u32::try_from(pages.len()).unwrap_or(u32::MAX))
        }
        Some(_) => Ok(1),
        None => Err(unreadable("not a PNG, JPEG, TIFF, BMP, GIF or WebP image")),
    }
}

/// Decodes page `index` of `bytes`, refusing images over `max_pixels` before decoding.
pub(crate) fn decode(bytes: &[u8], index: u32, max_pixels: u64) -> Result<Pix, OcrError> {
    let format =
        sniff(bytes).ok_or_else(|| unreadable("not a PNG, JPEG, TIFF, BMP, GIF or WebP image"))?;
    let (w, h) = dimensions(bytes, format, index)?;
    within_limit("the image", w, h, max_pixels)?;
    quiet_leptonica();
    let raw = if format == Format::Tiff {
        let n = i32::try_from(index).map_err(|_| unreadable("TIFF page index out of range"))?;
        // SAFETY: Leptonica reads at most `bytes.len()` bytes from the slice and returns a new
        // Pix or null.
        unsafe { lept::pixReadMemTiff(bytes.as_ptr(), bytes.len(), n) }
    } else {
        // SAFETY: as above.
        unsafe { lept::pixReadMem(bytes.as_ptr(), bytes.len()) }
    };
    let pix = Pix::from_raw(raw).ok_or_else(|| unreadable("the image is damaged or truncated"))?;
    // A header can lie about the size; the decoded image is what counts.
    if u64::from(pix.width()) * u64::from(pix.height()) > max_pixels {
        return Err(OcrError::new(
            "image_too_large",
            "the decoded image is over the pixel limit",
            false,
        ));
    }
    if pix.width() == 0 || pix.height() == 0 {
        return Err(unreadable("the image has no pixels"));
    }
    Ok(pix)
}

/// Refuses an image of `w`×`h` over `max_pixels` with `image_too_large` (`what` names it in
/// the detail), before anything is decoded.
fn within_limit(what: &str, w: u64, h: u64, max_pixels: u64) -> Result<(), OcrError> {
    let pixels = w.saturating_mul(h);
    if pixels > max_pixels {
        return Err(OcrError::new(
            "image_too_large",
            format!("{what} is {w}×{h} ({pixels} pixels); the limit is {max_pixels}"),
            false,
        ));
    }
    Ok(())
}

/// Width and height from Leptonica's reading of the image header, or `None` when it cannot
/// read one (or reads an empty size).
fn header_size(bytes: &[u8]) -> Option<(u64, u64)> {
    quiet_leptonica();
    let (mut fmt, mut w, mut h, mut bps, mut spp, mut cmap) = (0, 0, 0, 0, 0, 0);
    // SAFETY: Leptonica reads at most `bytes.len()` bytes from the slice and writes the six
    // integers we pass.
    let failed = unsafe {
        lept::pixReadHeaderMem(
            bytes.as_ptr(),
            bytes.len(),
            &mut fmt,
            &mut w,
            &mut h,
            &mut bps,
            &mut spp,
            &mut cmap,
        )
    };
    if failed != 0 || w <= 0 || h <= 0 {
        return None;
    }
    Some((w as u64, h as u64))
}

/// Decodes an image that poppler's `pdfimages` wrote: PNM (its default), or JPEG/PNG through
/// `decode`. PNM is accepted here only: uploads are held to the documented formats.
pub(crate) fn decode_extracted(bytes: &[u8], max_pixels: u64) -> Result<Pix, OcrError> {
    if !matches!(bytes.get(0..2), Some(b"P4" | b"P5" | b"P6")) {
        return decode(bytes, 0, max_pixels);
    }
    let (w, h) = header_size(bytes)
        .ok_or_else(|| unreadable("the extracted image header cannot be read"))?;
    within_limit("the page image", w, h, max_pixels)?;
    // SAFETY: as above; a new Pix or null.
    let raw = unsafe { lept::pixReadMem(bytes.as_ptr(), bytes.len()) };
    Pix::from_raw(raw).ok_or_else(|| unreadable("the extracted image cannot be decoded"))
}

/// Decodes a PNG that our renderer produced (no format or page questions).
pub(crate) fn decode_png(bytes: &[u8], max_pixels: u64) -> Result<Pix, OcrError> {
    decode(bytes, 0, max_pixels)
}

/// A TIFF's page directory, walked in Rust so that the page count and each page's size are
/// known without libtiff (and without decoding anything).
pub(crate) mod tiff {
    /// Width and height of one page, when its directory has them.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub(crate) struct PageHeader {
        pub width: Option<u64>,
        pub height: Option<u64>,
    }

    /// Directories past this many are refused: no real document has them, a crafted file
    /// could chain millions.
    const MAX_PAGES: usize = 10_000;

    struct Reader<'a> {
        bytes: &'a [u8],
        little: bool,
    }

    impl Reader<'_> {
        fn take<const N: usize>(&self, at: u64) -> Result<[u8; N], String> {
            let start = usize::try_from(at).map_err(|_| "offset out of range".to_string())?;
            let end = start
                .checked_add(N)
                .ok_or_else(|| "offset out of range".to_string())?;
            let slice = self
                .bytes
                .get(start..end)
                .ok_or_else(|| "the TIFF is truncated".to_string())?;
            let mut out = [0u8; N];
            out.copy_from_slice(slice);
            Ok(out)
        }
        fn u16(&self, at: u64) -> Result<u64, String> {
            let b = self.take::<2>(at)?;
            Ok(u64::from(if self.little {
                u16::from_le_bytes(b)
            } else {
                u16::from_be_bytes(b)
            }))
        }
        fn u32(&self, at: u64) -> Result<u64, String> {
            let b = self.take::<4>(at)?;
            Ok(u64::from(if self.little {
                u32::from_le_bytes(b)
            } else {
                u32::from_be_bytes(b)
            }))
        }
        fn u64(&self, at: u64) -> Result<u64, String> {
            let b = self.take::<8>(at)?;
            Ok(if self.little {
                u64::from_le_bytes(b)
            } else {
                u64::from_be_bytes(b)
            })
        }
    }

    /// Every page's header, in order.
    pub(crate) fn pages(bytes: &[u8]) -> Result<Vec<PageHeader>, String> {
        let little = match bytes.get(0..2) {
            Some(b"II") => true,
            Some(b"MM") => false,
            _ => return Err("not a TIFF".into()),
        };
        let r = Reader { bytes, little };
        let big = match r.u16(2)? {
            42 => false,
            43 => true,
            _ => return Err("not a TIFF".into()),
        };
        let (mut next, count_size, entry_size, offset_size) = if big {
            (r.u64(8)?, 8u64, 20u64, 8u64)
        } else {
            (r.u32(4)?, 2, 12, 4)
        };
        let mut pages = Vec::new();
        let mut seen = std::collections::HashSet::new();
        while next != 0 {
            if !seen.insert(next) {
                return Err("the TIFF's page chain loops".into());
            }
            if pages.len() >= MAX_PAGES {
                return Err(format!("the TIFF has more than {MAX_PAGES} pages"));
            }
            let entries = if big { r.u64(next)? } else { r.u16(next)? };
            let mut page = PageHeader {
                width: None,
                height: None,
            };
            for i in 0..entries {
                let at = next + count_size + i * entry_size;
                let tag = r.u16(at)?;
                if tag != 256 && tag != 257 {
                    continue;
                }
                let kind = r.u16(at + 2)?;
                let value_at = at + 4 + offset_size;
                let value = match kind {
                    3 => r.u16(value_at)?,
                    4 => r.u32(value_at)?,
                    16 => r.u64(value_at)?,
                    _ => return Err("a TIFF page size has an unexpected type".into()),
                };
                if tag == 256 {
                    page.width = Some(value);
                } else {
                    page.height = Some(value);
                }
            }
            pages.push(page);
            let after = next + count_size + entries.saturating_mul(entry_size);
            next = if big { r.u64(after)? } else { r.u32(after)? };
        }
        if pages.is_empty() {
            return Err("the TIFF has no pages".into());
        }
        Ok(pages)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_are_sniffed_from_their_signatures() {
        assert_eq!(sniff(b"\x89PNG\r\n\x1a\nrest"), Some(Format::Png));
        assert_eq!(sniff(&[0xFF, 0xD8, 0xFF, 0xE0]), Some(Format::Jpeg));
        assert_eq!(sniff(b"II*\0...."), Some(Format::Tiff));
        assert_eq!(sniff(b"MM\0*...."), Some(Format::Tiff));
        assert_eq!(sniff(b"GIF89a.."), Some(Format::Gif));
        assert_eq!(sniff(b"RIFF\0\0\0\0WEBPVP8 "), Some(Format::WebP));
        assert_eq!(sniff(b"%PDF-1.7"), None);
        assert_eq!(sniff(b""), None);
    }

    #[test]
    fn a_looping_tiff_chain_is_refused() {
        // Header pointing at an IFD at 8 with no entries whose next offset is 8 again.
        let mut tiff = b"II*\0\x08\0\0\0".to_vec();
        tiff.extend_from_slice(&[0, 0, 8, 0, 0, 0]);
        assert!(tiff::pages(&tiff).unwrap_err().contains("loops"));
    }

    #[test]
    fn gif_screen_size_is_read_without_decoding() {
        let gif = b"GIF89a\x10\x27\x10\x27rest";
        assert_eq!(dimensions(gif, Format::Gif, 0).unwrap(), (10_000, 10_000));
    }

    fn corpus(rel: &str) -> Vec<u8> {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../tests/corpus/ocr")
            .join(rel);
        std::fs::read(path).unwrap()
    }

    /// Decodes hostile bytes the way a page is decoded: an error with an image code or a
    /// picture, never a panic or an abort.
    fn decodes_or_refuses(bytes: &[u8], index: u32) {
        match decode(bytes, index, 4_000_000) {
            Ok(pix) => assert!(pix.width() > 0 && pix.height() > 0),
            Err(e) => assert!(
                ["image_unreadable", "image_too_large"].contains(&e.code),
                "{e:?}"
            ),
        }
        let _ = page_count(bytes);
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]

        #[test]
        fn random_bytes_never_crash_the_decoder(
            bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..2048),
            index in 0u32..3,
        ) {
            decodes_or_refuses(&bytes, index);
        }

        #[test]
        fn mutated_images_never_crash_the_decoder(
            file in 0usize..3,
            edits in proptest::collection::vec(
                (proptest::prelude::any::<proptest::sample::Index>(), proptest::prelude::any::<u8>()),
                1..16,
            ),
            cut in proptest::prelude::any::<proptest::sample::Index>(),
            index in 0u32..3,
        ) {
            let name = ["tesseract/phototest-rotated-180.png", "made/three-pages.tif",
                        "tesseract/phototest.tif"][file];
            let mut bytes = corpus(name);
            for (at, value) in edits {
                let i = at.index(bytes.len());
                bytes[i] = value;
            }
            // Half the cases are also truncated.
            let keep = cut.index(bytes.len() * 2).min(bytes.len());
            bytes.truncate(keep.max(1));
            decodes_or_refuses(&bytes, index);
        }
    }
}
