//! Counting tokens with the running server's own tokenizer, through its
//! tokenize endpoint (llama.cpp `POST /tokenize {"content"}`, vLLM and the
//! simulator `POST /tokenize {"prompt"}`; both fields are sent).
//!
//! Prompt building is synchronous and happens before a level starts, while
//! counting many short texts, so [`ServerTokenizer`] is a blocking facade over
//! the crate's connection pool (one kept-alive connection, re-opened when the
//! server closed it), driven by a runtime of its own.

use std::sync::mpsc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, LengthLimitError, Limited};
use hyper::header::{HeaderValue, AUTHORIZATION, CONTENT_TYPE};
use hyper::{Method, Request, Uri};

use super::{TokenCounter, WorkloadError};
use crate::client::pool::Pool;
use crate::client::{error_chain, request_retrying};

/// A token counter backed by a server's tokenize endpoint.
pub struct ServerTokenizer {
    /// The tokenize URL; the base URL's path prefix (`/proxy` in
    /// `http://h:1/proxy`) is kept so `/tokenize` goes where the completions go.
    uri: Uri,
    /// `Authorization` header value for servers that need an API key.
    auth: Option<String>,
    pool: Pool,
    /// Drives the pool. It is this counter's own so that counting works from
    /// any thread, including one that is itself running async tasks.
    runtime: Option<tokio::runtime::Runtime>,
    /// Largest response body read before giving up on the server.
    max_response_bytes: usize,
}

impl std::fmt::Debug for ServerTokenizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The authorization header is a secret: never part of a debug print.
        f.debug_struct("ServerTokenizer")
            .field("uri", &self.uri)
            .field("auth", &self.auth.as_ref().map(|_| "<redacted>"))
            .finish()
    }
}

/// The largest tokenize response read: counts for one prompt, never more.
const MAX_RESPONSE_BYTES: usize = 64 * 1024 * 1024;
/// Time to open a connection; a tokenize endpoint that is not there is a
/// fallback to the approximate counter, not a long wait.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Time for the whole answer to one tokenize request.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(60);

impl ServerTokenizer {
    /// A counter for the server at `base_url` (`http://host:port` or `https://…`).
    pub fn new(base_url: &str) -> Result<Self, WorkloadError> {
        let (scheme, rest) = match (
            base_url.strip_prefix("http://"),
            base_url.strip_prefix("https://"),
        ) {
            (Some(rest), _) => ("http", rest),
            (None, Some(rest)) => ("https", rest),
            (None, None) => {
                return Err(WorkloadError::InvalidArgument(format!(
                    "`{base_url}` is not an http:// or https:// URL"
                )))
            }
        };
        let (authority, prefix) = match rest.find('/') {
            Some(i) => {
                let path = rest[i..].trim_end_matches('/');
                // Like the completions client: `/v1` names the API, not the server.
                (&rest[..i], path.strip_suffix("/v1").unwrap_or(path))
            }
            None => (rest, ""),
        };
        let uri: Uri = format!("{scheme}://{authority}{prefix}/tokenize")
            .parse()
            .map_err(|e| WorkloadError::InvalidArgument(format!("bad URL `{base_url}`: {e}")))?;
        // `Uri` accepts any port text and only fails to read it later.
        let port_given = uri.authority().is_some_and(|a| {
            let host_port = a.as_str().rsplit('@').next().unwrap_or_default();
            host_port.len() > a.host().len()
        });
        if port_given && uri.port_u16().is_none() {
            return Err(WorkloadError::InvalidArgument(format!(
                "bad port in `{base_url}`"
            )));
        }
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("servebench-tokenize")
            .enable_all()
            .build()
            .map_err(|e| WorkloadError::Tokenizer {
                context: uri.to_string(),
                message: format!("cannot start the HTTP client: {e}"),
            })?;
        Ok(Self {
            uri,
            auth: None,
            pool: Pool::new(Some(CONNECT_TIMEOUT)),
            runtime: Some(runtime),
            max_response_bytes: MAX_RESPONSE_BYTES,
        })
    }

    /// Send `value` as the `Authorization` header (the endpoint's API key).
    pub fn with_authorization(mut self, value: Option<String>) -> Self {
        self.auth = value;
        self
    }

    /// POST `body` and wait for the status and the (bounded) body.
    fn post(&self, body: Bytes) -> Result<(u16, Bytes), String> {
        let auth = match &self.auth {
            Some(a) => {
                let mut v = HeaderValue::from_str(a)
                    .map_err(|_| "the API key is not a valid HTTP header value".to_string())?;
                v.set_sensitive(true);
                Some(v)
            }
            None => None,
        };
        let answer = exchange(
            self.pool.clone(),
            self.uri.clone(),
            auth,
            body,
            self.max_response_bytes,
        );
        // Spawned and awaited over a channel rather than `block_on`, which
        // refuses to run on a thread that is already driving a runtime.
        let (tx, rx) = mpsc::channel();
        let runtime = self.runtime.as_ref().ok_or("the HTTP client has stopped")?;
        runtime.spawn(async move {
            let _ = tx.send(answer.await);
        });
        rx.recv()
            .map_err(|_| "the HTTP client stopped before answering".to_string())?
    }
}

impl Drop for ServerTokenizer {
    fn drop(&mut self) {
        // A plain drop blocks, which panics when the last owner goes away
        // inside an async task.
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_background();
        }
    }
}

/// One tokenize exchange: status and body, the body cut off at `limit` bytes.
async fn exchange(
    pool: Pool,
    uri: Uri,
    auth: Option<HeaderValue>,
    body: Bytes,
    limit: usize,
) -> Result<(u16, Bytes), String> {
    let make = || {
        let mut req = Request::new(Full::new(body.clone()));
        *req.method_mut() = Method::POST;
        *req.uri_mut() = uri.clone();
        let headers = req.headers_mut();
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        if let Some(a) = &auth {
            headers.insert(AUTHORIZATION, a.clone());
        }
        req
    };
    let answer = async {
        let (resp, _) = request_retrying(&pool, make).await;
        let resp = resp.map_err(|e| error_chain(&e))?;
        let status = resp.status().as_u16();
        let body = Limited::new(resp.into_body(), limit)
            .collect()
            .await
            .map_err(|e| {
                if e.downcast_ref::<LengthLimitError>().is_some() {
                    format!(
                        "tokenize response exceeds {limit} bytes; the server is not answering a tokenize request"
                    )
                } else {
                    error_chain(&*e)
                }
            })?
            .to_bytes();
        Ok((status, body))
    };
    tokio::time::timeout(ANSWER_TIMEOUT, answer)
        .await
        .map_err(|_| format!("no answer within {ANSWER_TIMEOUT:?}"))?
}

impl TokenCounter for ServerTokenizer {
    fn encode(&self, text: &str) -> Result<Vec<u32>, WorkloadError> {
        let req = serde_json::json!({"content": text, "prompt": text, "add_special": false, "add_special_tokens": false});
        let err = |m: String| WorkloadError::Tokenizer {
            context: self.uri.to_string(),
            message: m,
        };
        let (status, body) = self.post(Bytes::from(req.to_string())).map_err(err)?;
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
    use std::io::{BufRead, BufReader, Read, Write};
    use std::net::TcpListener;
    use std::sync::{Arc, Mutex};

    /// A real HTTP/1.1 server on 127.0.0.1 answering every request with the
    /// same bytes, written in `parts` (each flushed on its own).
    struct Server {
        url: String,
        /// Each request's head lines and body, as received.
        requests: Arc<Mutex<Vec<String>>>,
    }

    fn serve(parts: Vec<Vec<u8>>, close_after_each: bool) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let requests = Arc::new(Mutex::new(Vec::new()));
        let seen = requests.clone();
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(mut out) = conn else { return };
                let (parts, seen) = (parts.clone(), seen.clone());
                std::thread::spawn(move || {
                    let mut reader = BufReader::new(out.try_clone().unwrap());
                    loop {
                        let (mut request, mut length) = (String::new(), 0usize);
                        loop {
                            let mut line = String::new();
                            if reader.read_line(&mut line).unwrap_or(0) == 0 {
                                return;
                            }
                            if line == "\r\n" {
                                break;
                            }
                            if let Some(v) =
                                line.to_ascii_lowercase().strip_prefix("content-length:")
                            {
                                length = v.trim().parse().unwrap();
                            }
                            request.push_str(&line);
                        }
                        let mut body = vec![0; length];
                        if reader.read_exact(&mut body).is_err() {
                            return;
                        }
                        request.push_str(&String::from_utf8_lossy(&body));
                        seen.lock().unwrap().push(request);
                        for part in &parts {
                            if out.write_all(part).and_then(|_| out.flush()).is_err() {
                                return;
                            }
                        }
                        if close_after_each {
                            return;
                        }
                    }
                });
            }
        });
        Server { url, requests }
    }

    fn with_length(status: &str, body: &str) -> Vec<Vec<u8>> {
        vec![format!(
            "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        )
        .into_bytes()]
    }

    fn chunked(chunks: &[&[u8]]) -> Vec<Vec<u8>> {
        let mut parts = vec![b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec()];
        for c in chunks {
            let mut part = format!("{:x}\r\n", c.len()).into_bytes();
            part.extend_from_slice(c);
            part.extend_from_slice(b"\r\n");
            parts.push(part);
        }
        parts.push(b"0\r\n\r\n".to_vec());
        parts
    }

    #[test]
    fn urls_keep_the_path_prefix_and_drop_v1() {
        let t = ServerTokenizer::new("http://127.0.0.1:8123/v1").unwrap();
        assert_eq!(t.uri, "http://127.0.0.1:8123/tokenize");
        let t = ServerTokenizer::new("http://127.0.0.1:8123/proxy/llm/v1/").unwrap();
        assert_eq!(t.uri, "http://127.0.0.1:8123/proxy/llm/tokenize");
        // A TLS endpoint's /tokenize is asked over TLS too.
        let t = ServerTokenizer::new("https://api.example.test/v1").unwrap();
        assert_eq!(t.uri, "https://api.example.test/tokenize");
        assert!(ServerTokenizer::new("ftp://x").is_err());
        assert!(ServerTokenizer::new("http://h:port").is_err());
    }

    #[test]
    fn counts_come_from_the_tokenize_endpoint_with_the_key() {
        let s = serve(with_length("200 OK", r#"{"tokens":[1,2,3]}"#), false);
        let t = ServerTokenizer::new(&format!("{}/proxy/v1", s.url))
            .unwrap()
            .with_authorization(Some("Bearer k".into()));
        assert_eq!(t.count("hello").unwrap(), 3);
        assert_eq!(t.encode("hello").unwrap(), [1, 2, 3]);
        let requests = s.requests.lock().unwrap();
        assert_eq!(requests.len(), 2);
        for r in requests.iter() {
            assert!(r.starts_with("POST /proxy/tokenize HTTP/1.1\r\n"), "{r}");
            assert!(
                r.to_ascii_lowercase().contains("authorization: bearer k"),
                "{r}"
            );
            assert!(
                r.contains(r#""content":"hello""#) && r.contains(r#""prompt":"hello""#),
                "{r}"
            );
        }
        assert!(!format!("{t:?}").contains("Bearer"));
    }

    #[test]
    fn a_chunked_answer_is_read_to_its_last_chunk() {
        // The first chunk ends in `0\r\n\r\n` (JSON whitespace after a 30),
        // which looks like the end of a chunked body to a byte-suffix check.
        let s = serve(
            chunked(&[
                b"{\"tokens\":[1,2,30\r\n\r\n",
                b",{\"id\":7,\"piece\":\"x\"}",
                b"]}",
            ]),
            false,
        );
        let t = ServerTokenizer::new(&s.url).unwrap();
        assert_eq!(t.encode("a").unwrap(), [1, 2, 30, 7]);
        assert_eq!(t.count("b").unwrap(), 4);
    }

    #[test]
    fn an_oversized_answer_is_an_error_naming_the_url() {
        let big = vec![b' '; 4096];
        for parts in [
            chunked(&[b"{\"tokens\":[", &big, &big, b"]}"]),
            with_length("200 OK", &format!("{{\"tokens\":[{}]}}", " ".repeat(8192))),
        ] {
            let s = serve(parts, false);
            let mut t = ServerTokenizer::new(&s.url).unwrap();
            t.max_response_bytes = 1024;
            let e = t.count("a").unwrap_err().to_string();
            assert!(e.contains("exceeds 1024 bytes"), "{e}");
            assert!(e.contains(&format!("{}/tokenize", s.url)), "{e}");
        }
    }

    #[test]
    fn failures_name_the_url_and_what_the_server_said() {
        let s = serve(with_length("500 Internal Server Error", "boom"), false);
        let e = ServerTokenizer::new(&s.url)
            .unwrap()
            .count("a")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains(&format!("{}/tokenize", s.url)) && e.contains("HTTP 500: boom"),
            "{e}"
        );
        let s = serve(with_length("200 OK", r#"{"ids":[1]}"#), false);
        let e = ServerTokenizer::new(&s.url)
            .unwrap()
            .count("a")
            .unwrap_err();
        assert!(e.to_string().contains("no `tokens` list"), "{e}");
        // A port nobody listens on.
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let url = format!("http://127.0.0.1:{port}");
        let e = ServerTokenizer::new(&url).unwrap().count("a").unwrap_err();
        assert!(e.to_string().contains(&format!("{url}/tokenize")), "{e}");
    }

    #[test]
    fn a_server_that_closes_after_each_answer_gets_a_fresh_connection() {
        let s = serve(with_length("200 OK", r#"{"tokens":[9]}"#), true);
        let t = ServerTokenizer::new(&s.url).unwrap();
        for _ in 0..3 {
            assert_eq!(t.count("a").unwrap(), 1);
        }
    }

    #[tokio::test(flavor = "current_thread")]
    async fn counting_and_dropping_inside_an_async_task_works() {
        // Prompt sources may count on a runtime thread; neither the blocking
        // wait nor the drop may panic there.
        let s = serve(with_length("200 OK", r#"{"tokens":[1,2]}"#), false);
        let t = ServerTokenizer::new(&s.url).unwrap();
        assert_eq!(t.count("a").unwrap(), 2);
        drop(t);
    }
}
