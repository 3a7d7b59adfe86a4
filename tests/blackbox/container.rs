//! The container files keep their hardening: base images cannot be pulled here, so the
//! Dockerfile and compose.yaml are parsed and checked instead (multi-stage build, non-root
//! user, OCR and PDF runtime packages, a health check through `shelf health` and no curl,
//! read-only root, no-new-privileges, tmpfs /tmp, the data volume, rotated logs, required
//! keys and import root for the public bind, the image tagged with the crate's version).
//! `shelf health` itself is run against a real API.

use std::path::PathBuf;

use yaml_rust2::{Yaml, YamlLoader};

use crate::api::{Api, migrated};
use crate::support::Env;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn read(relative: &str) -> String {
    std::fs::read_to_string(root().join(relative)).unwrap_or_else(|e| panic!("{relative}: {e}"))
}

/// The Dockerfile's instructions, with `\` continuations joined.
fn instructions() -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    for line in read("Dockerfile").lines() {
        let line = line.trim();
        if line.starts_with('#') || line.is_empty() {
            continue;
        }
        match line.strip_suffix('\\') {
            Some(head) => {
                current.push_str(head);
                current.push(' ');
            }
            None => {
                current.push_str(line);
                out.push(std::mem::take(&mut current));
            }
        }
    }
    out
}

#[test]
fn the_dockerfile_builds_in_one_stage_and_runs_lean_and_unprivileged_in_another() {
    let all = instructions();
    let stages: Vec<&String> = all.iter().filter(|i| i.starts_with("FROM ")).collect();
    assert_eq!(stages.len(), 2, "{stages:?}");
    assert!(
        stages[0].contains("rust:") && stages[0].ends_with("AS builder"),
        "{}",
        stages[0]
    );
    assert!(
        stages[1].contains("debian:") && stages[1].contains("-slim"),
        "{}",
        stages[1]
    );
    let start = all
        .iter()
        .position(|i| i == stages[1])
        .expect("runtime stage");
    let runtime = &all[start..];
    let builder = &all[..start];
    let has = |stage: &[String], needle: &str| stage.iter().any(|i| i.contains(needle));
    for package in [
        "libtesseract-dev",
        "libleptonica-dev",
        "libclang-dev",
        "pkg-config",
    ] {
        assert!(has(builder, package), "builder lacks {package}");
        assert!(
            !has(runtime, package),
            "runtime installs the build package {package}"
        );
    }
    assert!(has(builder, "cargo build --release --locked"));
    for package in [
        "tesseract-ocr ",
        "tesseract-ocr-eng",
        "tesseract-ocr-osd",
        "poppler-utils",
        "libtesseract5",
    ] {
        assert!(has(runtime, package), "runtime lacks {package}");
    }
    for tool in ["curl", "wget"] {
        assert!(
            !has(runtime, tool),
            "the runtime image must not need {tool}"
        );
    }
    assert!(has(runtime, "COPY --from=builder"));
    let user = runtime
        .iter()
        .rev()
        .find_map(|i| i.strip_prefix("USER "))
        .expect("USER");
    assert!(
        !user.starts_with("root") && !user.starts_with('0'),
        "{user}"
    );
    let health = runtime
        .iter()
        .find(|i| i.starts_with("HEALTHCHECK"))
        .expect("HEALTHCHECK");
    assert!(health.contains(r#"CMD ["shelf", "health""#), "{health}");
    assert!(has(runtime, "EXPOSE 8080"));
    assert!(has(runtime, "SHELF_API_HOST=0.0.0.0"));
    assert!(has(runtime, "SHELF_DATA_DIR=/data"));
    assert!(has(
        runtime,
        r#"org.opencontainers.image.version="${SHELF_VERSION}""#
    ));
    assert!(has(runtime, r#"CMD ["api"]"#));
    let dockerignore = read(".dockerignore");
    assert!(dockerignore.lines().any(|l| l.trim() == "target"));
}

fn compose() -> Yaml {
    YamlLoader::load_from_str(&read("compose.yaml"))
        .expect("compose.yaml parses")
        .remove(0)
}

fn strings(node: &Yaml) -> Vec<String> {
    node.as_vec()
        .map(|v| {
            v.iter()
                .filter_map(|s| s.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn compose_hardens_every_service_and_requires_keys_for_the_public_bind() {
    let doc = compose();
    let services = doc["services"].as_hash().expect("services");
    let names: Vec<&str> = services.keys().filter_map(Yaml::as_str).collect();
    assert!(
        names.contains(&"api") && names.contains(&"worker"),
        "{names:?}"
    );
    let image = format!("shelf:{}", env!("CARGO_PKG_VERSION"));
    for name in &names {
        let service = &doc["services"][*name];
        let shelf = service["image"]
            .as_str()
            .is_some_and(|i| i.starts_with("shelf:"));
        if shelf {
            assert_eq!(
                service["image"].as_str(),
                Some(image.as_str()),
                "{name}: image tag"
            );
        } else {
            // Only the cluster profile's database is not Shelf's image.
            assert_eq!(*name, "postgres", "{name}: an image that is not Shelf's");
        }
        assert_eq!(
            service["read_only"].as_bool(),
            Some(true),
            "{name}: read_only"
        );
        assert!(
            strings(&service["security_opt"]).contains(&"no-new-privileges:true".to_string()),
            "{name}: no-new-privileges"
        );
        assert_eq!(strings(&service["cap_drop"]), ["ALL"], "{name}: cap_drop");
        assert!(
            strings(&service["tmpfs"])
                .iter()
                .any(|t| t.starts_with("/tmp")),
            "{name}: tmpfs /tmp"
        );
        let volumes = strings(&service["volumes"]);
        if shelf {
            // The SQLite stack's volume, or the cluster profile's shared one.
            assert!(
                volumes.contains(&"shelf-data:/data".to_string())
                    || volumes.contains(&"shelf-cluster-data:/data".to_string()),
                "{name}: data volume {volumes:?}"
            );
        } else {
            assert!(
                volumes
                    .iter()
                    .any(|v| v.ends_with(":/var/lib/postgresql/data")),
                "{name}: database volume {volumes:?}"
            );
        }
        let logging = &service["logging"];
        assert_eq!(logging["driver"].as_str(), Some("json-file"), "{name}");
        assert_eq!(
            logging["options"]["max-size"].as_str(),
            Some("10m"),
            "{name}"
        );
        assert_eq!(logging["options"]["max-file"].as_str(), Some("5"), "{name}");
        if shelf {
            assert_eq!(
                service["environment"]["SHELF_DATA_DIR"].as_str(),
                Some("/data")
            );
        }
    }
    let api = &doc["services"]["api"];
    assert_eq!(
        strings(&api["command"]),
        ["api", "--host", "0.0.0.0", "--port", "8080"]
    );
    for required in ["SHELF_API_KEYS", "SHELF_API_IMPORT_ROOT"] {
        let value = api["environment"][required].as_str().unwrap_or_default();
        assert!(
            value.starts_with(&format!("${{{required}:?")) && value.ends_with('}'),
            "{required} must be required with ${{{required}:?message}}: {value:?}"
        );
    }
    assert_eq!(
        strings(&api["healthcheck"]["test"])[..3],
        ["CMD", "shelf", "health"]
    );
    assert_eq!(
        doc["services"]["worker"]["healthcheck"]["disable"].as_bool(),
        Some(true)
    );
    assert!(doc["volumes"]["shelf-data"].as_hash().is_some());
}

#[test]
fn shelf_health_answers_for_a_running_api_and_fails_without_one() {
    let env = migrated(Env::new());
    let api = Api::start(&env);
    let out = env.run(&["health", "--url", &api.url("/health")]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "healthy");
    // The default URL comes from SHELF_API_PORT.
    let port = api
        .url("")
        .rsplit(':')
        .next()
        .unwrap_or_default()
        .to_string();
    let mut cmd = env.command(&["health"]);
    cmd.env("SHELF_API_PORT", &port);
    assert!(cmd.output().expect("run").status.success());
    // A path that answers, but not healthy: not found.
    let out = env.run(&["health", "--url", &api.url("/no-such-path")]);
    assert_eq!(out.status.code(), Some(1));
    drop(api);
    let out = env.run(&[
        "health",
        "--url",
        &format!("http://127.0.0.1:{port}/health"),
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).starts_with("error: "));
}

/// The names of the services in the `cluster` profile.
fn in_cluster_profile(doc: &Yaml) -> Vec<String> {
    doc["services"]
        .as_hash()
        .expect("services")
        .iter()
        .filter(|(_, service)| strings(&service["profiles"]) == ["cluster"])
        .filter_map(|(name, _)| name.as_str().map(str::to_string))
        .collect()
}

#[test]
fn the_cluster_profile_runs_postgres_two_apis_and_several_workers_on_one_data_volume() {
    let doc = compose();
    let cluster = in_cluster_profile(&doc);
    assert!(cluster.contains(&"postgres".to_string()), "{cluster:?}");
    // The SQLite stack stays what `docker compose up` starts.
    for name in ["migrate", "api", "worker"] {
        assert!(
            doc["services"][name]["profiles"].is_badvalue(),
            "{name} has a profile"
        );
    }

    let postgres = &doc["services"]["postgres"];
    let image = postgres["image"].as_str().unwrap_or_default();
    assert!(image.starts_with("postgres:"), "{image}");
    let health = strings(&postgres["healthcheck"]["test"]);
    assert!(
        health.iter().any(|t| t.contains("pg_isready")),
        "{health:?}"
    );
    assert!(doc["volumes"]["shelf-postgres"].as_hash().is_some());

    let mut apis = 0;
    let mut workers = 0;
    for name in cluster.iter().filter(|n| *n != "postgres") {
        let service = &doc["services"][name.as_str()];
        let url = service["environment"]["SHELF_DATABASE_URL"]
            .as_str()
            .unwrap_or_default();
        assert!(
            url.starts_with("postgres://") && url.contains("@postgres:5432/"),
            "{name}: SHELF_DATABASE_URL {url:?}"
        );
        assert_eq!(
            strings(&service["volumes"]),
            ["shelf-cluster-data:/data"],
            "{name}: one shared data volume"
        );
        let command = strings(&service["command"]);
        match command.first().map(String::as_str) {
            Some("api") => apis += 1,
            Some("worker") => {
                workers += service["deploy"]["replicas"].as_i64().unwrap_or(1);
            }
            Some("migrate") => {
                assert_eq!(
                    service["depends_on"]["postgres"]["condition"].as_str(),
                    Some("service_healthy"),
                    "{name} waits for the database"
                );
            }
            other => panic!("{name}: unexpected command {other:?}"),
        }
    }
    assert_eq!(apis, 2, "two APIs");
    assert!(workers >= 2, "several workers: {workers}");
    assert!(doc["volumes"]["shelf-cluster-data"].as_hash().is_some());
}
