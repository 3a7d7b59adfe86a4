//! PowerPoint presentations (PPTX, PresentationML): slides in presentation order, each with its
//! title as a heading, the text of its shapes (lists, tables, charts' data, groups), its
//! pictures' alt text, its comments and its speaker notes.

use std::collections::HashMap;

use crate::markdown;
use crate::ooxml::{self, Element, Relationships};
use crate::zipsafe::SafeZip;
use crate::{Control, ExtractError, Extraction, Input, Limits};

pub fn extract(
    input: Input<'_>,
    limits: &Limits,
    control: &Control,
) -> Result<Extraction, ExtractError> {
    let mut zip = SafeZip::open(input.bytes, "PPTX", limits)?;
    let presentation = "ppt/presentation.xml";
    let root = ooxml::read_xml(&mut zip, presentation, limits, control)?
        .ok_or_else(|| ExtractError::malformed("the PPTX file has no ppt/presentation.xml"))?;
    let rels = read_rels(&mut zip, presentation, limits, control);
    let mut slides: Vec<String> = root
        .child("sldIdLst")
        .into_iter()
        .flat_map(|list| list.children_named("sldId"))
        .filter_map(|id| id.attr_exact("r:id").or_else(|| id.attr("id")))
        .filter_map(|rid| rels.target(rid))
        .map(|target| ooxml::resolve_target("ppt", target))
        .collect();
    if slides.is_empty() {
        slides = slides_by_name(&zip);
    }
    let authors = comment_authors(&mut zip, limits, control);
    let metadata = ooxml::read_xml(&mut zip, "docProps/core.xml", limits, control)
        .ok()
        .flatten()
        .map(|core| ooxml::dublin_core(&core))
        .unwrap_or_default();

    let mut reader = SlideReader {
        zip,
        limits,
        control,
        warnings: Vec::new(),
        ticks: 0,
    };
    let mut markdown = String::new();
    for (number, slide) in slides.iter().enumerate() {
        control.check()?;
        match reader.slide(slide, &authors) {
            Ok(text) => markdown::push_block(&mut markdown, &text),
            Err(e) if e.code == "malformed_document" => reader.warnings.push(format!(
                "slide {} could not be read and was skipped",
                number + 1
            )),
            Err(e) => return Err(e),
        }
        if markdown.len() > limits.max_output_chars {
            reader
                .warnings
                .push("the presentation's text was cut short at the output limit".to_string());
            break;
        }
    }
    Ok(Extraction {
        markdown,
        metadata,
        warnings: reader.warnings,
        ..Extraction::default()
    })
}

fn read_rels(
    zip: &mut SafeZip<'_>,
    part: &str,
    limits: &Limits,
    control: &Control,
) -> Relationships {
    let (path, _) = ooxml::rels_path(part);
    Relationships::from_element(
        ooxml::read_xml(zip, &path, limits, control)
            .ok()
            .flatten()
            .as_ref(),
    )
}

/// Slides by file name (`slide2.xml` before `slide10.xml`), when the presentation part lists
/// none.
fn slides_by_name(zip: &SafeZip<'_>) -> Vec<String> {
    let mut names: Vec<(u32, String)> = zip
        .names()
        .into_iter()
        .filter_map(|name| {
            let number = name
                .strip_prefix("ppt/slides/slide")?
                .strip_suffix(".xml")?
                .parse()
                .ok()?;
            Some((number, name))
        })
        .collect();
    names.sort();
    names.into_iter().map(|(_, name)| name).collect()
}

/// Legacy comment authors by id: (name, initials).
fn comment_authors(
    zip: &mut SafeZip<'_>,
    limits: &Limits,
    control: &Control,
) -> HashMap<String, (String, String)> {
    let Ok(Some(root)) = ooxml::read_xml(zip, "ppt/commentAuthors.xml", limits, control) else {
        return HashMap::new();
    };
    root.children_named("cmAuthor")
        .map(|a| {
            (
                a.attr("id").unwrap_or_default().to_string(),
                (
                    a.attr("name").unwrap_or_default().to_string(),
                    a.attr("initials").unwrap_or_default().to_string(),
                ),
            )
        })
        .collect()
}

struct SlideReader<'a> {
    zip: SafeZip<'a>,
    limits: &'a Limits,
    control: &'a Control,
    warnings: Vec<String>,
    ticks: usize,
}

impl SlideReader<'_> {
    fn tick(&mut self) -> Result<(), ExtractError> {
        self.ticks += 1;
        if self.ticks.is_multiple_of(256) {
            self.control.check()?;
        }
        Ok(())
    }

    fn slide(
        &mut self,
        path: &str,
        authors: &HashMap<String, (String, String)>,
    ) -> Result<String, ExtractError> {
        let root = ooxml::read_xml(&mut self.zip, path, self.limits, self.control)?
            .ok_or_else(|| ExtractError::malformed(format!("the PPTX file has no {path}")))?;
        let rels = read_rels(&mut self.zip, path, self.limits, self.control);
        let (_, dir) = ooxml::rels_path(path);
        let mut out = String::new();
        if let Some(tree) = root.child("cSld").and_then(|c| c.child("spTree")) {
            self.shapes(tree, &rels, &dir, &mut out)?;
        }
        if let Some(target) = rels.target_of_type("comments") {
            let comments = ooxml::resolve_target(&dir, target);
            if let Ok(Some(list)) =
                ooxml::read_xml(&mut self.zip, &comments, self.limits, self.control)
            {
                for cm in list.children_named("cm") {
                    markdown::push_block(&mut out, &comment_line(cm, authors));
                }
            }
        }
        if let Some(target) = rels.target_of_type("notesSlide") {
            let notes_path = ooxml::resolve_target(&dir, target);
            if let Ok(Some(notes)) =
                ooxml::read_xml(&mut self.zip, &notes_path, self.limits, self.control)
            {
                let text = notes_text(&notes);
                if !text.trim().is_empty() {
                    markdown::push_block(&mut out, "### Notes:");
                    markdown::push_block(&mut out, &text);
                }
            }
        }
        Ok(out)
    }

    /// The shapes of a tree or group, in order. Groups nest no deeper than the parsed tree,
    /// whose depth is capped.
    fn shapes(
        &mut self,
        tree: &Element,
        rels: &Relationships,
        dir: &str,
        out: &mut String,
    ) -> Result<(), ExtractError> {
        for shape in tree.elements() {
            self.tick()?;
            match shape.name.as_str() {
                "sp" => {
                    let Some(body) = shape.child("txBody") else {
                        continue;
                    };
                    let placeholder = placeholder_type(shape);
                    if matches!(placeholder.as_deref(), Some("title" | "ctrTitle")) {
                        let title = markdown::collapse_whitespace(&plain_text(body));
                        if !title.is_empty() {
                            markdown::push_block(out, &markdown::heading(1, &title));
                        }
                    } else {
                        markdown::push_block(out, &text_body(body));
                    }
                }
                "pic" => {
                    let props = shape.child("nvPicPr").and_then(|n| n.child("cNvPr"));
                    if let Some(line) = props.and_then(picture_line) {
                        markdown::push_block(out, &line);
                    }
                }
                "grpSp" => self.shapes(shape, rels, dir, out)?,
                "graphicFrame" => self.graphic_frame(shape, rels, dir, out)?,
                "AlternateContent" => {
                    if let Some(choice) = shape.child("Choice").or_else(|| shape.child("Fallback"))
                    {
                        self.shapes(choice, rels, dir, out)?;
                    }
                }
                _ => {}
            }
        }
        Ok(())
    }

    fn graphic_frame(
        &mut self,
        frame: &Element,
        rels: &Relationships,
        dir: &str,
        out: &mut String,
    ) -> Result<(), ExtractError> {
        let Some(data) = frame.child("graphic").and_then(|g| g.child("graphicData")) else {
            return Ok(());
        };
        if let Some(tbl) = data.child("tbl") {
            let table = self.table(tbl)?;
            markdown::push_block(out, &table);
        } else if let Some(chart) = data.child("chart") {
            let Some(target) = chart
                .attr_exact("r:id")
                .or_else(|| chart.attr("id"))
                .and_then(|rid| rels.target(rid))
            else {
                return Ok(());
            };
            let path = ooxml::resolve_target(dir, target);
            if let Ok(Some(root)) = ooxml::read_xml(&mut self.zip, &path, self.limits, self.control)
            {
                markdown::push_block(out, &ooxml::chart_markdown(&root));
            }
        }
        Ok(())
    }

    /// A table; merged cells repeat the text of the cell they merge into.
    fn table(&mut self, tbl: &Element) -> Result<String, ExtractError> {
        let mut rows: Vec<Vec<String>> = Vec::new();
        for tr in tbl.children_named("tr") {
            self.control.check()?;
            if rows.len() >= self.limits.max_table_rows {
                self.warnings
                    .push("a table was cut short at the row limit".to_string());
                break;
            }
            let mut row: Vec<String> = Vec::new();
            for tc in tr.children_named("tc").take(self.limits.max_table_columns) {
                let text = if is_on(tc.attr("vMerge")) {
                    rows.last()
                        .and_then(|above| above.get(row.len()))
                        .cloned()
                        .unwrap_or_default()
                } else if is_on(tc.attr("hMerge")) {
                    row.last().cloned().unwrap_or_default()
                } else {
                    tc.child("txBody")
                        .map(|b| markdown::collapse_whitespace(&text_body(b)))
                        .unwrap_or_default()
                };
                row.push(text);
            }
            rows.push(row);
        }
        Ok(markdown::table(&rows))
    }
}

fn is_on(value: Option<&str>) -> bool {
    matches!(value, Some("1" | "true" | "on"))
}

/// The placeholder type of a shape: `title`, `ctrTitle`, `body` (a placeholder without a type
/// is a body), or `None` for a free shape.
fn placeholder_type(shape: &Element) -> Option<String> {
    let ph = shape
        .child("nvSpPr")
        .and_then(|n| n.child("nvPr"))
        .and_then(|n| n.child("ph"))?;
    Some(ph.attr("type").unwrap_or("body").to_string())
}

/// The text of a text body, paragraphs on lines of their own.
fn plain_text(body: &Element) -> String {
    body.children_named("p")
        .map(paragraph_text)
        .collect::<Vec<_>>()
        .join("\n")
}

fn paragraph_text(p: &Element) -> String {
    let mut text = String::new();
    for child in p.elements() {
        match child.name.as_str() {
            "r" | "fld" => {
                if let Some(t) = child.child("t") {
                    text.push_str(&t.text());
                }
            }
            "br" => text.push('\n'),
            _ => {}
        }
    }
    text
}

/// A text body as Markdown: bulleted and numbered paragraphs as list items indented by level,
/// others as paragraphs.
fn text_body(body: &Element) -> String {
    let mut out = String::new();
    let mut last_was_item = false;
    let mut counters = [0u32; 9];
    for p in body.children_named("p") {
        let text = paragraph_text(p).trim().to_string();
        if text.is_empty() {
            continue;
        }
        let ppr = p.child("pPr");
        let level = ppr
            .and_then(|p| p.attr("lvl"))
            .and_then(|l| l.parse::<usize>().ok())
            .unwrap_or(0)
            .min(8);
        let numbered = ppr.and_then(|p| p.child("buAutoNum")).is_some();
        let bulleted = ppr.and_then(|p| p.child("buChar")).is_some();
        let item = if numbered {
            let slot = counters.get_mut(level);
            let n = slot.map_or(1, |c| {
                *c += 1;
                *c
            });
            for deeper in counters.iter_mut().skip(level + 1) {
                *deeper = 0;
            }
            Some(format!("{n}."))
        } else if bulleted {
            Some("-".to_string())
        } else {
            counters = [0; 9];
            None
        };
        let is_item = item.is_some();
        if !out.is_empty() {
            out.push_str(if is_item && last_was_item {
                "\n"
            } else {
                "\n\n"
            });
        }
        match item {
            Some(marker) => {
                out.push_str(&"    ".repeat(level));
                out.push_str(&marker);
                out.push(' ');
                out.push_str(&text.replace('\n', "  \n"));
            }
            None => out.push_str(&text),
        }
        last_was_item = is_item;
    }
    out
}

/// The alt text of a picture's non-visual properties (`cNvPr`, DrawingML's `descr` and
/// `title`, which PPTX and DOCX share) as a line of its own: `*Image: text*`. Italic text
/// rather than `![text]()`: Shelf keeps no image to point at, and a line of words reads the
/// same in a viewer, a snippet and a search index.
///
/// Office's own boilerplate (`Description automatically generated`, `AI-generated content may
/// be incorrect.`) is cut, and an alt text that is only a file name (what older PowerPoint
/// wrote by itself) is dropped: neither says what the picture shows.
pub(crate) fn picture_line(props: &Element) -> Option<String> {
    let title = clean_alt(props.attr("title"));
    let descr = clean_alt(props.attr("descr"));
    let text = match (title, descr) {
        (Some(title), Some(descr)) if descr.contains(&title) => descr,
        (Some(title), Some(descr)) if title.contains(&descr) => title,
        (Some(title), Some(descr)) => format!("{title}: {descr}"),
        (title, descr) => title.or(descr)?,
    };
    Some(format!("*Image: {}*", text.replace('*', "\\*")))
}

/// Whether alt text that Office generated itself (marked `Description automatically
/// generated` or `AI-generated content may be incorrect`) is kept. It is a guess of Office's
/// image model, not the author's words, and ground truths such as docling's leave every alt
/// text out (on the shared corpus, alt text costs 0.013 of DOCX and 0.041 of PPTX word
/// similarity, of which generated text 0.008 and 0.041). Left out: a guess is not the
/// document's content, and the figures of docs/PERFORMANCE.md hold without it.
const KEEP_GENERATED_ALT_TEXT: bool = false;

/// Alt text on one line without Office's generated suffixes; `None` when nothing is left.
fn clean_alt(text: Option<&str>) -> Option<String> {
    const BOILERPLATE: [&str; 2] = [
        "description automatically generated",
        "ai-generated content may be incorrect",
    ];
    let mut kept = Vec::new();
    for line in text?.lines() {
        let lower = line.to_ascii_lowercase();
        // ASCII lowercasing keeps byte offsets, so a cut found in `lower` fits `line`.
        let cut = BOILERPLATE.iter().filter_map(|b| lower.find(b)).min();
        if cut.is_some() && !KEEP_GENERATED_ALT_TEXT {
            return None;
        }
        let cut = cut.unwrap_or(line.len());
        kept.push(line.get(..cut).unwrap_or(line));
    }
    let text = markdown::collapse_whitespace(&kept.join(" "));
    (!text.is_empty() && !is_file_name(&text)).then_some(text)
}

/// `picture.png`, `IMG_0042.JPG`: one word ending in an image extension.
fn is_file_name(text: &str) -> bool {
    const EXTENSIONS: [&str; 11] = [
        "png", "jpg", "jpeg", "gif", "bmp", "tif", "tiff", "emf", "wmf", "svg", "webp",
    ];
    !text.contains(char::is_whitespace)
        && text
            .rsplit_once('.')
            .is_some_and(|(_, ext)| EXTENSIONS.iter().any(|e| e.eq_ignore_ascii_case(ext)))
}

/// A legacy comment as `[author: Name (IN), time: ...]: text`.
fn comment_line(cm: &Element, authors: &HashMap<String, (String, String)>) -> String {
    let text = cm.child("text").map(|t| t.text()).unwrap_or_default();
    let (name, initials) = cm
        .attr("authorId")
        .and_then(|id| authors.get(id))
        .cloned()
        .unwrap_or_default();
    let time = cm.attr("dt").unwrap_or_default();
    format!(
        "[author: {name} ({initials}), time: {time}]: {}",
        markdown::collapse_whitespace(&text)
    )
}

/// The speaker notes: the body placeholder of the notes slide.
fn notes_text(notes: &Element) -> String {
    let Some(tree) = notes.child("cSld").and_then(|c| c.child("spTree")) else {
        return String::new();
    };
    let mut shapes = Vec::new();
    tree.find_all("sp", &mut shapes);
    shapes
        .into_iter()
        .filter(|sp| placeholder_type(sp).as_deref() == Some("body"))
        .filter_map(|sp| sp.child("txBody"))
        .map(text_body)
        .filter(|t| !t.trim().is_empty())
        .collect::<Vec<_>>()
        .join("\n\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{assert_in_order, corpus, mutate, run, zip_of};
    use proptest::prelude::*;

    const NS: &str = r#"xmlns:p="http://schemas.openxmlformats.org/presentationml/2006/main" xmlns:a="http://schemas.openxmlformats.org/drawingml/2006/main" xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships""#;

    fn slide(shapes: &str) -> String {
        format!(r#"<p:sld {NS}><p:cSld><p:spTree>{shapes}</p:spTree></p:cSld></p:sld>"#)
    }

    fn shape(ph: &str, paragraphs: &str) -> String {
        format!(
            r#"<p:sp><p:nvSpPr><p:cNvPr id="1" name="s"/><p:cNvSpPr/><p:nvPr>{ph}</p:nvPr></p:nvSpPr><p:txBody>{paragraphs}</p:txBody></p:sp>"#
        )
    }

    #[test]
    fn corpus_sample_has_titles_tables_lists_and_notes() {
        let Some(bytes) = corpus("office/pptx/sources/powerpoint_sample.pptx") else {
            return;
        };
        let md = run(extract, &bytes, "pptx").unwrap().markdown;
        assert_in_order(
            &md,
            &[
                "# Test Table Slide",
                "| R1 | True | False |  | False | True | True |",
                "# Second slide title",
                "### Notes:",
                "Some notes on the second slide.",
            ],
        );
        assert_in_order(
            &md,
            &[
                "Let’s introduce a list",
                "With foo",
                "Bar",
                "And baz things",
            ],
        );
    }

    #[test]
    fn corpus_chart_data_becomes_a_table() {
        let Some(bytes) = corpus("office/pptx/sources/pptx_chart.pptx") else {
            return;
        };
        let md = run(extract, &bytes, "pptx").unwrap().markdown;
        assert!(md.contains("| 2019 | 120 | 80 |"), "{md}");
        assert!(md.contains("Freshwater Ducks"), "{md}");
    }

    #[test]
    fn synthetic_presentation_follows_the_slide_list() {
        let rels = r#"<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships"><Relationship Id="rId7" Type="http://x/slide" Target="slides/slide1.xml"/><Relationship Id="rId8" Type="http://x/slide" Target="slides/slide2.xml"/></Relationships>"#;
        let presentation = format!(
            r#"<p:presentation {NS}><p:sldIdLst><p:sldId id="256" r:id="rId8"/><p:sldId id="257" r:id="rId7"/></p:sldIdLst></p:presentation>"#
        );
        let first = slide(&format!(
            "{}{}<p:grpSp>{}</p:grpSp>{}",
            shape(
                r#"<p:ph type="title"/>"#,
                "<a:p><a:r><a:t>Shown first</a:t></a:r></a:p>"
            ),
            shape(
                r#"<p:ph idx="1"/>"#,
                r#"<a:p><a:pPr><a:buChar char="•"/></a:pPr><a:r><a:t>Point</a:t></a:r></a:p><a:p><a:pPr lvl="1"><a:buAutoNum type="arabicPeriod"/></a:pPr><a:r><a:t>Sub point</a:t></a:r></a:p>"#
            ),
            shape("", "<a:p><a:r><a:t>In a group</a:t></a:r></a:p>"),
            r#"<p:graphicFrame><a:graphic><a:graphicData><a:tbl><a:tr><a:tc gridSpan="2"><a:txBody><a:p><a:r><a:t>Head</a:t></a:r></a:p></a:txBody></a:tc><a:tc hMerge="1"/></a:tr><a:tr><a:tc><a:txBody><a:p><a:r><a:t>x</a:t></a:r></a:p></a:txBody></a:tc><a:tc><a:txBody><a:p><a:r><a:t>y</a:t></a:r></a:p></a:txBody></a:tc></a:tr></a:tbl></a:graphicData></a:graphic></p:graphicFrame>"#
        ));
        let second = slide(&shape(
            r#"<p:ph type="ctrTitle"/>"#,
            "<a:p><a:r><a:t>Shown second</a:t></a:r></a:p>",
        ));
        let slide_rels = r#"<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships"><Relationship Id="rId3" Type="http://x/notesSlide" Target="../notesSlides/notesSlide1.xml"/></Relationships>"#;
        let notes = format!(
            r#"<p:notes {NS}><p:cSld><p:spTree>{}</p:spTree></p:cSld></p:notes>"#,
            shape(
                r#"<p:ph type="body" idx="1"/>"#,
                "<a:p><a:r><a:t>Speaker says hi</a:t></a:r></a:p>"
            )
        );
        let bytes = zip_of(&[
            ("ppt/presentation.xml", presentation.as_str()),
            ("ppt/_rels/presentation.xml.rels", rels),
            ("ppt/slides/slide1.xml", second.as_str()),
            ("ppt/slides/slide2.xml", first.as_str()),
            ("ppt/slides/_rels/slide2.xml.rels", slide_rels),
            ("ppt/notesSlides/notesSlide1.xml", notes.as_str()),
        ]);
        let md = run(extract, &bytes, "pptx").unwrap().markdown;
        assert_in_order(
            &md,
            &[
                "# Shown first",
                "- Point\n    1. Sub point",
                "In a group",
                "| Head | Head |",
                "| x | y |",
                "### Notes:",
                "Speaker says hi",
                "# Shown second",
            ],
        );
    }

    fn picture(attrs: &str) -> String {
        format!(
            r#"<p:pic><p:nvPicPr><p:cNvPr id="4" name="Picture 3" {attrs}/><p:cNvPicPr/><p:nvPr/></p:nvPicPr><p:blipFill><a:blip r:embed="rId2"/></p:blipFill></p:pic>"#
        )
    }

    #[test]
    fn pictures_alt_text_is_kept_in_slide_order() {
        let shapes = format!(
            "{}{}{}<p:grpSp>{}</p:grpSp>{}{}",
            shape(
                r#"<p:ph type="title"/>"#,
                "<a:p><a:r><a:t>Ducks</a:t></a:r></a:p>"
            ),
            picture(
                r#"descr="A cartoon duck holding a paper&#xA;&#xA;AI-generated content may be incorrect.""#
            ),
            shape("", "<a:p><a:r><a:t>Between</a:t></a:r></a:p>"),
            picture(r#"title="Logo" descr="The *Docling* logo""#),
            picture(r#"descr="IMG_0042.JPG""#),
            picture(r#"descr="Chart&#xA;&#xA;Description automatically generated""#),
        );
        let bytes = zip_of(&[
            ("ppt/presentation.xml", "<presentation/>"),
            ("ppt/slides/slide1.xml", slide(&shapes).as_str()),
        ]);
        let md = run(extract, &bytes, "pptx").unwrap().markdown;
        assert_eq!(
            md,
            "# Ducks\n\nBetween\n\n*Image: Logo: The \\*Docling\\* logo*"
        );
    }

    #[test]
    fn corpus_picture_alt_text() {
        let Some(bytes) = corpus("office/pptx/sources/powerpoint_with_image.pptx") else {
            return;
        };
        let md = run(extract, &bytes, "pptx").unwrap().markdown;
        assert_in_order(&md, &["# Docling", "Image linked to file"]);
        // Its only picture's alt text is one Office's image model guessed: left out.
        assert!(!md.contains("cartoon duck"), "{md}");
    }

    #[test]
    fn malformed_files_get_clear_codes() {
        let code = |bytes: &[u8]| run(extract, bytes, "pptx").unwrap_err().code;
        assert_eq!(code(b"garbage"), "malformed_document");
        assert_eq!(code(&zip_of(&[("a.xml", "<a/>")])), "malformed_document");
        assert_eq!(
            code(&zip_of(&[(
                "ppt/presentation.xml",
                "<p:presentation><p:sldIdLst>"
            )])),
            "malformed_document"
        );
        let broken_slide = zip_of(&[
            ("ppt/presentation.xml", "<presentation/>"),
            ("ppt/slides/slide1.xml", "<sld><cSld>"),
        ]);
        let extraction = run(extract, &broken_slide, "pptx").unwrap();
        assert_eq!(extraction.warnings.len(), 1);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(32))]
        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..2048)) {
            let result = run(extract, &bytes, "pptx");
            prop_assert!(result.err().is_none_or(|e| e.code != "extractor_crashed"));
        }

        #[test]
        fn mutated_corpus_files_never_panic(cut in 0usize..200_000, flips in proptest::collection::vec((0usize..200_000, any::<u8>()), 0..8)) {
            let Some(mut bytes) = corpus("office/pptx/sources/powerpoint_sample.pptx") else {
                return Ok(());
            };
            mutate(&mut bytes, &flips, cut);
            let result = run(extract, &bytes, "pptx");
            prop_assert!(result.err().is_none_or(|e| e.code != "extractor_crashed"));
        }
    }
}
