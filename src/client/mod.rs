//! The streaming HTTP client: sends one OpenAI-compatible request and turns
//! what comes back into a [`record::RequestRecord`].
//!
//! Timestamps are taken when a body frame reaches this task, before any
//! parsing, so the parser's cost never inflates TTFT or ITL. Connections are
//! kept alive in a [`pool::Pool`] in which no request ever waits for another
//! request's connection.

pub mod openai;
pub mod pool;
pub mod record;
pub mod sse;
pub mod tls;
pub mod tool_calls;

use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::header::{HeaderValue, AUTHORIZATION, CONTENT_TYPE};
use hyper::{Method, Request, StatusCode, Uri};

use crate::failure::{Failure, FailureClass};
use openai::{Api, ChunkInfo};
use pool::Pool;
use record::{Outcome, RequestRecord};

/// A header value that holds a credential: marked sensitive so it is never
/// printed by a `Debug` of the request.
fn secret_header(value: &str) -> anyhow::Result<HeaderValue> {
    let mut v = HeaderValue::from_str(value).map_err(|_| {
        anyhow::anyhow!("the API key contains characters not allowed in an HTTP header")
    })?;
    v.set_sensitive(true);
    Ok(v)
}

/// How many bytes of an error body are kept as evidence.
const ERROR_BODY_LIMIT: usize = 64 * 1024;

/// Send a request built by `make`, and send it once more, on a new
/// connection, when a kept-alive connection turns out to have been closed by
/// the server just as it was reused (llama.cpp closes after a fixed number of
/// requests): nothing was answered, so a fresh connection is safe. Returns
/// the outcome and the retries made, whether or not the retry succeeded.
///
/// A failed connect is not retried: the server is not there, and saying so
/// at once is the evidence.
pub async fn request_retrying(
    pool: &Pool,
    make: impl Fn() -> Request<Full<Bytes>>,
) -> (Result<hyper::Response<pool::Body>, pool::Error>, u32) {
    match pool.send(make()).await {
        Ok(r) => (Ok(r), 0),
        Err(pool::Error::Request { .. }) => (pool.send_fresh(make()).await, 1),
        Err(e) => (Err(e), 0),
    }
}

/// An OpenAI-compatible endpoint plus its pool of kept-alive connections.
#[derive(Clone)]
pub struct Endpoint {
    pool: Pool,
    base: String,
    api: Api,
    uri: Uri,
    /// `Authorization` header sent with every request (bearer key or basic userinfo).
    auth: Option<HeaderValue>,
}

impl Endpoint {
    /// Build a client for `base_url` (e.g. `http://127.0.0.1:8000`) and an API flavour.
    ///
    /// A `user:pass@` in the URL becomes a basic `Authorization` header and is
    /// dropped from the URL, so it is never stored or shown.
    pub fn new(base_url: &str, api: Api) -> anyhow::Result<Self> {
        let (base_url, userinfo) = crate::util::secret::split_userinfo(base_url);
        let base_url = base_url.as_str();
        let auth = match userinfo {
            Some(u) => {
                crate::util::secret::register(&u);
                use base64::Engine as _;
                let encoded = base64::engine::general_purpose::STANDARD.encode(u.as_bytes());
                crate::util::secret::register(&encoded);
                Some(secret_header(&format!("Basic {encoded}"))?)
            }
            None => None,
        };
        let base = base_url.trim_end_matches('/').to_string();
        let base = base.strip_suffix("/v1").unwrap_or(&base).to_string();
        if !(base.starts_with("http://") || base.starts_with("https://")) {
            anyhow::bail!("URL `{base_url}` must start with http:// or https://");
        }
        let uri: Uri = format!("{base}{}", api.path())
            .parse()
            .map_err(|e| anyhow::anyhow!("invalid URL `{base_url}`: {e}"))?;
        Ok(Self {
            pool: Pool::new(None),
            base,
            api,
            uri,
            auth,
        })
    }

    /// Send `key` as a bearer token with every request (`None`: keep what the URL gave).
    pub fn with_api_key(mut self, key: Option<&str>) -> anyhow::Result<Self> {
        if let Some(key) = key {
            crate::util::secret::register(key);
            self.auth = Some(secret_header(&format!("Bearer {key}"))?);
        }
        Ok(self)
    }

    /// The `Authorization` header value, for the few requests made outside this client.
    pub fn authorization(&self) -> Option<&HeaderValue> {
        self.auth.as_ref()
    }

    /// The base URL without a trailing `/v1`.
    pub fn base_url(&self) -> &str {
        &self.base
    }

    /// The API flavour requests are sent to.
    pub fn api(&self) -> Api {
        self.api
    }

    /// GET a path on the endpoint and return status and body (for discovery and health).
    pub async fn get(&self, path: &str, timeout: Duration) -> Result<(u16, Bytes), Failure> {
        self.exchange(hyper::Method::GET, path, timeout).await
    }

    /// POST an empty body to a path (an engine's control endpoint) and
    /// return status and body.
    pub async fn post_empty(&self, path: &str, timeout: Duration) -> Result<(u16, Bytes), Failure> {
        self.exchange(hyper::Method::POST, path, timeout).await
    }

    async fn exchange(
        &self,
        method: hyper::Method,
        path: &str,
        timeout: Duration,
    ) -> Result<(u16, Bytes), Failure> {
        let uri: Uri = format!("{}{}", self.base, path)
            .parse()
            .map_err(|e| Failure::new(FailureClass::Connection, format!("bad URL: {e}")))?;
        let fut = async {
            let make = || {
                let mut req = Request::new(Full::new(Bytes::new()));
                *req.method_mut() = method.clone();
                *req.uri_mut() = uri.clone();
                req
            };
            let (resp, _) = self.send(make).await;
            let resp = resp.map_err(connect_failure)?;
            let status = resp.status().as_u16();
            let body = resp
                .into_body()
                .collect()
                .await
                .map_err(|e| Failure::new(FailureClass::Protocol, e.to_string()))?
                .to_bytes();
            Ok((status, body))
        };
        match tokio::time::timeout(timeout, fut).await {
            Ok(r) => r,
            Err(_) => Err(Failure::new(
                FailureClass::Timeout,
                format!("no answer from {path} within {timeout:?}"),
            )),
        }
    }

    /// [`request_retrying`] with this endpoint's `Authorization` header.
    async fn send(
        &self,
        make: impl Fn() -> Request<Full<Bytes>>,
    ) -> (Result<hyper::Response<pool::Body>, pool::Error>, u32) {
        let make = || {
            let mut req = make();
            if let Some(a) = &self.auth {
                req.headers_mut().insert(AUTHORIZATION, a.clone());
            }
            req
        };
        request_retrying(&self.pool, make).await
    }

    /// Send one streaming request and record everything observed about it.
    ///
    /// `epoch` is the level's time origin; `scheduled` is when the schedule
    /// wanted this request sent. The whole exchange is bounded by `timeout`.
    pub async fn stream(
        &self,
        body: Bytes,
        epoch: Instant,
        scheduled: Instant,
        timeout: Duration,
        capture_text: bool,
    ) -> RequestRecord {
        let sent = Instant::now();
        let mut rec = RequestRecord::new(ms_between(epoch, scheduled), ms_between(epoch, sent));
        // A limit too long for the clock to hold is no limit.
        let deadline = sent
            .checked_add(timeout)
            .map(tokio::time::Instant::from_std);
        let inner = self.stream_inner(body, sent, capture_text, &mut rec);
        let limited = match deadline {
            Some(d) => tokio::time::timeout_at(d, inner).await,
            None => Ok(inner.await),
        };
        let outcome = match limited {
            Ok(o) => o,
            Err(_) => Outcome::Failed(Failure::new(
                FailureClass::Timeout,
                format!(
                    "request exceeded its {:.1} s limit after {} content chunks",
                    timeout.as_secs_f64(),
                    rec.chunks.len()
                ),
            )),
        };
        rec.finish(outcome, ms_between(sent, Instant::now()));
        rec
    }

    async fn stream_inner(
        &self,
        body: Bytes,
        sent: Instant,
        capture_text: bool,
        rec: &mut RequestRecord,
    ) -> Outcome {
        let (resp, retries) = self
            .send(|| json_request(self.uri.clone(), body.clone()))
            .await;
        rec.retries += retries;
        let resp = match resp {
            Ok(r) => r,
            Err(e) => return Outcome::Failed(connect_failure(e)),
        };
        let status = resp.status();
        let mut body = resp.into_body();
        if status != StatusCode::OK {
            let mut buf = Vec::new();
            while let Some(frame) = body.frame().await {
                match frame {
                    Ok(f) => {
                        if let Some(d) = f.data_ref() {
                            let room = ERROR_BODY_LIMIT.saturating_sub(buf.len());
                            buf.extend_from_slice(&d[..d.len().min(room)]);
                        }
                    }
                    Err(_) => break,
                }
            }
            return Outcome::Failed(Failure::from_http(
                status.as_u16(),
                &String::from_utf8_lossy(&buf),
            ));
        }
        let mut parser = sse::SseParser::new();
        let mut state = openai::StreamState::new(capture_text);
        loop {
            match body.frame().await {
                None => break,
                Some(Err(e)) => {
                    let class = if is_connection_loss(&e) {
                        FailureClass::Connection
                    } else {
                        FailureClass::Protocol
                    };
                    return Outcome::Failed(Failure::new(
                        class,
                        format!(
                            "stream broken after {} content chunks: {}",
                            rec.chunks.len(),
                            error_chain(&e)
                        ),
                    ));
                }
                Some(Ok(frame)) => {
                    let Some(data) = frame.data_ref() else {
                        continue;
                    };
                    let at = ms_between(sent, Instant::now());
                    let mut bad: Option<Failure> = None;
                    let fed = parser.feed(data, |event| {
                        if bad.is_some() || state.done {
                            return;
                        }
                        match state.on_event(event) {
                            Ok(ChunkInfo::Content { tokens, answer }) => {
                                rec.push_chunk(at, tokens);
                                if answer {
                                    rec.note_answer(at);
                                }
                            }
                            Ok(ChunkInfo::Nothing) => {}
                            Err(f) => bad = Some(f),
                        }
                    });
                    if let Err(big) = fed {
                        return Outcome::Failed(Failure::new(
                            FailureClass::Protocol,
                            format!(
                                "an SSE line or event grew to {} bytes without ending, over the {} byte limit, after {} content chunks",
                                big.bytes,
                                sse::MAX_EVENT_BYTES,
                                rec.chunks.len()
                            ),
                        ));
                    }
                    if let Some(f) = bad {
                        return Outcome::Failed(f);
                    }
                }
            }
        }
        state.finish(rec)
    }
}

fn json_request(uri: Uri, body: Bytes) -> Request<Full<Bytes>> {
    let mut req = Request::new(Full::new(body));
    *req.method_mut() = Method::POST;
    *req.uri_mut() = uri;
    req.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    req
}

fn connect_failure(e: pool::Error) -> Failure {
    let class = if e.is_connect() || is_connection_loss(&e) {
        FailureClass::Connection
    } else {
        FailureClass::Protocol
    };
    Failure::new(class, error_chain(&e))
}

/// Whether an error means the connection was reset or aborted, rather than
/// closed cleanly in the middle of an answer (a truncated stream, which the
/// failure classes call `protocol`).
fn is_connection_loss(e: &(dyn std::error::Error + 'static)) -> bool {
    use std::io::ErrorKind as K;
    let mut cur = Some(e);
    while let Some(c) = cur {
        if let Some(io) = c.downcast_ref::<std::io::Error>() {
            if matches!(
                io.kind(),
                K::ConnectionReset | K::ConnectionAborted | K::BrokenPipe | K::NotConnected
            ) {
                return true;
            }
        }
        cur = c.source();
    }
    false
}

/// Render an error with all its causes, as `outer: inner: root`.
pub fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        let msg = c.to_string();
        if !s.contains(&msg) {
            s.push_str(": ");
            s.push_str(&msg);
        }
        cur = c.source();
    }
    s
}

/// Milliseconds from `a` to `b` (zero if `b` is earlier).
pub fn ms_between(a: Instant, b: Instant) -> f64 {
    // Microsecond resolution: finer digits are noise and bloat result files.
    (b.saturating_duration_since(a).as_nanos() as f64 / 1000.0).round() / 1000.0
}
