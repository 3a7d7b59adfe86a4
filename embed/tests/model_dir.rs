//! Loading and refusing model directories, on a tiny BERT built here (no downloaded model):
//! a good directory loads and embeds, and each kind of bad directory is refused with an
//! `EmbedError` naming what is wrong, never a panic.

use std::collections::HashMap;
use std::path::Path;

use candle_core::{DType, Device, Tensor};
use shelf_embed::{EmbedError, Embedder, Options};

const HIDDEN: usize = 8;
const VOCAB: usize = 16;

fn config(hidden: usize) -> serde_json::Value {
    serde_json::json!({
        "architectures": ["BertModel"],
        "model_type": "bert",
        "vocab_size": VOCAB,
        "hidden_size": hidden,
        "num_hidden_layers": 1,
        "num_attention_heads": 2,
        "intermediate_size": 16,
        "hidden_act": "gelu",
        "hidden_dropout_prob": 0.1,
        "attention_probs_dropout_prob": 0.1,
        "max_position_embeddings": 32,
        "type_vocab_size": 2,
        "initializer_range": 0.02,
        "layer_norm_eps": 1e-12,
        "pad_token_id": 0,
        "position_embedding_type": "absolute"
    })
}

/// Deterministic, varied weights (a ramp through sin), so vectors differ between texts.
fn tensor(shape: &[usize], seed: usize) -> Tensor {
    let n: usize = shape.iter().product();
    let data: Vec<f32> = (0..n)
        .map(|i| ((i * 7 + seed * 13) as f32 * 0.37).sin() * 0.5)
        .collect();
    Tensor::from_vec(data, shape, &Device::Cpu).expect("tensor")
}

fn weights(path: &Path) {
    let h = HIDDEN;
    let mut t: HashMap<String, Tensor> = HashMap::new();
    let mut seed = 0;
    let mut put = |name: &str, shape: &[usize]| {
        seed += 1;
        let v = if name.ends_with("LayerNorm.weight") {
            Tensor::ones(shape, DType::F32, &Device::Cpu).expect("ones")
        } else {
            tensor(shape, seed)
        };
        t.insert(name.to_string(), v);
    };
    put("embeddings.word_embeddings.weight", &[VOCAB, h]);
    put("embeddings.position_embeddings.weight", &[32, h]);
    put("embeddings.token_type_embeddings.weight", &[2, h]);
    put("embeddings.LayerNorm.weight", &[h]);
    put("embeddings.LayerNorm.bias", &[h]);
    let p = "encoder.layer.0.";
    for m in [
        "attention.self.query",
        "attention.self.key",
        "attention.self.value",
        "attention.output.dense",
    ] {
        put(&format!("{p}{m}.weight"), &[h, h]);
        put(&format!("{p}{m}.bias"), &[h]);
    }
    put(&format!("{p}attention.output.LayerNorm.weight"), &[h]);
    put(&format!("{p}attention.output.LayerNorm.bias"), &[h]);
    put(&format!("{p}intermediate.dense.weight"), &[16, h]);
    put(&format!("{p}intermediate.dense.bias"), &[16]);
    put(&format!("{p}output.dense.weight"), &[h, 16]);
    put(&format!("{p}output.dense.bias"), &[h]);
    put(&format!("{p}output.LayerNorm.weight"), &[h]);
    put(&format!("{p}output.LayerNorm.bias"), &[h]);
    candle_core::safetensors::save(&t, path).expect("save safetensors");
}

fn write_json(path: &Path, v: &serde_json::Value) {
    std::fs::write(path, serde_json::to_vec_pretty(v).expect("json")).expect("write");
}

/// A complete, valid sentence-transformers directory named `tiny` inside a temporary dir.
fn tiny_model() -> (tempfile::TempDir, std::path::PathBuf) {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("tiny");
    std::fs::create_dir_all(dir.join("1_Pooling")).expect("mkdir");
    write_json(&dir.join("config.json"), &config(HIDDEN));
    weights(&dir.join("model.safetensors"));
    std::fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/tiny_tokenizer.json"),
        dir.join("tokenizer.json"),
    )
    .expect("copy tokenizer");
    write_json(
        &dir.join("modules.json"),
        &serde_json::json!([
            {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
            {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
            {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"}
        ]),
    );
    write_json(
        &dir.join("1_Pooling/config.json"),
        &serde_json::json!({"word_embedding_dimension": HIDDEN, "pooling_mode_mean_tokens": true}),
    );
    write_json(
        &dir.join("sentence_bert_config.json"),
        &serde_json::json!({"max_seq_length": 6, "do_lower_case": false}),
    );
    (tmp, dir)
}

fn load(dir: &Path) -> Result<Embedder, EmbedError> {
    Embedder::load_with(
        dir,
        Options {
            threads: 1,
            batch_size: 2,
        },
    )
}

fn refused(dir: &Path) -> EmbedError {
    match load(dir) {
        Ok(_) => panic!("{} was accepted", dir.display()),
        Err(e) => {
            assert_eq!(e.code(), "embedding_model_invalid", "{e}");
            e
        }
    }
}

fn norm(v: &[f32]) -> f32 {
    v.iter().map(|x| x * x).sum::<f32>().sqrt()
}

/// Loaded once per process and shared between threads (`Arc<Embedder>`).
#[test]
fn an_embedder_is_send_and_sync() {
    fn shared<T: Send + Sync>() {}
    shared::<Embedder>();
}

#[test]
fn a_good_directory_loads_and_embeds_unit_vectors() {
    let (_tmp, dir) = tiny_model();
    let e = load(&dir).expect("tiny model loads");
    assert_eq!(e.dims(), HIDDEN);
    assert_eq!(e.max_tokens(), 6);
    assert_eq!(e.threads(), 1);
    let id = e.identity();
    assert!(
        id.starts_with("tiny@") && id.ends_with("/8/mean/norm"),
        "{id}"
    );
    assert_eq!(
        id.split('@')
            .nth(1)
            .map(|s| s.split('/').next().map(str::len)),
        Some(Some(16))
    );

    let texts = [
        "hello world",
        "the books",
        "",
        "shelf searches a book, hello!",
    ];
    let v = e.embed(&texts).expect("embed");
    assert_eq!(v.len(), texts.len());
    for x in &v {
        assert_eq!(x.len(), HIDDEN);
        assert!((norm(x) - 1.0).abs() < 1e-5, "{x:?}");
    }
    assert_ne!(v[0], v[1]);
    assert!(e.embed(&[]).expect("empty").is_empty());

    // not truncated: [CLS] shelf search ##es a book , hello ! [SEP]
    assert_eq!(
        e.count_tokens("shelf searches a book, hello!")
            .expect("count"),
        10
    );
}

#[test]
fn padding_and_batch_composition_do_not_change_a_vector() {
    let (_tmp, dir) = tiny_model();
    let e = load(&dir).expect("tiny model loads");
    let alone = e.embed(&["hello"]).expect("alone");
    // batches of 2 sorted by length: "hello" is padded next to a longer text
    let mixed = e
        .embed(&["the books, world", "hello", "a", "shelf"])
        .expect("mixed");
    for (a, b) in alone[0].iter().zip(&mixed[1]) {
        assert!((a - b).abs() < 1e-5, "{:?} vs {:?}", alone[0], mixed[1]);
    }
    // truncated at max_tokens (6): whatever follows the 4th word piece does not count
    let long = e
        .embed(&[
            "hello world shelf book the a a a",
            "hello world shelf book world",
        ])
        .expect("long");
    for (a, b) in long[0].iter().zip(&long[1]) {
        assert!((a - b).abs() < 1e-5);
    }
}

#[test]
fn the_weights_digest_is_cached_beside_the_model() {
    let (_tmp, dir) = tiny_model();
    let first = load(&dir).expect("load").identity().to_string();
    let sidecar =
        std::fs::read_to_string(dir.join(".shelf-weights-sha256")).expect("sidecar written");
    assert_eq!(
        &sidecar[..16],
        &first.split('@').nth(1).expect("digest")[..16]
    );
    // A forged sidecar for a different file (other size) is ignored and rewritten.
    std::fs::write(
        dir.join(".shelf-weights-sha256"),
        format!("{} 1 1\n", "0".repeat(64)),
    )
    .expect("forge");
    assert_eq!(load(&dir).expect("load").identity(), first);
}

#[test]
fn a_missing_directory_is_refused() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let e = refused(&tmp.path().join("nope"));
    assert!(matches!(e, EmbedError::NotADirectory(_)), "{e}");
}

#[test]
fn a_missing_tokenizer_is_refused_by_name() {
    let (_tmp, dir) = tiny_model();
    std::fs::remove_file(dir.join("tokenizer.json")).expect("rm");
    let e = refused(&dir);
    assert!(matches!(e, EmbedError::MissingFile(_)), "{e}");
    assert!(e.to_string().contains("tokenizer.json"), "{e}");
}

#[test]
fn a_tokenizer_that_does_not_load_is_refused() {
    let (_tmp, dir) = tiny_model();
    std::fs::write(
        dir.join("tokenizer.json"),
        r#"{"version": "1.0", "model": {"type": "Nope"}}"#,
    )
    .expect("write");
    let e = refused(&dir);
    assert!(
        matches!(e, EmbedError::InvalidFile { .. }) && e.to_string().contains("tokenizer.json"),
        "{e}"
    );
}

#[test]
fn truncated_weights_are_refused() {
    let (_tmp, dir) = tiny_model();
    let path = dir.join("model.safetensors");
    let bytes = std::fs::read(&path).expect("read");
    for cut in [bytes.len() - 10, bytes.len() / 2, 40, 7, 0] {
        std::fs::write(&path, &bytes[..cut]).expect("truncate");
        let e = refused(&dir);
        assert!(
            e.to_string().contains("model.safetensors"),
            "cut at {cut}: {e}"
        );
    }
}

#[test]
fn missing_weights_are_refused_by_name() {
    let (_tmp, dir) = tiny_model();
    std::fs::remove_file(dir.join("model.safetensors")).expect("rm");
    let e = refused(&dir);
    assert!(
        matches!(e, EmbedError::MissingFile(_)) && e.to_string().contains("model.safetensors"),
        "{e}"
    );
}

#[test]
fn a_config_that_is_not_bert_is_refused() {
    let (_tmp, dir) = tiny_model();
    let mut c = config(HIDDEN);
    c["model_type"] = "xlm-roberta".into();
    write_json(&dir.join("config.json"), &c);
    let e = refused(&dir);
    assert!(
        matches!(e, EmbedError::Unsupported { .. }) && e.to_string().contains("xlm-roberta"),
        "{e}"
    );

    std::fs::write(dir.join("config.json"), "{ not json").expect("write");
    let e = refused(&dir);
    assert!(
        matches!(e, EmbedError::InvalidFile { .. }) && e.to_string().contains("config.json"),
        "{e}"
    );

    let mut c = config(HIDDEN);
    c["num_attention_heads"] = 3.into();
    write_json(&dir.join("config.json"), &c);
    let e = refused(&dir);
    assert!(e.to_string().contains("num_attention_heads"), "{e}");
}

#[test]
fn a_hidden_size_that_does_not_match_the_tensors_is_refused() {
    let (_tmp, dir) = tiny_model();
    write_json(&dir.join("config.json"), &config(16));
    write_json(
        &dir.join("1_Pooling/config.json"),
        &serde_json::json!({"word_embedding_dimension": 16, "pooling_mode_mean_tokens": true}),
    );
    let e = refused(&dir);
    assert!(matches!(e, EmbedError::Weights { .. }), "{e}");
    assert!(e.to_string().contains("shape"), "{e}");
}

#[test]
fn unsupported_pooling_and_modules_are_refused() {
    let (_tmp, dir) = tiny_model();
    write_json(
        &dir.join("1_Pooling/config.json"),
        &serde_json::json!({"word_embedding_dimension": HIDDEN, "pooling_mode_max_tokens": true}),
    );
    let e = refused(&dir);
    assert!(
        matches!(e, EmbedError::Unsupported { .. }) && e.to_string().contains("max_tokens"),
        "{e}"
    );

    std::fs::remove_file(dir.join("1_Pooling/config.json")).expect("rm");
    let e = refused(&dir);
    assert!(
        matches!(e, EmbedError::MissingFile(_)) && e.to_string().contains("1_Pooling"),
        "{e}"
    );

    write_json(
        &dir.join("1_Pooling/config.json"),
        &serde_json::json!({"word_embedding_dimension": HIDDEN, "pooling_mode_cls_token": true}),
    );
    write_json(
        &dir.join("modules.json"),
        &serde_json::json!([
            {"path": "", "type": "sentence_transformers.models.Transformer"},
            {"path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
            {"path": "2_Dense", "type": "sentence_transformers.models.Dense"}
        ]),
    );
    let e = refused(&dir);
    assert!(
        matches!(e, EmbedError::Unsupported { .. }) && e.to_string().contains("Dense"),
        "{e}"
    );

    // cls pooling without Normalize is supported, and the identity says so
    write_json(
        &dir.join("modules.json"),
        &serde_json::json!([
            {"path": "", "type": "sentence_transformers.models.Transformer"},
            {"path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}
        ]),
    );
    let e = load(&dir).expect("cls loads");
    assert!(e.identity().ends_with("/8/cls/raw"), "{}", e.identity());
}
