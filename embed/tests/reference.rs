//! all-MiniLM-L6-v2 against reference vectors computed independently (numpy, see
//! fixtures/make_reference.py): each of the 20 sentences' cosine similarity must be ≥ 0.999.
//!
//! The model is not in the repository: `scripts/fetch-embedding-model` puts it in a cache
//! directory. Without it the test skips, unless SHELF_REQUIRE_EMBEDDING_MODEL=1 (CI), where it
//! fails.

use shelf_embed::{Embedder, Options};

#[path = "../../tests/support/embedding_model.rs"]
mod embedding_model;
use embedding_model::model_or_skip;

struct Reference {
    texts: Vec<String>,
    tokens: Vec<usize>,
    vectors: Vec<Vec<f32>>,
}

fn reference() -> Reference {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/reference.json");
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).expect("read reference.json"))
            .expect("parse");
    let mut r = Reference {
        texts: vec![],
        tokens: vec![],
        vectors: vec![],
    };
    for s in doc["sentences"].as_array().expect("sentences") {
        r.texts.push(s["text"].as_str().expect("text").to_string());
        r.tokens
            .push(s["tokens"].as_u64().expect("tokens") as usize);
        r.vectors.push(
            s["vector"]
                .as_array()
                .expect("vector")
                .iter()
                .map(|x| x.as_f64().expect("float") as f32)
                .collect(),
        );
    }
    assert_eq!(r.texts.len(), 20);
    r
}

fn cosine(a: &[f32], b: &[f32]) -> f64 {
    let dot: f64 = a.iter().zip(b).map(|(x, y)| *x as f64 * *y as f64).sum();
    let na: f64 = a.iter().map(|x| (*x as f64).powi(2)).sum::<f64>().sqrt();
    let nb: f64 = b.iter().map(|x| (*x as f64).powi(2)).sum::<f64>().sqrt();
    dot / (na * nb)
}

#[test]
fn minilm_matches_the_reference_vectors() {
    let Some(dir) = model_or_skip() else { return };
    let e = Embedder::load_with(
        &dir,
        Options {
            threads: 2,
            batch_size: 8,
        },
    )
    .expect("load the model");
    assert_eq!(e.dims(), 384);
    assert_eq!(e.max_tokens(), 256);
    let id = e.identity();
    assert!(
        id.starts_with("all-MiniLM-L6-v2@") && id.ends_with("/384/mean/norm"),
        "{id}"
    );

    let r = reference();
    for (text, &tokens) in r.texts.iter().zip(&r.tokens) {
        let n = e.count_tokens(text).expect("count");
        if tokens < 256 {
            assert_eq!(n, tokens, "{text:?}");
        } else {
            assert!(
                n > 256,
                "the long sentence must exceed the limit to test truncation: {n}"
            );
        }
    }

    let texts: Vec<&str> = r.texts.iter().map(String::as_str).collect();
    let got = e.embed(&texts).expect("embed");
    let mut min = f64::MAX;
    for ((text, want), v) in r.texts.iter().zip(&r.vectors).zip(&got) {
        assert_eq!(v.len(), 384);
        // cosine cannot see the scale: the model's Normalize module must make unit vectors
        let norm = v.iter().map(|x| (*x as f64).powi(2)).sum::<f64>().sqrt();
        assert!((norm - 1.0).abs() < 1e-4, "norm {norm} for {text:?}");
        let c = cosine(v, want);
        eprintln!(
            "cosine {c:.7}  {:?}",
            text.chars().take(50).collect::<String>()
        );
        assert!(c >= 0.999, "cosine {c} < 0.999 for {text:?}");
        min = min.min(c);
    }
    eprintln!(
        "minimum cosine similarity over {} sentences: {min:.9} (1 - min = {:.1e})",
        got.len(),
        1.0 - min
    );
}
