//! Who may use the web UI: one-time login links, browser sessions, and failed logins
//! rate-limited.
//!
//! A session is two secrets. The cookie (`HttpOnly`, `SameSite=Strict`) is sent by the
//! browser to every port of the host, so a page an agent serves on `127.0.0.1:3000` would
//! receive it too; the page key is kept in the UI origin's `localStorage` (its port
//! included) and sent as the `X-Octl-Key` header, which no other origin can read or set.
//! Every API request needs both; the key is the CSRF token as well. Only SHA-256 digests of
//! the secrets are kept, in `$OCTL_HOME/ui/sessions.json` (mode 0600), so the UI survives a
//! daemon restart without a file that logs anyone in.

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use ring::rand::SecureRandom;
use serde::{Deserialize, Serialize};

/// How long a login link works.
pub const LOGIN_TTL: Duration = Duration::from_secs(600);
/// How long a session lasts after its last use.
pub const SESSION_IDLE: Duration = Duration::from_secs(30 * 24 * 3600);
/// Failed logins allowed per [`FAIL_WINDOW`]; beyond, every login is refused until the
/// window has passed (a correct link too: nothing is checked).
pub const FAILS_ALLOWED: usize = 10;
pub const FAIL_WINDOW: Duration = Duration::from_secs(60);
/// Sessions kept at most: the oldest goes first.
const SESSIONS_MAX: usize = 64;

/// A secret: 32 random bytes as 64 hex digits.
pub fn secret() -> String {
    let mut b = [0u8; 32];
    ring::rand::SystemRandom::new()
        .fill(&mut b)
        .expect("the system's random source works");
    hex(&b)
}

fn digest(s: &str) -> String {
    hex(ring::digest::digest(&ring::digest::SHA256, s.as_bytes()).as_ref())
}

pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Secrets are compared by their digests: how long a comparison takes says nothing of the
/// secret, as a guess cannot choose its digest's bytes.
fn same(a: &str, b: &str) -> bool {
    a == b
}

fn now_s() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Session {
    cookie: String,
    key: String,
    created: u64,
    used: u64,
}

/// A new session's two secrets, given to the browser once.
pub struct NewSession {
    pub cookie: String,
    pub key: String,
}

/// Why a login was refused.
#[derive(Debug, PartialEq, Eq)]
pub enum LoginRefused {
    /// Unknown, used or expired.
    BadToken,
    /// Too many failures lately: retry after this many seconds.
    Limited(u64),
}

pub struct Auth {
    file: PathBuf,
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    /// Login links not used yet: their digest and when each stops working.
    tokens: Vec<(String, Instant)>,
    sessions: Vec<Session>,
    fails: VecDeque<Instant>,
}

impl Auth {
    /// The sessions kept in `file` (none when it is missing or unreadable).
    pub fn load(file: PathBuf) -> Auth {
        let sessions: Vec<Session> = std::fs::read(&file)
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or_default();
        let cutoff = now_s().saturating_sub(SESSION_IDLE.as_secs());
        let sessions = sessions.into_iter().filter(|s| s.used >= cutoff).collect();
        Auth {
            file,
            inner: Mutex::new(Inner {
                sessions,
                ..Default::default()
            }),
        }
    }

    /// A new one-time login token.
    pub fn mint(&self) -> String {
        let token = secret();
        let mut inner = self.inner.lock().expect("auth lock");
        let now = Instant::now();
        inner.tokens.retain(|(_, until)| *until > now);
        inner.tokens.push((digest(&token), now + LOGIN_TTL));
        token
    }

    /// Uses `token` once: a new session, or why not.
    pub fn login(&self, token: &str) -> Result<NewSession, LoginRefused> {
        let mut inner = self.inner.lock().expect("auth lock");
        let now = Instant::now();
        while inner
            .fails
            .front()
            .is_some_and(|t| now.duration_since(*t) > FAIL_WINDOW)
        {
            inner.fails.pop_front();
        }
        if inner.fails.len() >= FAILS_ALLOWED {
            let oldest = *inner.fails.front().expect("full");
            let wait = FAIL_WINDOW.saturating_sub(now.duration_since(oldest));
            return Err(LoginRefused::Limited(wait.as_secs().max(1)));
        }
        inner.tokens.retain(|(_, until)| *until > now);
        let d = digest(token);
        let Some(i) = inner.tokens.iter().position(|(t, _)| same(t, &d)) else {
            inner.fails.push_back(now);
            return Err(LoginRefused::BadToken);
        };
        inner.tokens.remove(i);
        let new = NewSession {
            cookie: secret(),
            key: secret(),
        };
        let t = now_s();
        inner.sessions.push(Session {
            cookie: digest(&new.cookie),
            key: digest(&new.key),
            created: t,
            used: t,
        });
        if inner.sessions.len() > SESSIONS_MAX {
            inner.sessions.remove(0);
        }
        self.save(&inner);
        Ok(new)
    }

    /// Whether `cookie` is a live session's, and `key` (when given) its page key.
    pub fn check(&self, cookie: &str, key: Option<&str>) -> bool {
        let mut inner = self.inner.lock().expect("auth lock");
        let (c, k) = (digest(cookie), key.map(digest));
        let cutoff = now_s().saturating_sub(SESSION_IDLE.as_secs());
        let Some(s) = inner
            .sessions
            .iter_mut()
            .find(|s| same(&s.cookie, &c) && s.used >= cutoff)
        else {
            return false;
        };
        if k.is_some_and(|k| !same(&s.key, &k)) {
            return false;
        }
        // Written back at most hourly: a session in use is not rewritten on every request.
        let t = now_s();
        if t.saturating_sub(s.used) > 3600 {
            s.used = t;
            self.save(&inner);
        }
        true
    }

    /// Logs every session out and forgets every login link; how many sessions there were.
    pub fn clear(&self) -> usize {
        let mut inner = self.inner.lock().expect("auth lock");
        let n = inner.sessions.len();
        inner.sessions.clear();
        inner.tokens.clear();
        self.save(&inner);
        n
    }

    fn save(&self, inner: &Inner) {
        if let Err(e) = write_private(
            &self.file,
            &serde_json::to_vec(&inner.sessions).unwrap_or_default(),
        ) {
            tracing::warn!(file = %self.file.display(), error = %e, "cannot keep the UI's sessions: they end with the daemon");
        }
    }
}

/// Writes `bytes` to `path` as its owner's alone (0600), whole or not at all.
pub fn write_private(path: &std::path::Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let tmp = path.with_extension("tmp");
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&tmp)?;
    f.write_all(bytes)?;
    f.sync_all()?;
    std::fs::rename(&tmp, path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_link_logs_in_once_and_the_session_needs_both_secrets() {
        let dir = tempfile::tempdir().unwrap();
        let auth = Auth::load(dir.path().join("sessions.json"));
        let token = auth.mint();
        let s = auth.login(&token).unwrap();
        assert_eq!(auth.login(&token).err(), Some(LoginRefused::BadToken));
        assert!(auth.check(&s.cookie, Some(&s.key)));
        assert!(auth.check(&s.cookie, None));
        assert!(!auth.check(&s.cookie, Some(&s.cookie)));
        assert!(!auth.check(&s.key, Some(&s.key)));
        // A restarted daemon knows the session; the file holds no secret.
        let again = Auth::load(dir.path().join("sessions.json"));
        assert!(again.check(&s.cookie, Some(&s.key)));
        let kept = std::fs::read_to_string(dir.path().join("sessions.json")).unwrap();
        assert!(!kept.contains(&s.cookie) && !kept.contains(&s.key));
        assert_eq!(again.clear(), 1);
        assert!(!again.check(&s.cookie, Some(&s.key)));
    }

    #[test]
    fn failed_logins_are_limited_even_for_a_right_token_then() {
        let dir = tempfile::tempdir().unwrap();
        let auth = Auth::load(dir.path().join("sessions.json"));
        let token = auth.mint();
        for _ in 0..FAILS_ALLOWED {
            assert_eq!(auth.login("guess").err(), Some(LoginRefused::BadToken));
        }
        assert!(matches!(auth.login(&token), Err(LoginRefused::Limited(_))));
    }
}
