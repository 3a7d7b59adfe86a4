//! OPML (`.opml`): the outline's title from `head`, then the `outline` tree as a nested list
//! of each entry's `text` (or `title`) with its link (`xmlUrl`, `htmlUrl` or `url`).

use super::tree::{self, Element, Renderer, Role, Rules};
use crate::markdown;
use crate::{Control, ExtractError, Extraction, Limits, Metadata};

struct Opml;

impl Rules for Opml {
    fn role(&self, _element: &Element, _parent: &Element) -> Role {
        Role::Inline
    }
}

pub(super) fn render(
    root: &Element,
    limits: &Limits,
    control: &Control,
) -> Result<Extraction, ExtractError> {
    tree::render(&Opml, limits, control, |renderer, out| {
        let head = root.child("head");
        let field = |name: &str| head.and_then(|h| h.child_text(name));
        let title = field("title");
        let owner = field("ownerName");
        if let Some(title) = &title {
            renderer.push(out, markdown::heading(1, title));
        }
        if let Some(body) = root.child("body") {
            let mut lines = Vec::new();
            outline(renderer, body, 0, &mut lines)?;
            renderer.push(out, lines.join("\n"));
        }
        Ok(Metadata {
            title,
            author: owner,
            ..Metadata::default()
        })
    })
}

/// The `outline` children of `parent` as list lines indented by `depth`. An entry with no
/// text of its own still holds its children, at its depth.
fn outline(
    renderer: &mut Renderer<'_>,
    parent: &Element,
    depth: usize,
    lines: &mut Vec<String>,
) -> Result<(), ExtractError> {
    for entry in parent.children_named("outline") {
        renderer.tick()?;
        let text = entry
            .attr("text")
            .or_else(|| entry.attr("title"))
            .map(markdown::collapse_whitespace)
            .unwrap_or_default();
        let url = ["xmlUrl", "htmlUrl", "url"]
            .iter()
            .find_map(|k| entry.attr(k))
            .map(str::trim)
            .filter(|u| !u.is_empty() && !u.contains(char::is_whitespace));
        let line = match (text.is_empty(), url) {
            (false, Some(url)) if url != text => format!("{text} (<{url}>)"),
            (false, _) => text,
            (true, Some(url)) => format!("<{url}>"),
            (true, None) => String::new(),
        };
        if line.is_empty() {
            outline(renderer, entry, depth, lines)?;
        } else {
            lines.push(format!("{}- {line}", "  ".repeat(depth)));
            outline(renderer, entry, depth + 1, lines)?;
        }
    }
    Ok(())
}
