//! A headless Chromium driven through chromedriver (WebDriver, via fantoccini), with the few
//! calls the console's tests need, all blocking: each runs on this harness's own
//! current-thread tokio runtime and returns, so a test's broker calls (the blocking handle,
//! which refuses to run inside a runtime) and its browser calls interleave in plain code.
//!
//! Chromium is optional on a developer's machine (the tests skip with a message when it is
//! not installed) and required under CI (they fail). Every wait is a bounded poll on a
//! condition ([`Browser::wait_for`]); a screenshot goes to `target/console-screenshots/`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use fantoccini::{Client, ClientBuilder, Locator};
use hyper_util::client::legacy::connect::HttpConnector;

use crate::process::Process;

/// How long a wait for the page polls before the test fails: the console answers on
/// loopback in milliseconds and the page polls every second, so this is slack for a loaded
/// machine, not a guess at how long anything takes.
pub const WAIT: Duration = Duration::from_secs(15);

/// The browser's window: wide enough for the pages' tables side by side, the size every
/// screenshot has.
const WINDOW: &str = "--window-size=1280,900";

/// The programs the harness runs, from `PATH` (Debian's `chromium` and `chromium-driver`).
const CHROMIUM: &str = "chromium";
const CHROMEDRIVER: &str = "chromedriver";

pub struct Browser {
    runtime: tokio::runtime::Runtime,
    client: Client,
    /// chromedriver, killed when the harness is dropped (after the session is closed, so
    /// that it ends the browser it started).
    _driver: Process,
}

/// The directory the screenshots are written to (the browser tests' artifacts).
pub fn screenshot_dir() -> PathBuf {
    // CARGO_TARGET_TMPDIR is `<target>/tmp`, set for integration tests.
    Path::new(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .expect("the target directory")
        .join("console-screenshots")
}

impl Browser {
    /// Starts chromedriver on a free loopback port and a headless Chromium session on it.
    /// `None` (with a message) when Chromium or chromedriver is not installed, unless `CI`
    /// is set: there a missing browser fails the test.
    ///
    /// # Panics
    /// When either is installed but does not start.
    pub fn start() -> Option<Browser> {
        if let Some(why) = missing_program() {
            let under_ci = std::env::var_os("CI").is_some_and(|v| !v.is_empty());
            assert!(
                !under_ci,
                "CI must run the console's browser tests, but {why}"
            );
            eprintln!(
                "skipping the console's browser tests: {why} \
                 (`apt-get install chromium chromium-driver`, as `bash .ci/run` does)"
            );
            return None;
        }
        let mut command = Command::new(CHROMEDRIVER);
        command.arg("--port=0");
        let mut driver = Process::spawn(command);
        // "ChromeDriver was started successfully on port 39527."
        let line = driver.wait_for_line("chromedriver's port", WAIT, |line| {
            line.contains("started successfully on port")
        });
        let port: u16 = line
            .trim_end_matches('.')
            .rsplit(' ')
            .next()
            .and_then(|port| port.parse().ok())
            .unwrap_or_else(|| panic!("no port in chromedriver's line {line:?}"));
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a tokio runtime for the WebDriver client");
        let mut capabilities = serde_json::Map::new();
        capabilities.insert(
            "goog:chromeOptions".into(),
            serde_json::json!({
                "args": ["--headless=new", "--no-sandbox", "--disable-dev-shm-usage", WINDOW,
                         "--hide-scrollbars"],
            }),
        );
        let client = runtime
            .block_on(
                ClientBuilder::new(HttpConnector::new())
                    .capabilities(capabilities)
                    .connect(&format!("http://127.0.0.1:{port}")),
            )
            .unwrap_or_else(|e| {
                panic!(
                    "no Chromium session from chromedriver: {e}\n{}",
                    driver.lines().join("\n")
                )
            });
        Some(Browser {
            runtime,
            client,
            _driver: driver,
        })
    }

    /// Opens `url` and returns once the page has loaded (WebDriver's navigation waits for
    /// the load event).
    pub fn goto(&self, url: &str) {
        self.runtime
            .block_on(self.client.goto(url))
            .unwrap_or_else(|e| panic!("opening {url}: {e}"));
    }

    /// Polls `check` every 50 ms until it returns `Some`, for at most [`WAIT`].
    ///
    /// # Panics
    /// When [`WAIT`] passes first; the message names `what` and the page's last banner.
    pub fn wait_for<T>(&self, what: &str, mut check: impl FnMut(&Browser) -> Option<T>) -> T {
        let deadline = Instant::now() + WAIT;
        loop {
            if let Some(value) = check(self) {
                return value;
            }
            assert!(
                Instant::now() < deadline,
                "no {what} within {WAIT:?}; the page's banner: {:?}",
                self.text("#banner")
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The text of the first element `css` matches, `None` when nothing matches yet.
    pub fn text(&self, css: &str) -> Option<String> {
        self.runtime.block_on(async {
            let element = self.client.find(Locator::Css(css)).await.ok()?;
            element.text().await.ok()
        })
    }

    /// The texts of every element `css` matches, in document order.
    pub fn texts(&self, css: &str) -> Vec<String> {
        self.runtime.block_on(async {
            let mut texts = Vec::new();
            for element in self
                .client
                .find_all(Locator::Css(css))
                .await
                .unwrap_or_default()
            {
                texts.push(element.text().await.unwrap_or_default());
            }
            texts
        })
    }

    /// Waits until an element `css` matches shows text that `wanted` accepts; returns it.
    pub fn wait_for_text(&self, css: &str, wanted: impl Fn(&str) -> bool) -> String {
        self.wait_for(&format!("text wanted in {css}"), |browser| {
            browser.text(css).filter(|text| wanted(text))
        })
    }

    /// The attribute `name` of the first element `css` matches.
    pub fn attr(&self, css: &str, name: &str) -> Option<String> {
        self.runtime.block_on(async {
            let element = self.client.find(Locator::Css(css)).await.ok()?;
            element.attr(name).await.ok().flatten()
        })
    }

    /// Whether an element `css` matches is in the document and displayed.
    pub fn is_shown(&self, css: &str) -> bool {
        self.runtime.block_on(async {
            match self.client.find(Locator::Css(css)).await {
                Ok(element) => element.is_displayed().await.unwrap_or(false),
                Err(_) => false,
            }
        })
    }

    /// Clicks the first element `css` matches, waiting for it to be there.
    pub fn click(&self, css: &str) {
        self.wait_for(&format!("{css} to click"), |browser| {
            browser.runtime.block_on(async {
                let element = browser.client.find(Locator::Css(css)).await.ok()?;
                element.click().await.ok()
            })
        });
    }

    /// Replaces the value of the input `css` matches with `value`, waiting for it to be there.
    pub fn fill(&self, css: &str, value: &str) {
        self.wait_for(&format!("{css} to fill"), |browser| {
            browser.runtime.block_on(async {
                let element = browser.client.find(Locator::Css(css)).await.ok()?;
                element.clear().await.ok()?;
                element.send_keys(value).await.ok()
            })
        });
    }

    /// Chooses the option whose value is `value` in the select `css` matches, waiting for
    /// it to be there.
    pub fn select(&self, css: &str, value: &str) {
        self.wait_for(&format!("option {value:?} of {css}"), |browser| {
            browser.runtime.block_on(async {
                let element = browser.client.find(Locator::Css(css)).await.ok()?;
                element.select_by_value(value).await.ok()
            })
        });
    }

    /// Runs `script` in the page with `args` (its `arguments`) and returns what it returns.
    pub fn execute(&self, script: &str, args: Vec<serde_json::Value>) -> serde_json::Value {
        self.runtime
            .block_on(self.client.execute(script, args))
            .unwrap_or_else(|e| panic!("running {script:?}: {e}"))
    }

    /// Scrolls the page until the element `css` matches is in view (for a screenshot).
    pub fn scroll_to(&self, css: &str) {
        let script = "document.querySelector(arguments[0]).scrollIntoView({block: 'center'})";
        self.runtime
            .block_on(self.client.execute(script, vec![css.into()]))
            .unwrap_or_else(|e| panic!("scrolling to {css}: {e}"));
    }

    /// Sends a request from the page (same origin, as the page's own script would) and
    /// returns the status and the JSON body (`Null` when the body is not JSON).
    pub fn fetch(
        &self,
        method: &str,
        path: &str,
        body: Option<serde_json::Value>,
    ) -> (u16, serde_json::Value) {
        let script = r#"
            const [method, path, body, done] = arguments;
            const init = { method };
            if (body !== null) {
                init.headers = { "content-type": "application/json" };
                init.body = JSON.stringify(body);
            }
            fetch(path, init)
                .then(async (r) => done([r.status, await r.json().catch(() => null)]))
                .catch((e) => done([0, String(e)]));
        "#;
        let args = vec![
            method.into(),
            path.into(),
            body.unwrap_or(serde_json::Value::Null),
        ];
        let reply = self
            .runtime
            .block_on(self.client.execute_async(script, args))
            .unwrap_or_else(|e| panic!("{method} {path} from the page: {e}"));
        let status = reply[0].as_u64().expect("a status") as u16;
        (status, reply[1].clone())
    }

    /// Writes the page as it is now to `target/console-screenshots/NAME.png`.
    pub fn screenshot(&self, name: &str) -> PathBuf {
        let png = self
            .runtime
            .block_on(self.client.screenshot())
            .expect("a screenshot");
        let dir = screenshot_dir();
        std::fs::create_dir_all(&dir).expect("the screenshot directory");
        let path = dir.join(format!("{name}.png"));
        std::fs::write(&path, png).unwrap_or_else(|e| panic!("writing {}: {e}", path.display()));
        path
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        // Ends the session, so chromedriver quits the browser before it is killed itself.
        let _ = self.runtime.block_on(self.client.clone().close());
    }
}

/// Why the browser cannot run here, when it cannot.
fn missing_program() -> Option<String> {
    for program in [CHROMIUM, CHROMEDRIVER] {
        if let Err(e) = Command::new(program).arg("--version").output() {
            return Some(format!("{program} cannot be run: {e}"));
        }
    }
    None
}
