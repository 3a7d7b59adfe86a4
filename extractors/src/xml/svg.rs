//! SVG (`.svg`): the text a drawing holds, in document order: `title` and `desc` elements
//! and the content of `text` elements (with their `tspan`s and `textPath`s). Scripts, styles
//! and metadata are skipped, and a drawing without text gives no text.

use super::tree::{self, Element, Renderer, Role, Rules};
use crate::markdown;
use crate::{Control, ExtractError, Extraction, Limits, Metadata};

struct Svg;

impl Rules for Svg {
    fn role(&self, element: &Element, _parent: &Element) -> Role {
        match element.name.as_str() {
            "script" | "style" | "metadata" => Role::Skip,
            "title" | "desc" | "text" | "foreignObject" => Role::Custom,
            // Groups, shapes, `defs`, `symbol`, `a`, `switch`: containers of the above.
            _ => Role::Block,
        }
    }

    fn custom(
        &self,
        renderer: &mut Renderer<'_>,
        element: &Element,
        _level: usize,
        out: &mut Vec<String>,
    ) -> Result<(), ExtractError> {
        let text = renderer.text(element);
        renderer.push(out, text);
        Ok(())
    }
}

pub(super) fn render(
    root: &Element,
    limits: &Limits,
    control: &Control,
) -> Result<Extraction, ExtractError> {
    let mut extraction = tree::render(&Svg, limits, control, |renderer, out| {
        let title = root.child_text("title");
        // Text outside `text` elements is whitespace (or stray characters a viewer never shows):
        // only the custom elements above write anything.
        walk(renderer, root, out)?;
        Ok(Metadata {
            title,
            ..Metadata::default()
        })
    })?;
    extraction.markdown = markdown::tidy(&extraction.markdown);
    Ok(extraction)
}

fn walk(
    renderer: &mut Renderer<'_>,
    element: &Element,
    out: &mut Vec<String>,
) -> Result<(), ExtractError> {
    for child in element.elements() {
        renderer.tick()?;
        match renderer.rules.role(child, element) {
            Role::Skip => {}
            Role::Custom => {
                let rules = renderer.rules;
                rules.custom(renderer, child, 1, out)?;
            }
            _ => walk(renderer, child, out)?,
        }
    }
    Ok(())
}
