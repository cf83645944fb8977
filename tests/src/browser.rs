//! A real browser for the web UI's tests: headless Chromium driven over WebDriver by
//! chromedriver (both from Debian: `/usr/bin/chromium`, `/usr/bin/chromedriver`; or
//! `OCTL_TEST_CHROMIUM` / `OCTL_TEST_CHROMEDRIVER`), through `fantoccini`, with no TLS stack
//! (chromedriver is plain HTTP on loopback).
//!
//! The calls are blocking, as the rest of the harness is: the browser owns a small tokio
//! runtime and waits on each WebDriver command. Waits poll the page with a deadline
//! ([`crate::wait`]); a timeout says what the page showed. Chromedriver, and the Chromium it
//! started, are killed when the [`Browser`] is dropped; Chromium's profile is a directory of
//! the test's own (never the user's).

use std::net::TcpListener;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use fantoccini::elements::Element;
use fantoccini::error::CmdError;
use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::{json, Value};

use crate::wait::{wait_until, wait_until_describing};

/// How long a wait for the page lasts unless told otherwise.
pub const DEADLINE: Duration = Duration::from_secs(20);

/// The desktop and phone sizes the screenshots are taken at (CSS pixels of the viewport).
pub const DESKTOP: (u32, u32) = (1280, 800);
pub const PHONE: (u32, u32) = (390, 844);

/// A port on 127.0.0.1 nothing listens on now (bound, then let go).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

fn program(var: &str, name: &str) -> PathBuf {
    if let Some(p) = std::env::var_os(var) {
        return PathBuf::from(p);
    }
    for dir in ["/usr/bin", "/usr/local/bin"] {
        let p = Path::new(dir).join(name);
        if p.exists() {
            return p;
        }
    }
    panic!("{name} is missing: install Debian's chromium and chromium-driver (or set {var})");
}

/// Where screenshots go: `target/ui-shots/` of this build (`CARGO_TARGET_DIR`, else the
/// target directory the test binary is in, else the workspace's `target/`).
pub fn shots_dir() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .or_else(|| {
            // target/<profile>/deps/<test binary>
            let exe = std::env::current_exe().ok()?;
            let deps = exe.parent()?;
            (deps.file_name()? == "deps").then(|| deps.parent()?.parent().map(Path::to_path_buf))?
        })
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../target"));
    let dir = target.join("ui-shots");
    std::fs::create_dir_all(&dir).expect("create target/ui-shots");
    dir
}

pub struct Browser {
    rt: tokio::runtime::Runtime,
    client: Option<Client>,
    driver: Child,
    driver_log: PathBuf,
    /// The viewport asked for last, `(width, height)`.
    size: (u32, u32),
}

impl Browser {
    /// Starts chromedriver on a free port and a headless Chromium session whose profile is
    /// under `dir`, at the desktop size.
    pub fn start(dir: &Path) -> Browser {
        let chromium = program("OCTL_TEST_CHROMIUM", "chromium");
        let chromedriver = program("OCTL_TEST_CHROMEDRIVER", "chromedriver");
        let profile = dir.join("chromium-profile");
        std::fs::create_dir_all(&profile).expect("chromium profile dir");
        let driver_log = dir.join("chromedriver.log");
        // Chromium writes outside its profile too (~/.cache/dconf, ~/.config/chromium/Crash
        // Reports): a home of its own, never the user's.
        let home = dir.join("browser-home");
        std::fs::create_dir_all(&home).expect("browser home");
        let port = free_port();
        let mut cmd = Command::new(&chromedriver);
        cmd.env("HOME", &home)
            .env("XDG_CONFIG_HOME", home.join(".config"))
            .env("XDG_CACHE_HOME", home.join(".cache"))
            .env("XDG_DATA_HOME", home.join(".local/share"))
            .arg(format!("--port={port}"))
            .arg(format!("--log-path={}", driver_log.display()))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            // Its own process group: dropped, it goes with every Chromium process it started.
            .process_group(0);
        let driver = cmd.spawn().expect("start chromedriver");
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("tokio runtime");
        let mut browser = Browser {
            rt,
            client: None,
            driver,
            driver_log,
            size: DESKTOP,
        };
        let url = format!("http://127.0.0.1:{port}");
        wait_until("chromedriver to listen", Duration::from_secs(20), || {
            std::net::TcpStream::connect(("127.0.0.1", port)).ok()
        });
        let args = vec![
            "--headless=new".to_string(),
            "--no-sandbox".into(),
            "--disable-gpu".into(),
            "--disable-dev-shm-usage".into(),
            "--no-first-run".into(),
            "--no-default-browser-check".into(),
            "--disable-extensions".into(),
            "--disable-background-networking".into(),
            "--disable-sync".into(),
            "--disable-component-update".into(),
            "--mute-audio".into(),
            format!("--window-size={},{}", DESKTOP.0, DESKTOP.1),
            format!("--user-data-dir={}", profile.display()),
        ];
        let caps = json!({
            "browserName": "chrome",
            "goog:chromeOptions": {"binary": chromium.display().to_string(), "args": args},
        });
        let caps = match caps {
            Value::Object(m) => m,
            _ => unreachable!(),
        };
        let client = browser
            .rt
            .block_on(
                ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new())
                    .capabilities(caps)
                    .connect(&url),
            )
            .unwrap_or_else(|e| {
                panic!(
                    "a Chromium session through chromedriver: {e}\n{}",
                    browser.driver_log_tail()
                )
            });
        browser.client = Some(client);
        browser.set_size(DESKTOP.0, DESKTOP.1);
        browser
    }

    fn driver_log_tail(&self) -> String {
        let log = std::fs::read_to_string(&self.driver_log).unwrap_or_default();
        let tail: Vec<&str> = log.lines().rev().take(40).collect();
        tail.into_iter().rev().collect::<Vec<_>>().join("\n")
    }

    /// The WebDriver client, for what the helpers here do not cover (with [`block_on`]).
    ///
    /// [`block_on`]: Self::block_on
    pub fn client(&self) -> &Client {
        self.client.as_ref().expect("browser session")
    }

    /// Runs one of the client's futures to its end.
    pub fn block_on<F: std::future::Future>(&self, f: F) -> F::Output {
        self.rt.block_on(f)
    }

    /// Makes the page's viewport `width`×`height` CSS pixels (the window is sized, then
    /// corrected by what the browser's own frame takes).
    pub fn set_size(&mut self, width: u32, height: u32) {
        self.size = (width, height);
        let c = self.client().clone();
        self.block_on(c.set_window_size(width, height))
            .expect("set the window size");
        for _ in 0..3 {
            let inner = self.exec("return [window.innerWidth, window.innerHeight]", vec![]);
            let (iw, ih) = (
                inner[0].as_i64().unwrap_or(0),
                inner[1].as_i64().unwrap_or(0),
            );
            if iw == width as i64 && ih == height as i64 {
                return;
            }
            let (ow, oh) = self.block_on(c.get_window_size()).expect("window size");
            let w = (ow as i64 + width as i64 - iw).max(1) as u32;
            let h = (oh as i64 + height as i64 - ih).max(1) as u32;
            self.block_on(c.set_window_size(w, h))
                .expect("set the window size");
        }
        let inner = self.exec("return [window.innerWidth, window.innerHeight]", vec![]);
        assert_eq!(
            inner,
            json!([width, height]),
            "the viewport could not be made {width}x{height}"
        );
    }

    /// The viewport asked for last.
    pub fn size(&self) -> (u32, u32) {
        self.size
    }

    pub fn goto(&self, url: &str) {
        let c = self.client().clone();
        self.block_on(c.goto(url))
            .unwrap_or_else(|e| panic!("open {url}: {e}"));
    }

    /// Sets the address's hash (`#/runs`, `#/run/ID/NODE/diff`), as a link in the page would.
    pub fn go_hash(&self, hash: &str) {
        self.exec("location.hash = arguments[0]", vec![json!(hash)]);
    }

    /// `location.hash` now.
    pub fn hash(&self) -> String {
        self.exec("return location.hash", vec![])
            .as_str()
            .unwrap_or_default()
            .to_string()
    }

    /// Runs `script` in the page (a function body: `return …` gives its value back).
    pub fn exec(&self, script: &str, args: Vec<Value>) -> Value {
        self.try_exec(script, args)
            .unwrap_or_else(|e| panic!("script failed: {e}\n{script}"))
    }

    pub fn try_exec(&self, script: &str, args: Vec<Value>) -> Result<Value, CmdError> {
        let c = self.client().clone();
        self.block_on(c.execute(script, args))
    }

    /// Every element matching `css` now.
    pub fn all(&self, css: &str) -> Vec<Element> {
        let c = self.client().clone();
        self.block_on(c.find_all(Locator::Css(css)))
            .unwrap_or_default()
    }

    /// What the page shows, in a few lines: for a timeout's message.
    pub fn describe(&self) -> String {
        let v = self.try_exec(
            "const s = document.querySelector('[data-test=status]'); const b = document.querySelector('[data-test=conn-banner]');\
             return {hash: location.hash, url: location.href, status: s && !s.hidden ? s.textContent : null,\
             banner: b && !b.hidden ? b.textContent : null, text: (document.body ? document.body.innerText : '').slice(0, 3000)}",
            vec![],
        );
        match v {
            Ok(v) => format!(
                "the page: {} {}, status {}, banner {}; its text:\n{}",
                v["url"],
                v["hash"],
                v["status"],
                v["banner"],
                v["text"].as_str().unwrap_or("")
            ),
            Err(e) => format!("the page could not be read: {e}"),
        }
    }

    /// Waits until `check` gives `Some`, saying what the page showed on timeout.
    pub fn wait<T>(&self, what: &str, timeout: Duration, check: impl FnMut() -> Option<T>) -> T {
        wait_until_describing(what, timeout, check, || self.describe())
    }

    /// Waits until the script's value is truthy (not false, null, 0 or ""); returns it.
    pub fn wait_js(&self, what: &str, script: &str, args: Vec<Value>) -> Value {
        self.wait(what, DEADLINE, || {
            let v = self.try_exec(script, args.clone()).ok()?;
            let truthy = match &v {
                Value::Null | Value::Bool(false) => false,
                Value::Number(n) => n.as_f64() != Some(0.0),
                Value::String(s) => !s.is_empty(),
                _ => true,
            };
            truthy.then_some(v)
        })
    }

    /// The first element matching `css` that is displayed, once there is one.
    pub fn wait_for(&self, css: &str) -> Element {
        self.wait(&format!("an element {css}"), DEADLINE, || self.shown(css))
    }

    /// The first element matching `css` that is displayed now, if any.
    pub fn shown(&self, css: &str) -> Option<Element> {
        self.all(css)
            .into_iter()
            .find(|el| self.block_on(el.is_displayed()).unwrap_or(false))
    }

    /// Waits until no element matching `css` is displayed.
    pub fn wait_gone(&self, css: &str) {
        self.wait(&format!("no element {css} shown"), DEADLINE, || {
            self.shown(css).is_none().then_some(())
        })
    }

    /// The `textContent` of each element matching `css` that is displayed (has a box) now:
    /// the text as the page holds it, before CSS transforms it (an upper-cased heading).
    pub fn texts(&self, css: &str) -> Vec<String> {
        let v = self.try_exec(
            "return [...document.querySelectorAll(arguments[0])]\
             .filter((e) => e.getClientRects().length > 0).map((e) => e.textContent)",
            vec![json!(css)],
        );
        match v {
            Ok(Value::Array(a)) => a
                .into_iter()
                .filter_map(|t| t.as_str().map(str::to_string))
                .collect(),
            _ => Vec::new(),
        }
    }

    /// Waits until a displayed `css` element's text contains `text`; returns its text.
    pub fn wait_text(&self, css: &str, text: &str) -> String {
        self.wait(&format!("{css} to show {text:?}"), DEADLINE, || {
            self.texts(css).into_iter().find(|t| t.contains(text))
        })
    }

    /// Clicks the first displayed, enabled `css` element once there is one (a redraw that
    /// replaced it meanwhile is tried again).
    pub fn click(&self, css: &str) {
        let last = std::cell::RefCell::new(String::from("none shown"));
        wait_until_describing(
            &format!("{css} to be clicked"),
            DEADLINE,
            || {
                let Some(el) = self.shown(css) else {
                    *last.borrow_mut() = "none shown".into();
                    return None;
                };
                if !self.block_on(el.is_enabled()).unwrap_or(false) {
                    *last.borrow_mut() = "disabled".into();
                    return None;
                }
                match self.block_on(el.click()) {
                    Ok(()) => Some(()),
                    Err(e) => {
                        *last.borrow_mut() = e.to_string();
                        None
                    }
                }
            },
            || format!("last try: {}\n{}", last.borrow(), self.describe()),
        )
    }

    /// Clicks an element found otherwise (inside another, say).
    pub fn click_el(&self, el: &Element) {
        self.block_on(el.click()).expect("click");
    }

    /// Types `text` into the first displayed `css` element (after what it holds).
    pub fn type_into(&self, css: &str, text: &str) {
        self.wait(&format!("{css} to be typed into"), DEADLINE, || {
            let el = self.shown(css)?;
            self.block_on(el.send_keys(text)).ok()
        })
    }

    /// The text of the first displayed `css` element (waits for one).
    pub fn text(&self, css: &str) -> String {
        self.wait(&format!("the text of {css}"), DEADLINE, || {
            self.texts(css).into_iter().next()
        })
    }

    /// `document.body.innerText`: what a person can read on the page now.
    pub fn page_text(&self) -> String {
        self.exec("return document.body.innerText", vec![])
            .as_str()
            .unwrap_or_default()
            .to_string()
    }

    /// Takes a screenshot of the viewport to `target/ui-shots/<test>-<view>-<w>x<h>.png`;
    /// returns its path.
    pub fn screenshot(&self, test: &str, view: &str) -> PathBuf {
        let (w, h) = self.size;
        let path = shots_dir().join(format!("{test}-{view}-{w}x{h}.png"));
        let c = self.client().clone();
        let png = self.block_on(c.screenshot()).expect("screenshot");
        std::fs::write(&path, png).expect("write the screenshot");
        path
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        if let Some(c) = self.client.take() {
            // Ends Chromium; a browser that does not answer goes with the process group.
            let _ = self
                .rt
                .block_on(async { tokio::time::timeout(Duration::from_secs(5), c.close()).await });
        }
        // SAFETY: a signal to the process group this browser started (chromedriver's own).
        unsafe { libc::kill(-(self.driver.id() as libc::pid_t), libc::SIGKILL) };
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}
