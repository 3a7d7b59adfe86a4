//! Tests of the settings parse: defaults, bounds, every bad variable at once, secrets.

use std::path::PathBuf;

use sha2::{Digest, Sha256};

use super::*;

fn vars(pairs: &[(&str, &str)]) -> HashMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[test]
fn secrets_lists_every_secret_value() {
    let s = Settings::from_vars(&vars(&[
        ("HOME", "/home/u"),
        ("SHELF_API_KEYS", "read:reader-key,writer-key"),
        ("SHELF_OTEL_HEADERS", "x-team=team-token"),
    ]))
    .unwrap();
    let mut secrets = s.secrets();
    secrets.sort();
    assert_eq!(secrets, vec!["reader-key", "team-token", "writer-key"]);
}

#[test]
fn defaults_follow_the_spec() {
    let s = Settings::from_vars(&vars(&[("HOME", "/home/u")])).unwrap();
    assert_eq!(
        s.storage.data_dir,
        PathBuf::from("/home/u/.local/share/shelf")
    );
    assert_eq!(
        s.storage.database_path,
        PathBuf::from("/home/u/.local/share/shelf/shelf.sqlite")
    );
    assert_eq!(s.api.max_upload_bytes, 104_857_600);
    assert_eq!(s.api.port, 8080);
    assert_eq!(s.llm.provider, LlmProvider::GenericCompatible);
    assert_eq!(s.llm.cleaning_prompt_version, CleaningPromptVersion::CmosV4);
    assert_eq!(s.storage.run_retention, 3);
    assert!(!s.auth_enabled());
}

#[test]
fn the_free_space_floor_and_the_full_check_interval_parse() {
    let s = Settings::from_vars(&vars(&[("HOME", "/home/u")])).unwrap();
    assert_eq!(s.storage.min_free_bytes, None, "unset: the default floor");
    assert_eq!(s.storage.ready_full_check_seconds, 600);
    let s = Settings::from_vars(&vars(&[
        ("SHELF_MIN_FREE_BYTES", "2_147_483_648"),
        ("SHELF_READY_FULL_CHECK_SECONDS", "0"),
    ]))
    .unwrap();
    assert_eq!(s.storage.min_free_bytes, Some(2_147_483_648));
    assert_eq!(s.storage.ready_full_check_seconds, 0);
    let off = Settings::from_vars(&vars(&[("SHELF_MIN_FREE_BYTES", "0")])).unwrap();
    assert_eq!(off.storage.min_free_bytes, Some(0));
    assert!(
        off.unknown_variables.is_empty(),
        "{:?}",
        off.unknown_variables
    );
    let bad = Settings::from_vars(&vars(&[("SHELF_MIN_FREE_BYTES", "1GB")])).unwrap_err();
    assert!(
        bad.problems
            .iter()
            .any(|p| p.contains("SHELF_MIN_FREE_BYTES")),
        "{bad}"
    );
}

#[test]
fn run_retention_keeps_at_least_one_run() {
    let of = |value: &str| {
        Settings::from_vars(&vars(&[
            ("HOME", "/home/u"),
            ("SHELF_RUN_RETENTION", value),
        ]))
    };
    assert_eq!(of("10").map(|s| s.storage.run_retention).ok(), Some(10));
    for bad in ["0", "-1", "many"] {
        let e = of(bad).expect_err(bad);
        assert!(
            e.problems.iter().any(|p| p.contains("SHELF_RUN_RETENTION")),
            "{bad}: {:?}",
            e.problems
        );
    }
}

#[test]
fn worker_concurrency_defaults_to_the_provider_and_yields_to_the_variable() {
    let of = |pairs: &[(&str, &str)]| {
        let mut all = vec![("HOME", "/home/u")];
        all.extend_from_slice(pairs);
        Settings::from_vars(&vars(&all)).unwrap().worker.concurrency
    };
    // A remote model: runs follow its capacity.
    assert_eq!(of(&[]), None);
    assert_eq!(of(&[("SHELF_LLM_PROVIDER", "mock")]), Some(4));
    assert_eq!(of(&[("SHELF_LLM_PROVIDER", "local")]), Some(4));
    assert_eq!(
        of(&[
            ("SHELF_LLM_PROVIDER", "mock"),
            ("SHELF_WORKER_CONCURRENCY", "3")
        ]),
        Some(3)
    );
    assert_eq!(of(&[("SHELF_WORKER_CONCURRENCY", "2")]), Some(2));
}

#[test]
fn the_model_limit_is_auto_or_bounded() {
    let of = |pairs: &[(&str, &str)]| {
        let mut all = vec![("HOME", "/home/u")];
        all.extend_from_slice(pairs);
        Settings::from_vars(&vars(&all))
    };
    let auto = of(&[]).unwrap();
    assert_eq!(auto.llm.max_concurrency, None);
    assert_eq!(auto.llm.min_concurrency, 1);
    assert_eq!(auto.llm.stage_concurrency(), 128);
    assert_eq!(auto.worker.max_runs, 64);
    let mock = of(&[("SHELF_LLM_PROVIDER", "mock")]).unwrap();
    assert_eq!(mock.llm.stage_concurrency(), 8);
    let pinned = of(&[
        ("SHELF_LLM_MAX_CONCURRENCY", "6"),
        ("SHELF_LLM_MIN_CONCURRENCY", "6"),
    ])
    .unwrap();
    assert_eq!(pinned.llm.max_concurrency, Some(6));
    assert_eq!(pinned.llm.concurrency_ceiling(), 6);
    assert_eq!(
        of(&[("SHELF_LLM_MAX_CONCURRENCY", "AUTO")])
            .unwrap()
            .llm
            .max_concurrency,
        None
    );
    for bad in [
        vec![("SHELF_LLM_MAX_CONCURRENCY", "lots")],
        vec![("SHELF_LLM_MAX_CONCURRENCY", "0")],
        vec![("SHELF_LLM_MIN_CONCURRENCY", "0")],
        vec![
            ("SHELF_LLM_MAX_CONCURRENCY", "4"),
            ("SHELF_LLM_MIN_CONCURRENCY", "5"),
        ],
        vec![("SHELF_WORKER_MAX_RUNS", "0")],
    ] {
        let e = of(&bad).unwrap_err();
        assert!(
            e.problems.iter().any(|p| p.contains(bad[bad.len() - 1].0)),
            "{:?}",
            e.problems
        );
    }
}

#[test]
fn load_limits_default_and_are_bounded() {
    let of = |pairs: &[(&str, &str)]| {
        let mut all = vec![("HOME", "/home/u")];
        all.extend_from_slice(pairs);
        Settings::from_vars(&vars(&all))
    };
    let s = of(&[]).unwrap();
    assert_eq!(s.api.client_ipv6_prefix, 64);
    assert_eq!(s.api.max_streams_per_client, 8);
    assert_eq!(s.api.stream_max_seconds, 300);
    assert_eq!(s.api.session_hours, 12);
    let s = of(&[
        ("SHELF_API_CLIENT_IPV6_PREFIX", "56"),
        ("SHELF_API_MAX_STREAMS_PER_CLIENT", "0"),
        ("SHELF_API_STREAM_MAX_SECONDS", "30"),
        ("SHELF_API_SESSION_HOURS", "720"),
    ])
    .unwrap();
    assert_eq!(
        (
            s.api.client_ipv6_prefix,
            s.api.max_streams_per_client,
            s.api.stream_max_seconds,
            s.api.session_hours
        ),
        (56, 0, 30, 720)
    );
    for (name, bad) in [
        ("SHELF_API_CLIENT_IPV6_PREFIX", "0"),
        ("SHELF_API_CLIENT_IPV6_PREFIX", "129"),
        ("SHELF_API_STREAM_MAX_SECONDS", "0"),
        ("SHELF_API_STREAM_MAX_SECONDS", "86401"),
        ("SHELF_API_SESSION_HOURS", "0"),
        ("SHELF_API_SESSION_HOURS", "721"),
        ("SHELF_API_MAX_STREAMS_PER_CLIENT", "-1"),
    ] {
        let e = of(&[(name, bad)]).unwrap_err();
        assert!(e.to_string().contains(name), "{name}={bad}: {e}");
    }
}

#[test]
fn api_workers_default_to_none_and_are_bounded() {
    let of = |value: Option<&str>| {
        let mut all = vec![("HOME", "/home/u")];
        all.extend(value.map(|v| ("SHELF_API_WORKERS", v)));
        Settings::from_vars(&vars(&all))
    };
    assert_eq!(of(None).unwrap().api.workers, 0);
    assert_eq!(of(Some("3")).unwrap().api.workers, 3);
    assert_eq!(of(Some("256")).unwrap().api.workers, 256);
    for bad in ["257", "-1", "two"] {
        let e = of(Some(bad)).unwrap_err();
        assert!(e.to_string().contains("SHELF_API_WORKERS"), "{bad}: {e}");
    }
}

#[test]
fn every_bad_variable_is_reported_at_once() {
    let e = Settings::from_vars(&vars(&[
        ("SHELF_API_PORT", "eighty"),
        ("SHELF_LLM_PROVIDER", "gpt"),
        ("SHELF_OCR_ROTATION_RETRY", "maybe"),
        ("SHELF_API_KEY_HASHES", "read:nothex"),
    ]))
    .unwrap_err();
    assert_eq!(e.problems.len(), 4, "{e}");
    assert!(e.to_string().contains("SHELF_API_PORT=eighty"));
}

#[test]
fn scoped_keys_and_hashes_parse() {
    let hash = hex::encode(Sha256::digest(b"h1"));
    let s = Settings::from_vars(&vars(&[
        ("SHELF_API_KEY", "k0"),
        ("SHELF_API_KEYS", "read:r1, write:w1, plain"),
        ("SHELF_API_KEY_HASHES", &format!("read:{hash}")),
    ]))
    .unwrap();
    let scopes: Vec<Scope> = s.api.credentials.iter().map(Credential::scope).collect();
    assert_eq!(
        scopes,
        [
            Scope::Write,
            Scope::Read,
            Scope::Write,
            Scope::Write,
            Scope::Read
        ]
    );
    assert_eq!(
        s.api.credentials[4].digest(),
        <[u8; 32]>::from(Sha256::digest(b"h1"))
    );
    let shown = s.redacted().to_string();
    assert!(!shown.contains("k0") && !shown.contains("r1") && !shown.contains(&hash));
}

#[test]
fn secrets_never_print() {
    let s = Settings::from_vars(&vars(&[
        ("SHELF_API_KEY", "supersecret"),
        ("OPENAI_API_KEY", "sk-abc"),
    ]))
    .unwrap();
    let debug = format!("{s:?}");
    assert!(!debug.contains("supersecret") && !debug.contains("sk-abc"));
    assert!(!s.redacted().to_string().contains("sk-abc"));
}

#[test]
fn cidrs_match() {
    let net: IpNet = "10.0.0.0/8".parse().unwrap();
    assert!(net.contains("10.1.2.3".parse().unwrap()));
    assert!(!net.contains("11.1.2.3".parse().unwrap()));
    assert!(net.contains("::ffff:10.0.0.1".parse().unwrap()));
    let one: IpNet = "::1".parse().unwrap();
    assert!(one.contains("::1".parse().unwrap()));
    assert!("10.0.0.0/33".parse::<IpNet>().is_err());
}

#[test]
fn unknown_shelf_variables_are_flagged() {
    let s = Settings::from_vars(&vars(&[("SHELF_API_PROT", "1")])).unwrap();
    assert_eq!(s.unknown_variables, ["SHELF_API_PROT"]);
}

#[test]
fn database_url_selects_postgres_and_hides_its_password() {
    let mut vars = HashMap::new();
    vars.insert("SHELF_DATA_DIR".to_string(), "/d".to_string());
    let s = Settings::from_vars(&vars).unwrap();
    assert!(!s.is_postgres());
    assert_eq!(s.storage.job_backend, JobBackend::Sqlite);
    vars.insert(
        "SHELF_DATABASE_URL".to_string(),
        "postgres://shelf:hunter2@db.example:5432/shelf?sslmode=require".to_string(),
    );
    let s = Settings::from_vars(&vars).unwrap();
    assert!(s.is_postgres());
    assert_eq!(s.storage.job_backend, JobBackend::Postgres);
    assert_eq!(
        s.database_display(),
        "postgres://shelf:***@db.example:5432/shelf?sslmode=require"
    );
    assert!(!s.redacted().to_string().contains("hunter2"));
    assert!(s.secrets().contains(&"hunter2"));
    // The query-parameter form, any case, hidden from `/config` and messages alike.
    vars.insert(
        "SHELF_DATABASE_URL".to_string(),
        "postgres://shelf@db.example/shelf?sslmode=require&PASSWORD=SECRETX".to_string(),
    );
    let s = Settings::from_vars(&vars).unwrap();
    assert_eq!(
        s.database_display(),
        "postgres://shelf@db.example/shelf?sslmode=require&PASSWORD=***"
    );
    assert!(!s.redacted().to_string().contains("SECRETX"));
    assert!(!format!("{s:?}").contains("SECRETX"));
    assert!(s.secrets().contains(&"SECRETX"));
    vars.insert("SHELF_DATABASE_URL".to_string(), "mysql://x/y".to_string());
    assert!(Settings::from_vars(&vars).is_err());
}

#[test]
fn enum_settings_parse_once_with_the_same_names_and_messages() {
    let s = Settings::from_vars(&vars(&[
        ("SHELF_OCR_LLM_CORRECTION", "low-confidence"),
        ("SHELF_LOG_FORMAT", "json"),
        ("SHELF_CLEANING_PROMPT_VERSION", "cmos_v2"),
        ("SHELF_CLASSIFICATION_PROMPT_VERSION", "dewey_v1"),
        ("SHELF_LLM_PROVIDER", "local"),
    ]))
    .unwrap();
    assert_eq!(s.ocr.llm_correction, CorrectionMode::LowConfidence);
    assert_eq!(s.logging.format, LogFormat::Json);
    assert_eq!(s.llm.cleaning_prompt_version.as_str(), "cmos_v2");
    assert_eq!(s.llm.classification_prompt_version.as_str(), "dewey_v1");
    assert_eq!(s.llm.provider, LlmProvider::Local);
    // `/config` shows each by the name it was set with.
    let shown = s.redacted();
    assert_eq!(shown["ocr"]["llm_correction"], "low-confidence");
    assert_eq!(shown["logging"]["format"], "json");
    assert_eq!(shown["llm"]["cleaning_prompt_version"], "cmos_v2");
    assert_eq!(shown["llm"]["classification_prompt_version"], "dewey_v1");
    assert_eq!(shown["llm"]["provider"], "local");
    assert_eq!(shown["storage"]["job_backend"], "sqlite");

    let e = Settings::from_vars(&vars(&[
        ("SHELF_OCR_LLM_CORRECTION", "sometimes"),
        ("SHELF_LOG_FORMAT", "xml"),
        ("SHELF_CLEANING_PROMPT_VERSION", "cmos_v9"),
        ("SHELF_CLASSIFICATION_PROMPT_VERSION", "dewey_v3"),
        ("SHELF_LLM_PROVIDER", "gpt"),
        ("SHELF_JOB_BACKEND", "redis"),
    ]))
    .unwrap_err();
    for expected in [
        "SHELF_OCR_LLM_CORRECTION=sometimes: expected one of always, low-confidence, never",
        "SHELF_LOG_FORMAT=xml: expected one of json, text",
        "SHELF_CLEANING_PROMPT_VERSION=cmos_v9: expected one of cmos_v1, cmos_v2, cmos_v3, cmos_v4",
        "SHELF_CLASSIFICATION_PROMPT_VERSION=dewey_v3: expected one of dewey_v1, dewey_v2",
        "SHELF_LLM_PROVIDER=gpt: expected one of generic-compatible, mock, local",
        "SHELF_JOB_BACKEND=redis: expected one of sqlite",
    ] {
        assert!(e.problems.iter().any(|p| p == expected), "{expected}: {e}");
    }
}

#[test]
fn job_backend_accepts_only_the_databases_own() {
    let sqlite = Settings::from_vars(&vars(&[("SHELF_JOB_BACKEND", "sqlite")])).unwrap();
    assert_eq!(sqlite.storage.job_backend, JobBackend::Sqlite);
    let url = ("SHELF_DATABASE_URL", "postgres://shelf@db.example/shelf");
    let pg = Settings::from_vars(&vars(&[url, ("SHELF_JOB_BACKEND", "postgres")])).unwrap();
    assert_eq!(pg.storage.job_backend, JobBackend::Postgres);
    let e = Settings::from_vars(&vars(&[url, ("SHELF_JOB_BACKEND", "sqlite")])).unwrap_err();
    assert_eq!(
        e.problems,
        ["SHELF_JOB_BACKEND=sqlite: expected one of postgres"]
    );
}
