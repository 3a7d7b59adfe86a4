//! Headless Chromium driven over WebDriver: chromedriver on a free loopback port, one
//! fantoccini session, waits on DOM conditions with a generous deadline, and screenshots saved
//! as artefacts and checked for content.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fantoccini::{Client, ClientBuilder, Locator};
use hyper_util::client::legacy::connect::HttpConnector;
use serde_json::{Value, json};

/// How long any condition may take to appear: CI machines are loaded, and a condition that
/// holds is seen at the next poll, so a generous deadline costs nothing when things work.
pub const DEADLINE: Duration = Duration::from_secs(120);

/// The first of `names` found on PATH (Debian installs `chromium` and `chromedriver` in
/// /usr/bin). Panics naming the install script: CI installs them, so a missing browser is a
/// failure, never a skip.
pub fn program(names: &[&str]) -> PathBuf {
    let path = std::env::var_os("PATH").unwrap_or_default();
    for dir in std::env::split_paths(&path).chain([PathBuf::from("/usr/bin")]) {
        for name in names {
            let candidate = dir.join(name);
            if candidate.is_file() {
                return candidate;
            }
        }
    }
    panic!(
        "{} not found: the browser tests need Debian's chromium and chromium-driver; run \
         scripts/install-system-packages (as root; CI does)",
        names.join(" or ")
    )
}

/// A chromedriver process on a port it picked itself (`--port=0`, announced on stdout), killed
/// when dropped.
pub struct Chromedriver {
    child: Child,
    pub url: String,
}

impl Chromedriver {
    pub fn start() -> Chromedriver {
        let binary = program(&["chromedriver"]);
        let mut child = Command::new(&binary)
            .arg("--port=0")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("starting {}: {e}", binary.display()));
        let stdout = child.stdout.take().expect("chromedriver stdout");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut reader = BufReader::new(stdout);
            let mut line = String::new();
            let mut sent = false;
            // Reads to the end either way: a full pipe would block chromedriver's logging.
            while reader.read_line(&mut line).map(|n| n > 0).unwrap_or(false) {
                if !sent && let Some(port) = announced_port(&line) {
                    let _ = tx.send(port);
                    sent = true;
                }
                line.clear();
            }
        });
        let mut driver = Chromedriver {
            child,
            url: String::new(),
        };
        let port = rx
            .recv_timeout(Duration::from_secs(60))
            .unwrap_or_else(|_| panic!("{} announced no port", binary.display()));
        driver.url = format!("http://127.0.0.1:{port}");
        driver
    }
}

/// The port of chromedriver's "ChromeDriver was started successfully on port N." line.
fn announced_port(line: &str) -> Option<u16> {
    line.split_once("started successfully on port ")?
        .1
        .trim()
        .trim_end_matches('.')
        .parse()
        .ok()
}

impl Drop for Chromedriver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Opens a session of headless Chromium at 1280x900.
pub async fn session(driver: &Chromedriver) -> Client {
    let chromium = program(&["chromium", "chromium-browser"]);
    let capabilities = json!({
        "browserName": "chrome",
        "goog:chromeOptions": {
            "binary": chromium.display().to_string(),
            "args": [
                "--headless=new",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--disable-dev-shm-usage",
                "--window-size=1280,900",
            ],
        },
    });
    let Value::Object(capabilities) = capabilities else {
        unreachable!("a JSON object literal")
    };
    ClientBuilder::new(HttpConnector::new())
        .capabilities(capabilities)
        .connect(&driver.url)
        .await
        .unwrap_or_else(|e| panic!("no WebDriver session from {}: {e}", driver.url))
}

/// The browser session with the server it visits and where its screenshots go.
#[derive(Clone)]
pub struct Browser {
    pub client: Client,
    pub base: String,
    pub artifacts: PathBuf,
}

impl Browser {
    /// Navigates to `path` on the server.
    pub async fn goto(&self, path: &str) {
        let url = format!("{}{path}", self.base);
        self.client
            .goto(&url)
            .await
            .unwrap_or_else(|e| panic!("goto {url}: {e}"));
    }

    /// Runs `body` (a JS function body; `arguments` are `args`) and returns its result.
    pub async fn js(&self, body: &str, args: Vec<Value>) -> Value {
        self.client
            .execute(body, args)
            .await
            .unwrap_or_else(|e| panic!("script failed: {e}\n{body}"))
    }

    /// Runs `body` asynchronously: it calls `arguments[arguments.length - 1]` with its result.
    pub async fn js_async(&self, body: &str, args: Vec<Value>) -> Value {
        self.client
            .execute_async(body, args)
            .await
            .unwrap_or_else(|e| panic!("async script failed: {e}\n{body}"))
    }

    /// Polls `body` (a JS function body) until it returns something other than null, false,
    /// 0 or "", and returns that; panics after [`DEADLINE`] with a screenshot and the page.
    /// Panics at once when the loaded page is one no step expects (a JSON body, or an HTTP
    /// error other than the sign-in form's 401), so a broken page fails in seconds.
    pub async fn until(&self, what: &str, body: &str, args: Vec<Value>) -> Value {
        let script = format!(
            "const nav = performance.getEntriesByType('navigation')[0];
             const status = nav ? nav.responseStatus : 0;
             const type = document.contentType || '';
             if (document.readyState === 'complete'
                 && (type.includes('json') || (status >= 400 && status !== 401))) {{
               return {{broken: true, status, type}};
             }}
             return {{value: (function () {{ {body} }}).apply(null, arguments)}};"
        );
        let deadline = Instant::now() + DEADLINE;
        loop {
            // A navigation in progress can fail a script; the next poll retries it.
            if let Ok(answer) = self.client.execute(&script, args.clone()).await {
                if answer["broken"] == true {
                    self.fail(&format!(
                        "waiting for {what}: the page is broken ({answer})"
                    ))
                    .await;
                }
                let value = answer["value"].clone();
                let done = match &value {
                    Value::Null | Value::Bool(false) => false,
                    Value::String(s) => !s.is_empty(),
                    Value::Number(n) => n.as_f64() != Some(0.0),
                    _ => true,
                };
                if done {
                    return value;
                }
            }
            if Instant::now() >= deadline {
                self.fail(&format!("timed out waiting for {what}")).await;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Waits for an element matching `css` and returns it.
    pub async fn element(&self, css: &str) -> fantoccini::elements::Element {
        self.until(
            &format!("an element {css:?}"),
            "return !!document.querySelector(arguments[0]);",
            vec![json!(css)],
        )
        .await;
        match self.client.find(Locator::Css(css)).await {
            Ok(element) => element,
            Err(e) => self.fail(&format!("no element {css:?}: {e}")).await,
        }
    }

    /// How many elements match `css` now.
    pub async fn count(&self, css: &str) -> usize {
        self.client
            .find_all(Locator::Css(css))
            .await
            .map(|all| all.len())
            .unwrap_or_else(|e| panic!("find_all {css:?}: {e}"))
    }

    /// The rendered text of the first element matching `css` (waiting for it).
    pub async fn text(&self, css: &str) -> String {
        self.element(css)
            .await
            .text()
            .await
            .unwrap_or_else(|e| panic!("text of {css:?}: {e}"))
    }

    /// Waits until the page at `path` (path and query prefix) is loaded: its URL and `<h1>`.
    pub async fn arrived(&self, path: &str) {
        self.until(
            &format!("the page {path}"),
            "return location.pathname + location.search === arguments[0] \
             && document.readyState === 'complete' && !!document.querySelector('main h1');",
            vec![json!(path)],
        )
        .await;
    }

    /// Checks the page as a person would see it: a title `{Page} · Shelf` whose page part
    /// contains `title` (case-insensitively), one non-empty `<h1>` containing `heading`, no
    /// error banner; then saves a screenshot as `{name}.png` and checks it is a real PNG.
    pub async fn page(&self, name: &str, title: &str, heading: &str) {
        let full = self.client.title().await.expect("title");
        let page = full.strip_suffix(" · Shelf").unwrap_or_default();
        let h1 = self.text("main#main h1").await;
        let headings = self.count("main#main h1").await;
        if page.trim().is_empty()
            || !page.to_lowercase().contains(&title.to_lowercase())
            || h1.trim().is_empty()
            || headings != 1
            || !h1.contains(heading)
        {
            self.fail(&format!(
                "page {name}: title {full:?} (expected \"… {title} … · Shelf\"), {headings} \
                 <h1> {h1:?} (expected one containing {heading:?})"
            ))
            .await;
        }
        let errors = self.count(".banner.error").await;
        if errors > 0 {
            let banner = self.text(".banner.error").await;
            self.fail(&format!("page {name} shows an error banner: {banner:?}"))
                .await;
        }
        self.screenshot(name).await;
    }

    /// Saves a screenshot as `{name}.png` in the artefacts directory and checks it decodes as
    /// far as its header: the PNG signature and an IHDR with a non-zero size.
    pub async fn screenshot(&self, name: &str) -> PathBuf {
        let png = self.client.screenshot().await.expect("screenshot");
        let (width, height) =
            png_size(&png).unwrap_or_else(|| panic!("screenshot {name} is not a PNG"));
        assert!(
            width > 0 && height > 0,
            "screenshot {name}: {width}x{height}"
        );
        let path = self.artifacts.join(format!("{name}.png"));
        std::fs::write(&path, &png).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        path
    }

    /// Panics with `message`, the page's URL and text, after a screenshot of it.
    pub async fn fail(&self, message: &str) -> ! {
        let url = self
            .client
            .current_url()
            .await
            .map(|u| u.to_string())
            .unwrap_or_default();
        let text = self
            .client
            .execute(
                "return document.body ? document.body.innerText : '';",
                vec![],
            )
            .await
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default();
        let shot = match self.client.screenshot().await {
            Ok(png) => {
                let path = self.artifacts.join("failure.png");
                let _ = std::fs::write(&path, png);
                path.display().to_string()
            }
            Err(e) => format!("(no screenshot: {e})"),
        };
        panic!("{message}\nat {url} (screenshot {shot})\npage text:\n{text}")
    }
}

/// Width and height from a PNG's IHDR chunk, which must come first after the signature.
pub fn png_size(png: &[u8]) -> Option<(u32, u32)> {
    const SIGNATURE: &[u8] = b"\x89PNG\r\n\x1a\n";
    if png.len() < 24 || !png.starts_with(SIGNATURE) || &png[12..16] != b"IHDR" {
        return None;
    }
    let width = u32::from_be_bytes(png[16..20].try_into().ok()?);
    let height = u32::from_be_bytes(png[20..24].try_into().ok()?);
    Some((width, height))
}

/// Where screenshots go: `SHELF_BROWSER_ARTIFACTS`, else `browser-artifacts` in cargo's
/// target directory for integration tests. Screenshots overwrite those of the last run; a
/// failure screenshot left by an earlier run is removed.
pub fn artifacts_dir() -> PathBuf {
    let dir = std::env::var_os("SHELF_BROWSER_ARTIFACTS")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_TARGET_TMPDIR")).join("browser-artifacts"));
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    let _ = std::fs::remove_file(dir.join("failure.png"));
    dir
}

#[test]
fn png_sizes_are_read_from_the_header() {
    let mut png = b"\x89PNG\r\n\x1a\n\0\0\0\x0dIHDR".to_vec();
    png.extend_from_slice(&1280u32.to_be_bytes());
    png.extend_from_slice(&900u32.to_be_bytes());
    assert_eq!(png_size(&png), Some((1280, 900)));
    assert_eq!(png_size(b"GIF89a............................"), None);
    assert_eq!(
        announced_port("ChromeDriver was started successfully on port 40515.\n"),
        Some(40515)
    );
}
