//! Counting tokens with the running server's own tokenizer, through its
//! tokenize endpoint (llama.cpp `POST /tokenize {"content"}`, vLLM and the
//! simulator `POST /tokenize {"prompt"}`; both fields are sent).
//!
//! Prompt building is synchronous and happens before a level starts, so a
//! small blocking HTTP/1.1 client on loopback is the simplest correct tool;
//! callers run it on a blocking thread.

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

use super::{TokenCounter, WorkloadError};

/// A token counter backed by a server's tokenize endpoint.
///
/// Prompt building counts many short texts, so one kept-alive connection is
/// reused (re-opened once if the server closed it).
pub struct ServerTokenizer {
    host: String,
    port: u16,
    /// Path prefix of the base URL (`/proxy` in `http://h:1/proxy`), kept so
    /// `/tokenize` goes where the completions go.
    prefix: String,
    /// `Authorization` header value for servers that need an API key.
    auth: Option<String>,
    conn: std::sync::Mutex<Option<TcpStream>>,
}

impl std::fmt::Debug for ServerTokenizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The authorization header is a secret: never part of a debug print.
        f.debug_struct("ServerTokenizer")
            .field("host", &self.host)
            .field("port", &self.port)
            .field("auth", &self.auth.as_ref().map(|_| "<redacted>"))
            .finish()
    }
}

/// The largest tokenize response read: counts for one prompt, never megabytes.
const MAX_RESPONSE_BYTES: usize = 64 * 1024 * 1024;

impl ServerTokenizer {
    /// A counter for the server at `base_url` (`http://host:port`).
    pub fn new(base_url: &str) -> Result<Self, WorkloadError> {
        let rest = base_url.strip_prefix("http://").ok_or_else(|| {
            WorkloadError::InvalidArgument(format!("`{base_url}` is not an http:// URL"))
        })?;
        let (authority, prefix) = match rest.find('/') {
            Some(i) => {
                let path = rest[i..].trim_end_matches('/');
                // Like the completions client: `/v1` names the API, not the server.
                (&rest[..i], path.strip_suffix("/v1").unwrap_or(path))
            }
            None => (rest, ""),
        };
        let (host, port) = match authority.rsplit_once(':') {
            Some((h, p)) => (
                h.to_string(),
                p.parse().map_err(|_| {
                    WorkloadError::InvalidArgument(format!("bad port in `{base_url}`"))
                })?,
            ),
            None => (authority.to_string(), 80),
        };
        Ok(Self {
            host,
            port,
            prefix: prefix.to_string(),
            auth: None,
            conn: std::sync::Mutex::new(None),
        })
    }

    /// Send `value` as the `Authorization` header (the endpoint's API key).
    pub fn with_authorization(mut self, value: Option<String>) -> Self {
        self.auth = value;
        self
    }

    fn connect(&self) -> Result<TcpStream, String> {
        let addr = (self.host.as_str(), self.port)
            .to_socket_addrs()
            .map_err(|e| e.to_string())?
            .next()
            .ok_or("no address")?;
        let s =
            TcpStream::connect_timeout(&addr, Duration::from_secs(5)).map_err(|e| e.to_string())?;
        s.set_read_timeout(Some(Duration::from_secs(60)))
            .map_err(|e| e.to_string())?;
        s.set_nodelay(true).map_err(|e| e.to_string())?;
        Ok(s)
    }

    fn exchange(&self, stream: &mut TcpStream, body: &[u8]) -> Result<(u16, Vec<u8>), String> {
        let auth = self
            .auth
            .as_ref()
            .map(|a| format!("Authorization: {a}\r\n"))
            .unwrap_or_default();
        let head = format!(
            "POST {}/tokenize HTTP/1.1\r\nHost: {}:{}\r\n{auth}Content-Type: application/json\r\nContent-Length: {}\r\n\r\n",
            self.prefix,
            self.host,
            self.port,
            body.len()
        );
        stream
            .write_all(head.as_bytes())
            .map_err(|e| e.to_string())?;
        stream.write_all(body).map_err(|e| e.to_string())?;
        read_response(stream)
    }

    fn post(&self, body: &[u8]) -> Result<(u16, Vec<u8>), String> {
        let mut guard = self
            .conn
            .lock()
            .map_err(|_| "tokenizer connection poisoned")?;
        for attempt in 0..2 {
            let mut stream = match guard.take() {
                Some(s) => s,
                None => self.connect()?,
            };
            match self.exchange(&mut stream, body) {
                Ok(r) => {
                    *guard = Some(stream);
                    return Ok(r);
                }
                // A kept-alive connection the server has closed: open a fresh one.
                Err(e) if attempt == 1 => return Err(e),
                Err(_) => {}
            }
        }
        Err("unreachable".into())
    }
}

/// Read one HTTP/1.1 response (Content-Length or chunked) from a kept-alive stream.
fn read_response(stream: &mut TcpStream) -> Result<(u16, Vec<u8>), String> {
    let mut raw = Vec::with_capacity(4096);
    let mut buf = [0u8; 16 * 1024];
    loop {
        if let Some(end) = raw.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&raw[..end]).to_ascii_lowercase();
            let length = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse::<usize>().ok());
            let complete = match length {
                Some(n) => raw.len() >= end + 4 + n,
                // Chunked: the body ends with the zero-size chunk.
                None => raw[end + 4..].ends_with(b"0\r\n\r\n"),
            };
            if complete {
                if let Some(n) = length {
                    raw.truncate(end + 4 + n);
                }
                return parse_response(&raw);
            }
        }
        let n = stream.read(&mut buf).map_err(|e| e.to_string())?;
        if n == 0 {
            return Err("connection closed".into());
        }
        raw.extend_from_slice(&buf[..n]);
        if raw.len() > MAX_RESPONSE_BYTES {
            return Err(format!(
                "tokenize response exceeds {MAX_RESPONSE_BYTES} bytes; the server is not answering a tokenize request"
            ));
        }
    }
}

/// Split an HTTP/1.1 response into status and (de-chunked) body.
fn parse_response(raw: &[u8]) -> Result<(u16, Vec<u8>), String> {
    let end = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or("truncated HTTP response")?;
    let head = String::from_utf8_lossy(&raw[..end]);
    let status: u16 = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or("no HTTP status")?;
    let mut body = raw[end + 4..].to_vec();
    let chunked = head.lines().any(|l| {
        l.to_ascii_lowercase().starts_with("transfer-encoding:")
            && l.to_ascii_lowercase().contains("chunked")
    });
    if chunked {
        let mut out = Vec::new();
        let mut rest: &[u8] = &body;
        loop {
            let line_end = rest
                .windows(2)
                .position(|w| w == b"\r\n")
                .ok_or("bad chunk")?;
            let size = usize::from_str_radix(String::from_utf8_lossy(&rest[..line_end]).trim(), 16)
                .map_err(|_| "bad chunk size")?;
            rest = &rest[line_end + 2..];
            if size == 0 {
                break;
            }
            out.extend_from_slice(rest.get(..size).ok_or("short chunk")?);
            rest = rest.get(size + 2..).unwrap_or(&[]);
        }
        body = out;
    }
    Ok((status, body))
}

impl TokenCounter for ServerTokenizer {
    fn encode(&self, text: &str) -> Result<Vec<u32>, WorkloadError> {
        let req = serde_json::json!({"content": text, "prompt": text, "add_special": false, "add_special_tokens": false});
        let err = |m: String| WorkloadError::Tokenizer {
            context: format!("http://{}:{}/tokenize", self.host, self.port),
            message: m,
        };
        let (status, body) = self.post(req.to_string().as_bytes()).map_err(err)?;
        if status != 200 {
            return Err(err(format!(
                "HTTP {status}: {}",
                String::from_utf8_lossy(&body)
            )));
        }
        let v: serde_json::Value = serde_json::from_slice(&body).map_err(|e| err(e.to_string()))?;
        let ids = v["tokens"]
            .as_array()
            .ok_or_else(|| err("answer has no `tokens` list".into()))?;
        Ok(ids
            .iter()
            // llama.cpp may answer `{"id", "piece"}` objects when asked for pieces.
            .map(|t| t.as_u64().or_else(|| t["id"].as_u64()).unwrap_or(0) as u32)
            .collect())
    }

    fn decode(&self, _ids: &[u32]) -> Result<String, WorkloadError> {
        Err(WorkloadError::Tokenizer {
            context: "server tokenizer".into(),
            message: "decoding through the server is not supported".into(),
        })
    }

    fn exact(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn responses_with_length_and_chunked_bodies_parse() {
        let (s, b) = parse_response(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}").unwrap();
        assert_eq!((s, b.as_slice()), (200, b"{}".as_slice()));
        let raw = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\n{\"a\r\n3\r\n\":1\r\n1\r\n}\r\n0\r\n\r\n";
        let (_, b) = parse_response(raw).unwrap();
        assert_eq!(b, b"{\"a\":1}");
        assert!(parse_response(b"HTTP/1.1 200").is_err());
    }

    #[test]
    fn urls_give_host_and_port() {
        let t = ServerTokenizer::new("http://127.0.0.1:8123/v1").unwrap();
        assert_eq!((t.host.as_str(), t.port), ("127.0.0.1", 8123));
        assert!(ServerTokenizer::new("https://x").is_err());
        assert_eq!(t.prefix, "");
        let t = ServerTokenizer::new("http://127.0.0.1:8123/proxy/llm/v1/").unwrap();
        assert_eq!(t.prefix, "/proxy/llm");
    }
}
