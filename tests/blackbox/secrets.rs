//! `SHELF_DATABASE_URL`'s password never printed, in any form it takes (userinfo, a
//! `password=` or `sslpassword=` parameter in any case, percent-encoded): not by `shelf migrate`
//! (stdout, stderr, `--json`) when the server cannot be reached, nor by
//! `shelf admin db-check --json`, nor by the API's `/config` and logs on a real PostgreSQL.

use std::process::{Output, Stdio};
use std::time::Duration;

use serde_json::Value;

use crate::api::{Api, client};
use crate::pg_cluster::PgCluster;
use crate::support::{Env, wait_for};

const SECRET: &str = "SECRETX";
/// `SECRETX` percent-encoded as a client may write it; the driver decodes it.
const ENCODED: &str = "SEC%52ETX";

fn everything(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn assert_hidden(what: &str, text: &str) {
    for secret in [SECRET, ENCODED] {
        assert!(!text.contains(secret), "{what} printed {secret}:\n{text}");
    }
}

fn env_for(url: &str) -> Env {
    Env::new().with("SHELF_DATABASE_URL", url)
}

#[test]
fn an_unreachable_servers_password_stays_out_of_migrate_and_db_check() {
    // Port 1: nothing listens there, so both commands fail after the pool's timeout; they run
    // at once to wait for it once.
    let env = env_for(&format!("postgres://u@127.0.0.1:1/db?password={SECRET}"));
    let spawn = |args: &[&str]| {
        env.command(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn shelf")
    };
    let migrate = spawn(&["migrate"]);
    let migrate_json = spawn(&["migrate", "--json"]);
    let check = spawn(&["admin", "db-check", "--json"]);
    for (what, child) in [
        ("migrate", migrate),
        ("migrate --json", migrate_json),
        ("db-check --json", check),
    ] {
        let out = child.wait_with_output().expect("wait");
        assert!(!out.status.success(), "{what} cannot reach the server");
        assert_hidden(what, &everything(&out));
        if what == "db-check --json" {
            let report: Value = serde_json::from_slice(&out.stdout).expect("a JSON report");
            assert_eq!(report["healthy"], false);
            assert_eq!(
                report["database"], "postgres://u@127.0.0.1:1/db?password=***",
                "{report:#}"
            );
        } else {
            assert!(
                everything(&out).contains("password=***"),
                "{what} names the database without its password: {}",
                everything(&out)
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_form_of_the_password_stays_out_of_commands_config_and_logs() {
    let Some(cluster) = PgCluster::shared() else {
        return;
    };
    let base = cluster.create_database("secrets");
    // The cluster trusts local connections: the password is sent or ignored, never checked.
    let (scheme_and_user, rest) = base.split_once('@').expect("user@host");
    let forms = [
        format!("{scheme_and_user}:{SECRET}@{rest}"),
        format!("{base}?password={SECRET}"),
        format!("{base}?sslmode=disable&PassWord={SECRET}&application_name=shelf"),
        format!("{base}?sslpassword={SECRET}"),
        format!("{scheme_and_user}:{ENCODED}@{rest}"),
    ];
    for url in &forms {
        let env = env_for(url);
        for args in [
            &["migrate"][..],
            &["migrate", "--json"],
            &["admin", "db-check", "--json"],
            &["admin", "db-stats", "--json"],
        ] {
            let out = env.run(args);
            assert_hidden(&format!("{args:?} with {url}"), &everything(&out));
            if args[0] == "migrate" {
                assert!(
                    out.status.success(),
                    "{args:?} with {url}: {}",
                    everything(&out)
                );
            } else {
                // Whatever their verdict, the reports name the database, without its password.
                let report: Value = serde_json::from_slice(&out.stdout).expect("a JSON report");
                let shown = report["database"].as_str().unwrap_or_default();
                assert!(shown.contains("***"), "{args:?} with {url}: {report:#}");
            }
        }
        let api = Api::start(&env);
        let config: Value = client()
            .get(api.url("/config"))
            .send()
            .await
            .expect("config")
            .json()
            .await
            .expect("json");
        let shown = config["storage"]["database_url"]
            .as_str()
            .unwrap_or_default();
        assert!(shown.contains("***"), "{url}: {config:#}");
        assert_hidden(&format!("/config with {url}"), &config.to_string());
        // Everything the API logged up to its `listening` line (the driver's own warnings
        // included); stderr is read in the background, so wait for that line.
        let logs = wait_for(Duration::from_secs(30), "the API's listening line", || {
            let logs = api.logs();
            logs.contains("listening").then_some(logs)
        });
        assert_hidden(&format!("the API's log with {url}"), &logs);
        if url.contains("sslpassword") || url.contains("PassWord") {
            // The driver logs a parameter it does not know with its value: redacted.
            assert!(
                logs.contains("ignoring unrecognized connect parameter"),
                "{url}: {logs}"
            );
        }
    }
}
