//! Reading and checking a sentence-transformers directory's JSON files: config.json (BERT only),
//! modules.json, the pooling module's config.json and sentence_bert_config.json.

use std::path::{Path, PathBuf};

use candle_transformers::models::bert::Config as BertConfig;
use serde::Deserialize;

use crate::EmbedError;

/// How token vectors become one text vector (the sentence-transformers Pooling module).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pooling {
    /// Mean of the real (unpadded) tokens' vectors.
    Mean,
    /// The `[CLS]` token's vector.
    Cls,
}

impl Pooling {
    pub fn as_str(self) -> &'static str {
        match self {
            Pooling::Mean => "mean",
            Pooling::Cls => "cls",
        }
    }
}

/// What the directory says, checked.
#[derive(Debug)]
pub(crate) struct Layout {
    /// The directory's name, the readable part of the identity.
    pub name: String,
    pub bert: BertConfig,
    pub pooling: Pooling,
    pub normalize: bool,
    pub max_tokens: usize,
}

/// A file the directory must have.
pub(crate) fn require(path: &Path) -> Result<(), EmbedError> {
    if path.is_file() {
        Ok(())
    } else {
        Err(EmbedError::MissingFile(path.to_path_buf()))
    }
}

fn read_json<T: for<'de> Deserialize<'de>>(path: &Path) -> Result<T, EmbedError> {
    require(path)?;
    let text = std::fs::read_to_string(path).map_err(|source| EmbedError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    serde_json::from_str(&text).map_err(|e| EmbedError::InvalidFile {
        path: path.to_path_buf(),
        reason: e.to_string(),
    })
}

#[derive(Deserialize)]
struct Module {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    path: String,
}

#[derive(Deserialize)]
struct PoolingConfig {
    word_embedding_dimension: Option<usize>,
    #[serde(default)]
    pooling_mode_cls_token: bool,
    #[serde(default)]
    pooling_mode_mean_tokens: bool,
    #[serde(default)]
    pooling_mode_max_tokens: bool,
    #[serde(default)]
    pooling_mode_mean_sqrt_len_tokens: bool,
    #[serde(default)]
    pooling_mode_weightedmean_tokens: bool,
    #[serde(default)]
    pooling_mode_lasttoken: bool,
}

#[derive(Deserialize)]
struct SentenceBertConfig {
    max_seq_length: Option<usize>,
    #[serde(default)]
    do_lower_case: bool,
}

pub(crate) fn read(dir: &Path) -> Result<Layout, EmbedError> {
    let config_path = dir.join("config.json");
    let raw: serde_json::Value = read_json(&config_path)?;
    let unsupported = |path: &Path, reason: String| EmbedError::Unsupported {
        path: path.to_path_buf(),
        reason,
    };
    let model_type = raw.get("model_type").and_then(|v| v.as_str());
    if model_type != Some("bert") {
        return Err(unsupported(
            &config_path,
            format!(
                "model_type is {}, only \"bert\" is supported",
                model_type.map_or_else(|| "missing".to_string(), |t| format!("{t:?}"))
            ),
        ));
    }
    let bert: BertConfig = serde_json::from_value(raw).map_err(|e| EmbedError::InvalidFile {
        path: config_path.clone(),
        reason: e.to_string(),
    })?;
    check_bert(&config_path, &bert)?;

    // Without modules.json, sentence-transformers' defaults: Transformer + mean Pooling in
    // 1_Pooling. Normalisation then defaults to on: every sentence-transformers retrieval model
    // Shelf targets is compared by cosine, and Shelf's search scores unit vectors by dot product.
    let modules_path = dir.join("modules.json");
    let (pooling_dir, normalize) = if modules_path.is_file() {
        let modules: Vec<Module> = read_json(&modules_path)?;
        let mut pooling_dir = None;
        let mut normalize = false;
        for m in &modules {
            let kind = m.kind.rsplit('.').next().unwrap_or(&m.kind);
            match kind {
                "Transformer" => {}
                "Pooling" => pooling_dir = Some(m.path.clone()),
                "Normalize" => normalize = true,
                other => {
                    return Err(unsupported(
                        &modules_path,
                        format!(
                            "module {other:?} is not supported (only Transformer, Pooling, Normalize)"
                        ),
                    ));
                }
            }
        }
        let Some(pooling_dir) = pooling_dir else {
            return Err(unsupported(
                &modules_path,
                "it has no Pooling module".into(),
            ));
        };
        (pooling_dir, normalize)
    } else {
        ("1_Pooling".to_string(), true)
    };
    let pooling_path: PathBuf = dir.join(&pooling_dir).join("config.json");
    let pc: PoolingConfig = read_json(&pooling_path)?;
    if let Some(d) = pc.word_embedding_dimension
        && d != bert.hidden_size
    {
        return Err(EmbedError::InvalidFile {
            path: pooling_path,
            reason: format!(
                "word_embedding_dimension {d} is not config.json's hidden_size {}",
                bert.hidden_size
            ),
        });
    }
    let modes = [
        ("cls_token", pc.pooling_mode_cls_token),
        ("mean_tokens", pc.pooling_mode_mean_tokens),
        ("max_tokens", pc.pooling_mode_max_tokens),
        ("mean_sqrt_len_tokens", pc.pooling_mode_mean_sqrt_len_tokens),
        ("weightedmean_tokens", pc.pooling_mode_weightedmean_tokens),
        ("lasttoken", pc.pooling_mode_lasttoken),
    ];
    let on: Vec<&str> = modes.iter().filter(|(_, v)| *v).map(|(n, _)| *n).collect();
    let pooling = match on.as_slice() {
        ["mean_tokens"] => Pooling::Mean,
        ["cls_token"] => Pooling::Cls,
        [] => return Err(unsupported(&pooling_path, "no pooling mode is set".into())),
        modes => {
            return Err(unsupported(
                &pooling_path,
                format!(
                    "pooling {} is not supported (only mean or cls, alone)",
                    modes.join("+")
                ),
            ));
        }
    };

    let st_path = dir.join("sentence_bert_config.json");
    let (max_seq, lowercase) = if st_path.is_file() {
        let st: SentenceBertConfig = read_json(&st_path)?;
        (st.max_seq_length, st.do_lower_case)
    } else {
        (None, false)
    };
    if lowercase {
        // sentence-transformers lowercases the text itself then; uncased BERT tokenizers
        // lowercase anyway, and no model Shelf targets sets it.
        return Err(unsupported(
            &st_path,
            "do_lower_case is not supported".into(),
        ));
    }
    let max_tokens = match max_seq {
        Some(0) => {
            return Err(EmbedError::InvalidFile {
                path: st_path,
                reason: "max_seq_length is 0".into(),
            });
        }
        // Positions past the embedding table do not exist: never more than it holds.
        Some(n) => n.min(bert.max_position_embeddings),
        None => bert.max_position_embeddings,
    };

    let name = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| "model".into());
    Ok(Layout {
        name,
        bert,
        pooling,
        normalize,
        max_tokens,
    })
}

/// Sizes that would make the forward pass fail or panic rather than refuse at load.
fn check_bert(path: &Path, c: &BertConfig) -> Result<(), EmbedError> {
    let invalid = |reason: String| EmbedError::InvalidFile {
        path: path.to_path_buf(),
        reason,
    };
    for (name, v) in [
        ("vocab_size", c.vocab_size),
        ("hidden_size", c.hidden_size),
        ("num_hidden_layers", c.num_hidden_layers),
        ("num_attention_heads", c.num_attention_heads),
        ("intermediate_size", c.intermediate_size),
        ("max_position_embeddings", c.max_position_embeddings),
        ("type_vocab_size", c.type_vocab_size),
    ] {
        if v == 0 {
            return Err(invalid(format!("{name} is 0")));
        }
    }
    if !c.hidden_size.is_multiple_of(c.num_attention_heads) {
        return Err(invalid(format!(
            "hidden_size {} is not a multiple of num_attention_heads {}",
            c.hidden_size, c.num_attention_heads
        )));
    }
    if !(c.layer_norm_eps.is_finite() && c.layer_norm_eps > 0.0) {
        return Err(invalid(format!(
            "layer_norm_eps {} is not positive",
            c.layer_norm_eps
        )));
    }
    Ok(())
}
