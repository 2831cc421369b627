//! Just enough of the W3C WebDriver protocol over HTTP to drive headless
//! Chromium through `chromedriver`: a session, navigation, finding,
//! clicking and typing into elements, reading text and the title,
//! screenshots.

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

/// The key WebDriver names an element by.
const ELEMENT: &str = "element-6066-11e4-a52e-4f735466cecf";

pub struct Browser {
    http: reqwest::Client,
    session: String,
    base: String,
    driver: Child,
}

impl Browser {
    /// Starts `chromedriver` on a free loopback port and a headless
    /// Chromium session through it.
    pub async fn start() -> Browser {
        let driver_path =
            std::env::var("AGENTRT_CHROMEDRIVER").unwrap_or_else(|_| "chromedriver".into());
        let chromium =
            std::env::var("AGENTRT_CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into());
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let driver = Command::new(&driver_path)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| {
                panic!("{driver_path}: {e} (install chromium-driver, or set AGENTRT_CHROMEDRIVER)")
            });
        let http = reqwest::Client::builder().no_proxy().build().unwrap();
        let base = format!("http://127.0.0.1:{port}");
        for _ in 0..100 {
            if let Ok(r) = http.get(format!("{base}/status")).send().await
                && r.status().is_success()
            {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let capabilities = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {
                "binary": chromium,
                "args": ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                         "--no-proxy-server", "--window-size=1200,900"]
            }
        }}});
        let mut browser = Browser {
            http,
            session: String::new(),
            base,
            driver,
        };
        let created = browser
            .call(reqwest::Method::POST, "/session", Some(capabilities))
            .await;
        browser.session = created["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("{created}"))
            .to_owned();
        browser
    }

    async fn call(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> Value {
        let mut request = self.http.request(method, format!("{}{path}", self.base));
        if let Some(body) = body {
            request = request.json(&body);
        }
        let reply: Value = request.send().await.unwrap().json().await.unwrap();
        if reply["value"]["error"].is_string() {
            panic!("webdriver {path}: {reply}");
        }
        reply["value"].clone()
    }

    fn at(&self, path: &str) -> String {
        format!("/session/{}{path}", self.session)
    }

    pub async fn goto(&self, url: &str) {
        self.call(
            reqwest::Method::POST,
            &self.at("/url"),
            Some(json!({"url": url})),
        )
        .await;
    }

    pub async fn title(&self) -> String {
        self.call(reqwest::Method::GET, &self.at("/title"), None)
            .await
            .as_str()
            .unwrap_or_default()
            .to_owned()
    }

    /// The element `css` selects (it must be there).
    pub async fn find(&self, css: &str) -> String {
        let found = self
            .call(
                reqwest::Method::POST,
                &self.at("/element"),
                Some(json!({"using": "css selector", "value": css})),
            )
            .await;
        found[ELEMENT]
            .as_str()
            .unwrap_or_else(|| panic!("{css}: {found}"))
            .to_owned()
    }

    /// The element `css` selects once the page shows it (after a click
    /// that navigates, the next page may still be loading): polled for up
    /// to ten seconds.
    pub async fn wait_for(&self, css: &str) -> String {
        for _ in 0..100 {
            if self.count(css).await > 0 {
                return self.find(css).await;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("{css} never appeared")
    }

    /// How many elements `css` selects.
    pub async fn count(&self, css: &str) -> usize {
        let found = self
            .call(
                reqwest::Method::POST,
                &self.at("/elements"),
                Some(json!({"using": "css selector", "value": css})),
            )
            .await;
        found.as_array().map(Vec::len).unwrap_or_default()
    }

    pub async fn text(&self, element: &str) -> String {
        let path = self.at(&format!("/element/{element}/text"));
        self.call(reqwest::Method::GET, &path, None)
            .await
            .as_str()
            .unwrap_or_default()
            .to_owned()
    }

    /// Clears a text field, then types `text` into it as keys.
    pub async fn type_into(&self, element: &str, text: &str) {
        let clear = self.at(&format!("/element/{element}/clear"));
        self.call(reqwest::Method::POST, &clear, Some(json!({})))
            .await;
        let keys = self.at(&format!("/element/{element}/value"));
        self.call(reqwest::Method::POST, &keys, Some(json!({ "text": text })))
            .await;
    }

    pub async fn click(&self, element: &str) {
        let path = self.at(&format!("/element/{element}/click"));
        self.call(reqwest::Method::POST, &path, Some(json!({})))
            .await;
    }

    /// Saves a screenshot of the page as `target/browser-screenshots/<name>.png`.
    pub async fn screenshot(&self, name: &str) {
        let png = self
            .call(reqwest::Method::GET, &self.at("/screenshot"), None)
            .await;
        let bytes = base64_decode(png.as_str().unwrap_or_default());
        // target/tmp's sibling, whichever crate's test this is.
        let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("../browser-screenshots");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(format!("{name}.png")), bytes).unwrap();
    }

    pub async fn quit(mut self) {
        let path = self.at("");
        let _ = self
            .http
            .delete(format!("{}{path}", self.base))
            .send()
            .await;
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

/// Standard base64 (WebDriver's screenshots), decoded.
fn base64_decode(text: &str) -> Vec<u8> {
    let value = |c: u8| -> Option<u32> {
        Some(match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        } as u32)
    };
    let mut out = Vec::with_capacity(text.len() * 3 / 4);
    let (mut acc, mut bits) = (0u32, 0);
    for v in text.bytes().filter_map(value) {
        acc = (acc << 6) | v;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    out
}
