//! Run retention with the real binary, on a real SQLite file and on PostgreSQL: one document
//! processed again and again (succeeded and failed runs) with `SHELF_RUN_RETENTION=2`, then
//! `shelf admin db-maintain --json` prunes the superseded runs with their texts and events, and
//! the document's content, export, search and runs still answer.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::Value;
use shelf_db::sql::SqlExt;

use crate::pg_cluster::PgCluster;
use crate::support::Env;

/// Texts and events per run id, read from the database file.
fn rows_per_run(db: &Path) -> BTreeMap<String, (i64, i64)> {
    let db = db.to_path_buf();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Runtime::new().expect("runtime");
        rt.block_on(async {
            let conn = sea_orm::Database::connect(format!("sqlite://{}?mode=ro", db.display()))
                .await
                .expect("open");
            let mut out = BTreeMap::new();
            for (table, column) in [("document_texts", 0), ("run_events", 1)] {
                let rows = conn
                    .query_all_sql(sea_orm::Statement::from_string(
                        sea_orm::DbBackend::Sqlite,
                        format!("SELECT run_id, COUNT(*) AS n FROM {table} GROUP BY run_id"),
                    ))
                    .await
                    .expect("count");
                for row in rows {
                    let run: String = row.try_get("", "run_id").expect("run_id");
                    let n: i64 = row.try_get("", "n").expect("n");
                    let entry = out.entry(run).or_insert((0, 0));
                    if column == 0 {
                        entry.0 = n;
                    } else {
                        entry.1 = n;
                    }
                }
            }
            conn.close().await.expect("close");
            out
        })
    })
    .join()
    .expect("inspect")
}

/// Rows of `table`, by `shelf admin db-stats` (either backend).
fn table_rows(env: &Env, table: &str) -> i64 {
    let stats = env.json(&["admin", "db-stats", "--json"]);
    stats["tables"]
        .as_array()
        .expect("tables")
        .iter()
        .find(|t| t["table"] == table)
        .and_then(|t| t["rows"].as_i64())
        .unwrap_or_else(|| panic!("no {table} in {stats}"))
}

/// `shelf process DOC [--pipeline P] --json`: the run's id and status (a failed run exits 1).
fn process(env: &Env, doc: &str, pipeline: Option<&str>) -> (String, String) {
    let mut args = vec!["process", doc, "--json"];
    if let Some(p) = pipeline {
        args.extend(["--pipeline", p]);
    }
    let out = env.run(&args);
    let run: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "no JSON ({e}): {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (
        run["id"].as_str().expect("run id").to_string(),
        run["status"].as_str().expect("status").to_string(),
    )
}

#[test]
fn db_maintain_prunes_superseded_runs_and_the_document_still_reads() {
    prunes_and_still_reads(Env::new());
}

#[test]
fn db_maintain_prunes_superseded_runs_on_postgres() {
    let Some(cluster) = PgCluster::shared() else {
        eprintln!("skipped on PostgreSQL: no PostgreSQL server binaries here");
        return;
    };
    let url = cluster.create_database("retention");
    prunes_and_still_reads(Env::new().with("SHELF_DATABASE_URL", &url));
}

fn prunes_and_still_reads(env: Env) {
    let env = env.with("SHELF_RUN_RETENTION", "2");
    let postgres = env.vars.iter().any(|(k, _)| k == "SHELF_DATABASE_URL");
    // A pipeline that always fails: `clean` without the `extract` whose text it cleans.
    let pipelines = env.path().join("pipelines");
    std::fs::create_dir_all(&pipelines).expect("mkdir");
    std::fs::write(
        pipelines.join("broken.yaml"),
        "version: 1\nstages:\n  clean: { uses: clean }\n",
    )
    .expect("pipeline");
    let env = env.with("SHELF_PIPELINES_DIR", pipelines.to_str().expect("path"));
    let file = env.write(
        "notes/farriers.md",
        "# Farriers\n\nA farrier trims and shoes horses' hooves.\n",
    );
    let report = env.json(&["import", file.to_str().expect("path"), "--json"]);
    let record = &report["files"][0];
    assert_eq!(record["run_status"], "succeeded", "{report}");
    let doc = record["document_id"]
        .as_str()
        .expect("document")
        .to_string();
    let mut runs = vec![(
        record["run_id"].as_str().expect("run").to_string(),
        "succeeded".to_string(),
    )];
    runs.push(process(&env, &doc, None));
    runs.push(process(&env, &doc, Some("broken")));
    runs.push(process(&env, &doc, None));
    runs.push(process(&env, &doc, Some("broken")));
    runs.push(process(&env, &doc, Some("broken")));
    let statuses: Vec<&str> = runs.iter().map(|(_, s)| s.as_str()).collect();
    assert_eq!(
        statuses,
        [
            "succeeded",
            "succeeded",
            "failed",
            "succeeded",
            "failed",
            "failed"
        ]
    );
    let exported = env.run(&["export", &doc, "--format", "txt"]);
    assert!(exported.status.success());
    // Each succeeded run wrote two texts (raw and cleaned); a failed run of `broken` none.
    assert_eq!(table_rows(&env, "document_texts"), 6);
    let events_before = table_rows(&env, "run_events");
    let database = env.path().join("data/shelf.sqlite");
    let before = (!postgres).then(|| rows_per_run(&database));
    for (id, status) in &runs {
        let Some(before) = &before else { break };
        let (texts, events) = before.get(id).copied().unwrap_or_default();
        assert!(events > 0, "{id}");
        assert_eq!(texts > 0, status == "succeeded", "{id}: {texts} texts");
    }

    let maintained = env.json(&["admin", "db-maintain", "--json"]);
    // Kept: the two newest runs (failed) and the latest succeeded run (the fourth).
    assert_eq!(maintained["pruned_runs"], 3, "{maintained}");
    assert_eq!(maintained["run_retention"], 2, "{maintained}");
    let kept = [&runs[3].0, &runs[4].0, &runs[5].0];
    // The latest succeeded run's two texts are all that is left.
    assert_eq!(table_rows(&env, "document_texts"), 2);
    assert!(table_rows(&env, "run_events") < events_before);
    if let Some(before) = &before {
        let after = rows_per_run(&database);
        for (id, _) in &runs {
            let rows = after.get(id).copied().unwrap_or_default();
            if kept.contains(&id) {
                assert_eq!(rows, before[id], "{id} kept its rows");
            } else {
                assert_eq!(rows, (0, 0), "{id} pruned with its texts and events");
            }
        }
    }
    let listed = env.json(&["runs", "--json", "--limit", "100"]);
    let mut listed_ids: Vec<&str> = listed["runs"]
        .as_array()
        .expect("runs")
        .iter()
        .filter_map(|r| r["id"].as_str())
        .collect();
    listed_ids.sort_unstable();
    let mut kept_ids: Vec<&str> = kept.iter().map(|s| s.as_str()).collect();
    kept_ids.sort_unstable();
    assert_eq!(listed_ids, kept_ids, "{listed}");

    // The document reads as before: the latest succeeded run's text.
    let again = env.run(&["export", &doc, "--format", "txt"]);
    assert!(again.status.success());
    assert_eq!(again.stdout, exported.stdout);
    let json = env.json(&["export", &doc, "--format", "json"]);
    assert!(
        json["text"].as_str().is_some_and(|t| t.contains("farrier")),
        "{json}"
    );
    let hits = env.json(&["search", "farrier", "--json"]);
    assert_eq!(hits["document_ids"][0], doc.as_str(), "{hits}");

    // Nothing more to prune; a new run of the document is pruned down again.
    let again = env.json(&["admin", "db-maintain", "--json"]);
    assert_eq!(again["pruned_runs"], 0, "{again}");
    process(&env, &doc, None);
    let third = env.json(&["admin", "db-maintain", "--json"]);
    // The two newest now include the latest succeeded: the fourth run and the older failure go.
    assert_eq!(third["pruned_runs"], 2, "{third}");
}
