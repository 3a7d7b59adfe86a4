//! FictionBook 2 (`.fb2`): the book's title, authors and annotation from `title-info`, then
//! each `body` (the text, then notes) with section titles as headings, paragraphs, poems as
//! lines, epigraphs and citations as quotes. Embedded images (`binary`, base64) are skipped.

use super::tree::{self, Element, Role, Rules};
use crate::markdown;
use crate::{Control, ExtractError, Extraction, Limits, Metadata};

struct Fb2;

impl Rules for Fb2 {
    fn role(&self, element: &Element, _parent: &Element) -> Role {
        match element.name.as_str() {
            "description" | "binary" | "image" | "empty-line" | "stylesheet" => Role::Skip,
            "body" | "p" | "subtitle" | "text-author" | "date" | "annotation" => Role::Block,
            // A poem's title is a heading below the section's.
            "section" | "poem" => Role::Section,
            "title" => Role::Title,
            "epigraph" | "cite" => Role::Quote,
            "stanza" => Role::Lines,
            "table" => Role::Table,
            // `emphasis`, `strong`, `a`, `style`, `sub`, `sup`, `code`, `strikethrough`, `v`.
            _ => Role::Inline,
        }
    }
}

pub(super) fn render(
    root: &Element,
    limits: &Limits,
    control: &Control,
) -> Result<Extraction, ExtractError> {
    tree::render(&Fb2, limits, control, |renderer, out| {
        let info = root
            .child("description")
            .and_then(|d| d.child("title-info"));
        let title = info.and_then(|i| i.child_text("book-title"));
        let authors: Vec<String> = info
            .map(|i| i.children_named("author").map(author_name).collect())
            .unwrap_or_default();
        let authors: Vec<String> = authors.into_iter().filter(|a| !a.is_empty()).collect();
        let language = info.and_then(|i| i.child_text("lang"));
        if let Some(title) = &title {
            renderer.push(out, markdown::heading(1, title));
        }
        if !authors.is_empty() {
            renderer.push(out, authors.join(", "));
        }
        if let Some(annotation) = info.and_then(|i| i.child("annotation")) {
            renderer.blocks(annotation, 2, out)?;
        }
        for body in root.children_named("body") {
            renderer.tick()?;
            if body.child("title").is_none()
                && let Some(name) = body.attr("name").filter(|n| !n.trim().is_empty())
            {
                // Notes and comments bodies are named, not titled.
                let name = match name {
                    "notes" => "Notes",
                    "comments" => "Comments",
                    other => other,
                };
                renderer.push(out, markdown::heading(1, name));
            }
            for child in body.elements() {
                renderer.tick()?;
                let role = Fb2.role(child, body);
                // The main body's title usually repeats the book's (often with the authors):
                // the heading above says it already.
                if role == Role::Title
                    && let Some(title) = &title
                    && renderer
                        .text(child)
                        .to_lowercase()
                        .contains(&title.to_lowercase())
                {
                    continue;
                }
                renderer.block(child, role, 1, out)?;
            }
        }
        Ok(Metadata {
            title,
            author: tree::byline(&authors),
            language,
            ..Metadata::default()
        })
    })
}

/// `first-name middle-name last-name`, or the `nickname` of an author who has none.
fn author_name(author: &Element) -> String {
    author
        .joined_parts(&["first-name", "middle-name", "last-name"])
        .unwrap_or_else(|| {
            author
                .child("nickname")
                .map(Element::text)
                .unwrap_or_default()
        })
}
