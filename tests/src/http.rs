//! A minimal HTTP/1.1 client over a Unix socket: enough for JSON-RPC and the event stream,
//! with no dependency on the code under test.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;

use serde_json::Value;

/// A complete response.
#[derive(Debug)]
pub struct Response {
    pub status: u16,
    pub body: Vec<u8>,
}

impl Response {
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| {
            panic!(
                "response body is not JSON ({e}): {:?}",
                String::from_utf8_lossy(&self.body)
            )
        })
    }
}

fn head(method: &str, path: &str, body_len: Option<usize>) -> String {
    head_with(method, path, body_len, true)
}

fn head_with(method: &str, path: &str, body_len: Option<usize>, close: bool) -> String {
    let mut h = format!("{method} {path} HTTP/1.1\r\nHost: octld\r\n");
    if close {
        h.push_str("Connection: close\r\n");
    }
    if let Some(n) = body_len {
        h.push_str(&format!(
            "Content-Type: application/json\r\nContent-Length: {n}\r\n"
        ));
    }
    h.push_str("\r\n");
    h
}

/// Sends one request and reads the whole response.
pub fn request(
    socket: &Path,
    method: &str,
    path: &str,
    body: Option<&[u8]>,
) -> std::io::Result<Response> {
    let mut s = UnixStream::connect(socket)?;
    s.set_read_timeout(Some(Duration::from_secs(60)))?;
    s.write_all(head(method, path, body.map(<[u8]>::len)).as_bytes())?;
    if let Some(b) = body {
        // A server that refuses a body early (413) may close before reading it all; its
        // answer is still there to read.
        if let Err(e) = s.write_all(b) {
            if e.kind() != std::io::ErrorKind::BrokenPipe
                && e.kind() != std::io::ErrorKind::ConnectionReset
            {
                return Err(e);
            }
        }
    }
    let mut r = BufReader::new(s);
    let (status, chunked, len) = read_head(&mut r)?;
    let body = if chunked {
        let mut out = Vec::new();
        while let Some(chunk) = read_chunk(&mut r)? {
            out.extend(chunk);
        }
        out
    } else if let Some(n) = len {
        let mut out = vec![0; n];
        r.read_exact(&mut out)?;
        out
    } else {
        let mut out = Vec::new();
        r.read_to_end(&mut out)?;
        out
    };
    Ok(Response { status, body })
}

fn read_head(r: &mut impl BufRead) -> std::io::Result<(u16, bool, Option<usize>)> {
    let mut line = String::new();
    r.read_line(&mut line)?;
    let status: u16 = line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| std::io::Error::other(format!("bad status line {line:?}")))?;
    let mut chunked = false;
    let mut len = None;
    loop {
        line.clear();
        r.read_line(&mut line)?;
        let l = line.trim_end();
        if l.is_empty() {
            break;
        }
        let lower = l.to_ascii_lowercase();
        if lower.starts_with("transfer-encoding:") && lower.contains("chunked") {
            chunked = true;
        }
        if let Some(v) = lower.strip_prefix("content-length:") {
            len = v.trim().parse().ok();
        }
    }
    Ok((status, chunked, len))
}

fn read_chunk(r: &mut impl BufRead) -> std::io::Result<Option<Vec<u8>>> {
    let mut line = String::new();
    if r.read_line(&mut line)? == 0 {
        return Ok(None);
    }
    let size = usize::from_str_radix(line.trim(), 16)
        .map_err(|e| std::io::Error::other(format!("bad chunk size {line:?}: {e}")))?;
    if size == 0 {
        return Ok(None);
    }
    let mut buf = vec![0; size + 2];
    r.read_exact(&mut buf)?;
    buf.truncate(size);
    Ok(Some(buf))
}

/// An open event stream, read line by line as the daemon sends it.
pub struct Stream {
    reader: BufReader<UnixStream>,
    pending: Vec<u8>,
    pub status: u16,
}

impl Stream {
    pub fn open(socket: &Path, path: &str) -> std::io::Result<Stream> {
        let mut s = UnixStream::connect(socket)?;
        s.set_read_timeout(Some(Duration::from_secs(30)))?;
        s.write_all(head("GET", path, None).as_bytes())?;
        let mut reader = BufReader::new(s);
        let (status, _, _) = read_head(&mut reader)?;
        Ok(Stream {
            reader,
            pending: Vec::new(),
            status,
        })
    }

    /// The next complete JSON line, or None when the stream ended.
    pub fn next_line(&mut self) -> std::io::Result<Option<Value>> {
        loop {
            if let Some(i) = self.pending.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = self.pending.drain(..=i).collect();
                return Ok(Some(
                    serde_json::from_slice(&line[..line.len() - 1])
                        .map_err(std::io::Error::other)?,
                ));
            }
            match read_chunk(&mut self.reader)? {
                Some(chunk) => self.pending.extend(chunk),
                None => return Ok(None),
            }
        }
    }
}

/// A kept-alive connection for many requests in a row (benchmarks, long-lived clients).
pub struct Conn {
    reader: BufReader<UnixStream>,
}

impl Conn {
    pub fn open(socket: &Path) -> std::io::Result<Conn> {
        let s = UnixStream::connect(socket)?;
        s.set_read_timeout(Some(Duration::from_secs(60)))?;
        Ok(Conn {
            reader: BufReader::new(s),
        })
    }

    /// `POST /rpc` with `body`; the response must carry a Content-Length.
    pub fn post_rpc(&mut self, body: &[u8]) -> std::io::Result<Response> {
        let mut req = head_with("POST", "/rpc", Some(body.len()), false).into_bytes();
        req.extend_from_slice(body);
        self.reader.get_mut().write_all(&req)?;
        let (status, _, len) = read_head(&mut self.reader)?;
        let mut out = vec![0; len.unwrap_or(0)];
        self.reader.read_exact(&mut out)?;
        Ok(Response { status, body: out })
    }
}
