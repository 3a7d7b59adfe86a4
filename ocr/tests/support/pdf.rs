//! A tiny PDF writer for tests and measurements: pages of Helvetica text lines at known
//! places (tall pages included) and pages that are one embedded PNG image, so that what a
//! page holds is known because the test wrote it.
#![allow(dead_code)]

/// One line of text: its top in points from the top of the page, its size in points.
pub struct Line<'a> {
    pub top: f64,
    pub size: f64,
    pub text: &'a str,
}

/// A filled black rectangle, in points from the top-left corner.
pub struct Rect {
    pub x: f64,
    pub top: f64,
    pub width: f64,
    pub height: f64,
}

/// Assembles numbered objects and the cross-reference table.
struct Writer {
    out: Vec<u8>,
    offsets: Vec<usize>,
}

impl Writer {
    fn new() -> Self {
        Writer {
            out: b"%PDF-1.5\n%\xe2\xe3\xcf\xd3\n".to_vec(),
            offsets: Vec::new(),
        }
    }

    /// A document of one page: objects 1 (the catalog) and 2 (the page tree) written, the
    /// page to be object 3.
    fn one_page() -> Self {
        let mut w = Writer::new();
        w.object("<< /Type /Catalog /Pages 2 0 R >>", None);
        w.object("<< /Type /Pages /Kids [3 0 R] /Count 1 >>", None);
        w
    }

    /// Writes object `offsets.len() + 1` with `dict` and an optional stream.
    fn object(&mut self, dict: &str, stream: Option<&[u8]>) -> usize {
        self.offsets.push(self.out.len());
        let n = self.offsets.len();
        self.out
            .extend_from_slice(format!("{n} 0 obj\n").as_bytes());
        match stream {
            Some(data) => {
                self.out.extend_from_slice(
                    format!("<< {dict} /Length {} >>\nstream\n", data.len()).as_bytes(),
                );
                self.out.extend_from_slice(data);
                self.out.extend_from_slice(b"\nendstream\n");
            }
            None => self.out.extend_from_slice(format!("{dict}\n").as_bytes()),
        }
        self.out.extend_from_slice(b"endobj\n");
        n
    }

    fn finish(mut self, root: usize) -> Vec<u8> {
        let xref = self.out.len();
        let count = self.offsets.len() + 1;
        self.out
            .extend_from_slice(format!("xref\n0 {count}\n0000000000 65535 f \n").as_bytes());
        for at in &self.offsets {
            self.out
                .extend_from_slice(format!("{at:010} 00000 n \n").as_bytes());
        }
        self.out.extend_from_slice(
            format!("trailer\n<< /Size {count} /Root {root} 0 R >>\nstartxref\n{xref}\n%%EOF\n")
                .as_bytes(),
        );
        self.out
    }
}

/// Appends to a content stream the operators that draw `lines` in Helvetica (font `/F1`) on
/// a page `height` points tall.
fn draw_lines(content: &mut String, lines: &[Line<'_>], height: f64) {
    for line in lines {
        // The baseline sits about 0.8 of the size under the line's top.
        let baseline = height - line.top - line.size * 0.8;
        content.push_str(&format!(
            "BT /F1 {:.1} Tf 18 {:.2} Td ({}) Tj ET\n",
            line.size,
            baseline,
            escape(line.text)
        ));
    }
}

fn escape(text: &str) -> String {
    text.chars()
        .flat_map(|c| match c {
            '(' | ')' | '\\' => vec!['\\', c],
            _ => vec![c],
        })
        .collect()
}

/// One page `width`×`height` pt of black Helvetica lines (left margin 18 pt) and rectangles.
pub fn text_page(width: f64, height: f64, lines: &[Line<'_>], rects: &[Rect]) -> Vec<u8> {
    let mut content = String::new();
    for r in rects {
        content.push_str(&format!(
            "0 g {:.2} {:.2} {:.2} {:.2} re f\n",
            r.x,
            height - r.top - r.height,
            r.width,
            r.height
        ));
    }
    draw_lines(&mut content, lines, height);
    // Objects: 1 catalog, 2 pages, 3 page, 4 font, 5 content.
    let mut w = Writer::one_page();
    w.object(
        &format!(
            "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 {width} {height}] \
             /Resources << /Font << /F1 4 0 R >> >> /Contents 5 0 R >>"
        ),
        None,
    );
    w.object(
        "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>",
        None,
    );
    w.object("", Some(content.as_bytes()));
    w.finish(1)
}

/// What a PNG's header says.
pub struct Png {
    pub width: u32,
    pub height: u32,
    pub bit_depth: u8,
    pub color_type: u8,
    /// Pixels per inch from pHYs, when stated in metres.
    pub ppi: Option<f64>,
    pub palette: Vec<u8>,
    pub idat: Vec<u8>,
}

pub fn parse_png(bytes: &[u8]) -> Result<Png, String> {
    if !bytes.starts_with(b"\x89PNG\r\n\x1a\n") {
        return Err("not a PNG".into());
    }
    let mut at = 8;
    let mut png = Png {
        width: 0,
        height: 0,
        bit_depth: 0,
        color_type: 0,
        ppi: None,
        palette: Vec::new(),
        idat: Vec::new(),
    };
    while at + 8 <= bytes.len() {
        let len = u32::from_be_bytes(bytes[at..at + 4].try_into().unwrap()) as usize;
        let kind = &bytes[at + 4..at + 8];
        let data = bytes.get(at + 8..at + 8 + len).ok_or("truncated PNG")?;
        match kind {
            b"IHDR" => {
                png.width = u32::from_be_bytes(data[0..4].try_into().unwrap());
                png.height = u32::from_be_bytes(data[4..8].try_into().unwrap());
                png.bit_depth = data[8];
                png.color_type = data[9];
                if data[12] != 0 {
                    return Err("interlaced PNGs are not supported".into());
                }
            }
            b"PLTE" => png.palette = data.to_vec(),
            b"pHYs" if data[8] == 1 => {
                let x = u32::from_be_bytes(data[0..4].try_into().unwrap());
                png.ppi = Some(f64::from(x) * 0.0254);
            }
            b"IDAT" => png.idat.extend_from_slice(data),
            b"IEND" => break,
            _ => {}
        }
        at += 12 + len;
    }
    Ok(png)
}

/// How `image_page_with` draws its image.
#[derive(Clone, Copy, PartialEq)]
pub enum Placement {
    /// As stored.
    Upright,
    /// Turned half a turn by the page's transformation matrix.
    UpsideDown,
    /// Mirrored left to right (no rotation undoes it).
    Mirrored,
}

/// One page that is the PNG `png` drawn over the whole page at `ppi` (the PNG's own when
/// `None`, else 300), its compressed data embedded as it is (Flate with the PNG predictor).
pub fn image_page(png_bytes: &[u8], ppi: Option<f64>) -> Result<Vec<u8>, String> {
    image_page_with(png_bytes, ppi, Placement::Upright, &[])
}

/// `image_page`, with the image placed by `placement` and text `lines` drawn over it.
pub fn image_page_with(
    png_bytes: &[u8],
    ppi: Option<f64>,
    placement: Placement,
    lines: &[Line<'_>],
) -> Result<Vec<u8>, String> {
    let png = parse_png(png_bytes)?;
    let colors = match png.color_type {
        0 | 3 => 1,
        2 => 3,
        _ => return Err("PNGs with alpha are not supported".into()),
    };
    let ppi = ppi.or(png.ppi).unwrap_or(300.0);
    let width = f64::from(png.width) * 72.0 / ppi;
    let height = f64::from(png.height) * 72.0 / ppi;
    let space = match png.color_type {
        0 => "/DeviceGray".to_string(),
        2 => "/DeviceRGB".to_string(),
        _ => {
            let hex: String = png.palette.iter().map(|b| format!("{b:02x}")).collect();
            format!(
                "[/Indexed /DeviceRGB {} <{hex}>]",
                png.palette.len() / 3 - 1
            )
        }
    };
    let mut content = match placement {
        Placement::Upright => format!("q {width:.4} 0 0 {height:.4} 0 0 cm /Im1 Do Q\n"),
        Placement::UpsideDown => format!(
            "q {:.4} 0 0 {:.4} {width:.4} {height:.4} cm /Im1 Do Q\n",
            -width, -height
        ),
        Placement::Mirrored => {
            format!(
                "q {:.4} 0 0 {height:.4} {width:.4} 0 cm /Im1 Do Q\n",
                -width
            )
        }
    };
    draw_lines(&mut content, lines, height);
    // Objects: 1 catalog, 2 pages, 3 page, 4 image, 5 content, 6 font.
    let mut w = Writer::one_page();
    w.object(
        &format!(
            "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 {width:.4} {height:.4}] \
             /Resources << /XObject << /Im1 4 0 R >> /Font << /F1 6 0 R >> >> \
             /Contents 5 0 R >>"
        ),
        None,
    );
    w.object(
        &format!(
            "<< /Type /XObject /Subtype /Image /Width {} /Height {} /ColorSpace {space} \
             /BitsPerComponent {} /Filter /FlateDecode /DecodeParms << /Predictor 15 \
             /Colors {colors} /BitsPerComponent {} /Columns {} >>",
            png.width, png.height, png.bit_depth, png.bit_depth, png.width
        ),
        Some(&png.idat),
    );
    w.object("", Some(content.as_bytes()));
    w.object(
        "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>",
        None,
    );
    Ok(w.finish(1))
}
