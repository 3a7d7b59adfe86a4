//! Embedding throughput: passages of about N words cut from a BEIR-style corpus.jsonl
//! (Cranfield by default), embedded with 1 and 2 threads, passages/s printed per thread count.
//! Run by bench/embed.sh in release mode.
//!
//!   throughput MODEL_DIR CORPUS_JSONL [PASSAGES=512] [WORDS=200] [THREADS=1,2]

use std::time::Instant;

use shelf_embed::{Embedder, Options};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let (Some(model), Some(corpus)) = (args.get(1), args.get(2)) else {
        return Err(
            "usage: throughput MODEL_DIR CORPUS_JSONL [PASSAGES] [WORDS] [THREADS,..]".into(),
        );
    };
    let passages: usize = args.get(3).map_or(Ok(512), |s| s.parse())?;
    let words: usize = args.get(4).map_or(Ok(200), |s| s.parse())?;
    let threads: Vec<usize> = args
        .get(5)
        .map_or("1,2", String::as_str)
        .split(',')
        .map(str::parse)
        .collect::<Result<_, _>>()?;

    // All the corpus's words in order, cut into passages of `words` words.
    let mut all = Vec::new();
    for line in std::fs::read_to_string(corpus)?.lines() {
        let doc: serde_json::Value = serde_json::from_str(line)?;
        for field in ["title", "text"] {
            if let Some(t) = doc[field].as_str() {
                all.extend(t.split_whitespace().map(str::to_string));
            }
        }
    }
    let texts: Vec<String> = all
        .chunks(words)
        .take(passages)
        .map(|c| c.join(" "))
        .collect();
    if texts.len() < passages {
        return Err(format!(
            "the corpus has only {} passages of {words} words",
            texts.len()
        )
        .into());
    }
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();

    for &t in &threads {
        let start = Instant::now();
        let e = Embedder::load_with(
            std::path::Path::new(model),
            Options {
                threads: t,
                ..Options::default()
            },
        )?;
        let load = start.elapsed();
        let tokens: usize = refs
            .iter()
            .map(|s| e.count_tokens(s).map(|n| n.min(e.max_tokens())))
            .sum::<Result<_, _>>()?;
        let cpu0 = cpu_seconds();
        let start = Instant::now();
        let v = e.embed(&refs)?;
        let secs = start.elapsed().as_secs_f64();
        let cpu = cpu_seconds() - cpu0;
        assert_eq!(v.len(), refs.len());
        // CPU seconds say whether the threads ran (cpu/wall near `t` on idle cores) and give a
        // figure that holds on a shared machine, where wall time depends on the neighbours.
        println!(
            "threads {t}: {} passages of {words} words ({:.0} tokens each after truncation) in {secs:.2} s = {:.1} passages/s; CPU {cpu:.2} s ({:.2} cores busy) = {:.1} passages per CPU-second (load {:.2} s, {})",
            refs.len(),
            tokens as f64 / refs.len() as f64,
            refs.len() as f64 / secs,
            cpu / secs,
            refs.len() as f64 / cpu,
            load.as_secs_f64(),
            e.identity()
        );
    }
    Ok(())
}

/// User + system CPU time of this process (Linux: /proc/self/stat, in USER_HZ = 100 ticks/s);
/// NaN elsewhere.
fn cpu_seconds() -> f64 {
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else {
        return f64::NAN;
    };
    // fields after the command name (which may hold spaces, so split after its closing paren)
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<&str> = rest.split_whitespace().collect();
    let tick = |i: usize| {
        f.get(i)
            .and_then(|s| s.parse::<f64>().ok())
            .unwrap_or(f64::NAN)
    };
    // utime and stime are fields 14 and 15 of stat, 12 and 13 after the paren
    (tick(11) + tick(12)) / 100.0
}
