//! The web console's pages in a real browser: a headless Chromium (tests/console_browser/
//! browser.rs) opens the console of an embedded broker holding data produced through the
//! library, and each test checks what a user sees and does on a page. Every page is
//! screenshotted to `target/console-screenshots/`.

#[path = "common/process.rs"]
mod process;

#[path = "console_browser/browser.rs"]
mod browser;

use browser::Browser;

#[test]
fn harness_reads_a_page_and_screenshots_it() {
    let Some(browser) = Browser::start() else {
        return;
    };
    browser.goto("data:text/html,<p id=hello>hello console</p>");
    assert_eq!(browser.wait_for_text("#hello", |t| !t.is_empty()), "hello console");
    let png = std::fs::read(browser.screenshot("harness")).unwrap();
    assert_eq!(&png[1..4], b"PNG");
}
