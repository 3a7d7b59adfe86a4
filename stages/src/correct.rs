//! `correct`: language-model correction of OCR text, page by page. Which pages are sent is
//! `SHELF_OCR_LLM_CORRECTION` (`always`, `low-confidence`, `never`); the model is
//! `SHELF_OCR_LLM_MODEL` (empty: the provider's main model). A correction that rewrites the
//! page instead of fixing it is refused and the page keeps its OCR text, with a warning event;
//! so is one whose answer was twice cut at its length bound (`answer_truncated`).
//! Each page is checkpointed, so a resumed run pays for no page twice. A page's record is
//! updated through a fenced `write_now` once its checkpoint is saved, and every corrected
//! record again with the stage's success.

use std::collections::HashMap;
use std::sync::Arc;

use async_trait::async_trait;
use futures::{StreamExt, TryStreamExt};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use shelf_documents::DocumentStore;
use shelf_documents::pages::{PageRecord, PageSource, upsert_pages_statements};
use shelf_engine::{Stage, StageContext, StageError};

use crate::StageDeps;
use crate::chunk::fidelity_problem;
use crate::errors::{from_documents, from_provider};
use crate::metrics;
use crate::ocr::{TEXT_KIND_OCR, joined_text, this_runs_pages};
use crate::provider::{CorrectRequest, Provider};
use crate::texts::save_stage_text;

/// Which OCR pages go to the language model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum CorrectionMode {
    /// Every OCR page.
    #[default]
    Always,
    /// Pages whose confidence is under `SHELF_OCR_LOW_CONFIDENCE_THRESHOLD`.
    LowConfidence,
    /// None: the stage passes the OCR text through.
    Never,
}

impl CorrectionMode {
    /// The setting's name for the mode (`SHELF_OCR_LLM_CORRECTION`, which the settings parse
    /// into this enum once).
    fn as_str(self) -> &'static str {
        match self {
            CorrectionMode::Always => "always",
            CorrectionMode::LowConfidence => "low-confidence",
            CorrectionMode::Never => "never",
        }
    }
}

/// How the `correct` stage works.
#[derive(Debug, Clone)]
pub struct CorrectionSettings {
    pub mode: CorrectionMode,
    /// The model for correction; empty: the provider's main model.
    pub model: String,
    /// Pages under this mean confidence are low-confidence.
    pub low_confidence_threshold: f64,
}

impl Default for CorrectionSettings {
    fn default() -> Self {
        CorrectionSettings {
            mode: CorrectionMode::Always,
            model: String::new(),
            low_confidence_threshold: 85.0,
        }
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CorrectOptions {}

pub struct Correct {
    documents: DocumentStore,
    provider: Arc<dyn Provider>,
    settings: CorrectionSettings,
    concurrency: usize,
}

impl Correct {
    pub fn new(deps: &StageDeps) -> Self {
        Correct {
            documents: deps.documents.clone(),
            provider: deps.provider.clone(),
            settings: deps.correction.clone(),
            concurrency: deps.llm_concurrency.max(1),
        }
    }
}

/// What happened to one page.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Verdict {
    Corrected,
    /// The model returned the page as it was.
    Unchanged,
    /// The model rewrote the page; it keeps its OCR text.
    Rejected,
}

/// A page's checkpoint.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct CorrectedPage {
    text: String,
    verdict: Verdict,
    problem: Option<String>,
}

#[async_trait]
impl Stage for Correct {
    const KIND: &'static str = "correct";
    type Options = CorrectOptions;

    async fn run(
        &self,
        _options: &CorrectOptions,
        ctx: &StageContext,
    ) -> Result<Value, StageError> {
        let db = &self.documents.db;
        let document_id = ctx.subject.clone();
        let mode = self.settings.mode;
        let mut pages = this_runs_pages(db, ctx, &document_id).await?;
        let threshold = self.settings.low_confidence_threshold;
        let chosen: Vec<PageRecord> = pages
            .iter()
            .filter(|p| p.source == PageSource::Ocr && !p.text.trim().is_empty())
            .filter(|p| match mode {
                CorrectionMode::Always => true,
                CorrectionMode::LowConfidence => p.confidence.is_some_and(|c| c < threshold),
                CorrectionMode::Never => false,
            })
            .cloned()
            .collect();
        if mode == CorrectionMode::Never {
            ctx.event(
                "stage_note",
                "OCR correction is off (SHELF_OCR_LLM_CORRECTION=never): OCR text kept as read",
            )
            .await?;
        }
        let pending: Vec<_> = chosen
            .iter()
            .map(|page| self.correct_page(ctx, page))
            .collect();
        // The first failed page fails the stage: `try_collect` returns at once and drops the
        // pages still in flight, and no further page is sent to the model.
        let results: Vec<(u32, CorrectedPage, bool)> = futures::stream::iter(pending)
            .buffered(self.concurrency)
            .try_collect()
            .await?;
        let mut verdicts: HashMap<u32, CorrectedPage> = HashMap::new();
        let mut reused = 0usize;
        for (number, page, was_reused) in results {
            reused += usize::from(was_reused);
            verdicts.insert(number, page);
        }
        let count = |v: Verdict| verdicts.values().filter(|p| p.verdict == v).count();
        let (corrected, unchanged, rejected) = (
            count(Verdict::Corrected),
            count(Verdict::Unchanged),
            count(Verdict::Rejected),
        );
        for page in &mut pages {
            if let Some(done) = verdicts.get(&page.number) {
                apply(page, done);
            }
        }
        // Once more with the stage's success: a page whose checkpoint committed but whose
        // record did not (the lease lost in between) is reused without a write of its own.
        let sent: Vec<PageRecord> = pages
            .iter()
            .filter(|p| verdicts.contains_key(&p.number))
            .cloned()
            .collect();
        for statement in
            upsert_pages_statements(&document_id, &ctx.run_id, &sent).map_err(from_documents)?
        {
            ctx.write_on_success(statement);
        }
        if !chosen.is_empty() && corrected == 0 {
            ctx.event(
                "stage_note",
                format!(
                    "correction changed nothing on the {} page(s) sent ({} unchanged, {} refused)",
                    chosen.len(),
                    unchanged,
                    rejected
                ),
            )
            .await?;
        }
        if reused > 0 {
            ctx.event(
                "pages_reused",
                format!(
                    "{reused} of {} corrected pages reused from checkpoints",
                    chosen.len()
                ),
            )
            .await?;
        }
        let body = joined_text(&pages);
        let saved = save_stage_text(ctx, &document_id, TEXT_KIND_OCR, body);
        let rejected_pages: Vec<u32> = sorted_numbers(&verdicts, Verdict::Rejected);
        Ok(json!({
            "text_id": saved.id,
            "pages_run_id": ctx.run_id,
            "chars": saved.chars,
            "mode": mode.as_str(),
            "provider": self.provider.name(),
            "pages_sent": chosen.len(),
            "corrected_pages": corrected,
            "unchanged_pages": unchanged,
            "rejected_pages": rejected_pages,
            "reused_pages": reused,
        }))
    }
}

impl Correct {
    async fn correct_page(
        &self,
        ctx: &StageContext,
        page: &PageRecord,
    ) -> Result<(u32, CorrectedPage, bool), StageError> {
        let (number, text) = (page.number, page.text.as_str());
        // The key names the page's content, so a page read again differently is corrected again.
        let digest = hex::encode(&Sha256::digest(format!("{}\0{text}", self.settings.model))[..8]);
        let key = format!("page-{number}-{digest}");
        if let Some(done) = ctx.part::<CorrectedPage>(&key).await? {
            return Ok((number, done, true));
        }
        let request = CorrectRequest {
            text,
            model: &self.settings.model,
        };
        // An answer cut at its bound is asked once more, like an unfaithful cleaning answer;
        // twice cut, the page keeps its OCR text.
        let mut proposed = None;
        for _ in 0..2 {
            match self.provider.correct(request).await {
                Ok(answer) => {
                    proposed = Some(answer);
                    break;
                }
                Err(e) if e.is_truncated() => {}
                Err(e) => return Err(from_provider(e)),
            }
        }
        let done = match proposed {
            None => {
                refuse(
                    ctx,
                    number,
                    text,
                    "the answer was cut off at its length bound".into(),
                )
                .await?
            }
            Some(proposed) if proposed == text => CorrectedPage {
                text: text.to_string(),
                verdict: Verdict::Unchanged,
                problem: None,
            },
            Some(proposed) => match correction_problem(text, &proposed) {
                Some(problem) => refuse(ctx, number, text, problem).await?,
                None => {
                    metrics::ocr().page_corrected();
                    CorrectedPage {
                        text: proposed,
                        verdict: Verdict::Corrected,
                        problem: None,
                    }
                }
            },
        };
        ctx.save_part(&key, &done).await?;
        let mut record = page.clone();
        apply(&mut record, &done);
        ctx.write_now(
            upsert_pages_statements(&ctx.subject, &ctx.run_id, std::slice::from_ref(&record))
                .map_err(from_documents)?,
        )
        .await?;
        Ok((number, done, false))
    }
}

/// A page that keeps its OCR text because its correction was refused for `problem`, with a
/// warning event saying so.
async fn refuse(
    ctx: &StageContext,
    number: u32,
    text: &str,
    problem: String,
) -> Result<CorrectedPage, StageError> {
    metrics::ocr().correction_rejected();
    ctx.event(
        "stage_warning",
        format!("page {number} kept its OCR text: the correction was refused ({problem})"),
    )
    .await?;
    Ok(CorrectedPage {
        text: text.to_string(),
        verdict: Verdict::Rejected,
        problem: Some(problem),
    })
}

fn apply(page: &mut PageRecord, done: &CorrectedPage) {
    page.text = done.text.clone();
    page.corrected = done.verdict == Verdict::Corrected;
    if let Some(problem) = &done.problem {
        let warning = format!("correction refused: {problem}");
        if !page.warnings.contains(&warning) {
            page.warnings.push(warning);
        }
    }
}

fn sorted_numbers(verdicts: &HashMap<u32, CorrectedPage>, verdict: Verdict) -> Vec<u32> {
    let mut numbers: Vec<u32> = verdicts
        .iter()
        .filter(|(_, p)| p.verdict == verdict)
        .map(|(n, _)| *n)
        .collect();
    numbers.sort_unstable();
    numbers
}

/// Why a proposed correction is not a correction: what the cleaning check refuses (length,
/// lost numbers and identifiers), or too few of the page's words kept. Fixing OCR errors
/// changes a few words; a rewrite changes most.
fn correction_problem(source: &str, corrected: &str) -> Option<String> {
    if let Some(problem) = fidelity_problem(source, corrected) {
        return Some(problem);
    }
    let words = |s: &str| -> Vec<String> {
        s.split_whitespace()
            .map(|w| {
                w.trim_matches(|c: char| !c.is_alphanumeric())
                    .to_lowercase()
            })
            .filter(|w| !w.is_empty())
            .collect()
    };
    let before = words(source);
    if before.is_empty() {
        return None;
    }
    let mut after: HashMap<String, usize> = HashMap::new();
    for word in words(corrected) {
        *after.entry(word).or_default() += 1;
    }
    let kept = before
        .iter()
        .filter(|w| match after.get_mut(*w) {
            Some(n) if *n > 0 => {
                *n -= 1;
                true
            }
            _ => false,
        })
        .count();
    let share = kept as f64 / before.len() as f64;
    let floor = if before.len() >= 20 { 0.8 } else { 0.5 };
    (share < floor).then(|| {
        format!(
            "only {:.0}% of the page's words kept (at least {:.0}% expected of a correction)",
            share * 100.0,
            floor * 100.0
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_few_fixed_words_are_a_correction() {
        let source = "Tbe quick brovvn fox jumps over the lazy dog. It was a c0ld day in the \
                      north of the country, and the fox was hungry after a long winter.";
        let fixed = "The quick brown fox jumps over the lazy dog. It was a cold day in the \
                     north of the country, and the fox was hungry after a long winter.";
        assert_eq!(correction_problem(source, fixed), None);
    }

    #[test]
    fn a_rewrite_is_refused() {
        let source = "The committee met on Tuesday to review the budget for the coming year and \
                      agreed to postpone the decision on the new library until the spring.";
        let rewrite = "On Tuesday a group gathered, looked over next year's spending plan, and \
                       chose to delay choosing about building another book depot till later on.";
        assert!(correction_problem(source, rewrite).is_some());
        assert!(correction_problem(source, "A meeting happened.").is_some());
    }
}
