//! The connection pool every request to a server goes through.
//!
//! It exists so that a request never waits on another request's connection.
//! hyper_util's legacy pooled client lets a request wait for a connection
//! that another request is about to give back, and once in a while that
//! waiter was never woken: a request hung for its whole timeout with no
//! socket open and the server none the wiser. Here a request takes an idle
//! connection that is still open or opens one of its own; there is no queue
//! of waiters, so nothing can be left unwoken.
//!
//! A connection is given back only once its response body was read to the
//! end. One whose answer was abandoned is closed: the rest of that answer
//! would otherwise be read as the start of the next.

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::{Frame, Incoming, SizeHint};
use hyper::client::conn::http1::{self, SendRequest};
use hyper::header::{HeaderValue, HOST};
use hyper::http::uri::{Authority, PathAndQuery};
use hyper::{Request, Response, Uri};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;
use tokio::time::Instant;

/// Idle connections older than this are closed; servers drop them sooner
/// anyway, and a stale one only costs a failed reuse.
const IDLE_TIMEOUT: Duration = Duration::from_secs(90);
/// Keepalive probes notice a peer that vanished without closing.
const TCP_KEEPALIVE: Duration = Duration::from_secs(60);
/// Large enough that long prompts and fast streams are not throttled by the
/// client's buffer.
const MAX_BUF_SIZE: usize = 4 * 1024 * 1024;

type Sender = SendRequest<Full<Bytes>>;

/// Why a request got no response head.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// No connection could be opened, so nothing was sent.
    #[error("cannot connect to {authority}")]
    Connect {
        /// `host:port` that was dialled.
        authority: String,
        /// What the socket said.
        #[source]
        source: std::io::Error,
    },
    /// The connection failed or closed before a response head arrived.
    #[error("request failed on a {} connection", if *.reused { "kept-alive" } else { "new" })]
    Request {
        /// Whether the connection had carried an earlier request.
        reused: bool,
        /// What hyper saw.
        #[source]
        source: hyper::Error,
    },
    /// The URI names no host to connect to.
    #[error(
        "cannot send a request to `{0}`: only http:// and https:// URLs with a host are supported"
    )]
    Uri(String),
}

impl Error {
    /// Whether connecting failed, so the server never saw the request.
    pub fn is_connect(&self) -> bool {
        matches!(self, Error::Connect { .. })
    }
}

/// Kept-alive HTTP/1 connections, shared by all clones.
#[derive(Clone)]
pub struct Pool {
    inner: Arc<Inner>,
}

struct Inner {
    /// `None` leaves connecting to the caller's overall deadline.
    connect_timeout: Option<Duration>,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    hosts: HashMap<String, Host>,
    /// Whether a task is already closing expired idle connections.
    reaper: bool,
}

/// The connections to one `host:port`.
#[derive(Default)]
struct Host {
    /// Oldest first; requests take the newest, the likeliest to be open.
    idle: Vec<Idle>,
    in_use: usize,
    /// Most connections ever in use at once: the idle list never needs more.
    peak_in_use: usize,
}

struct Idle {
    send: Sender,
    since: Instant,
}

impl std::fmt::Debug for Pool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pool")
            .field("connect_timeout", &self.inner.connect_timeout)
            .finish_non_exhaustive()
    }
}

/// Where a request goes, read from its absolute URI.
struct Target {
    /// The pool key: `host:port`, `https://host:port` over TLS.
    key: String,
    /// Whether the connection is TLS (`https://`).
    tls: bool,
    /// The host without IPv6 brackets, for the resolver.
    host: String,
    port: u16,
    host_header: HeaderValue,
}

impl Target {
    fn of(uri: &Uri) -> Result<Self, Error> {
        let bad = || Error::Uri(uri.to_string());
        let (tls, default_port) = match uri.scheme_str() {
            Some("http") => (false, 80),
            Some("https") => (true, 443),
            _ => return Err(bad()),
        };
        let authority: &Authority = uri.authority().ok_or_else(bad)?;
        let host = authority.host();
        if host.is_empty() {
            return Err(bad());
        }
        let port = authority.port_u16().unwrap_or(default_port);
        // Never the userinfo: it must not travel in a header.
        let host_header = match authority.port_u16() {
            Some(p) if p != default_port => HeaderValue::from_str(&format!("{host}:{p}")),
            _ => HeaderValue::from_str(host),
        }
        .map_err(|_| bad())?;
        Ok(Self {
            key: if tls {
                format!("https://{host}:{port}")
            } else {
                format!("{host}:{port}")
            },
            tls,
            host: host
                .trim_start_matches('[')
                .trim_end_matches(']')
                .to_string(),
            port,
            host_header,
        })
    }
}

impl Pool {
    /// An empty pool; `connect_timeout` bounds each TCP connect.
    pub fn new(connect_timeout: Option<Duration>) -> Self {
        Self {
            inner: Arc::new(Inner {
                connect_timeout,
                state: Mutex::new(State::default()),
            }),
        }
    }

    /// Send `req` (absolute `http://` or `https://` URI) on an idle connection or a new one.
    pub async fn send(&self, req: Request<Full<Bytes>>) -> Result<Response<Body>, Error> {
        self.send_on(req, true).await
    }

    /// Send `req` on a connection opened for it, never a kept-alive one.
    pub async fn send_fresh(&self, req: Request<Full<Bytes>>) -> Result<Response<Body>, Error> {
        self.send_on(req, false).await
    }

    async fn send_on(
        &self,
        mut req: Request<Full<Bytes>>,
        reuse: bool,
    ) -> Result<Response<Body>, Error> {
        let target = Target::of(req.uri())?;
        // The connection already names the server: the request line carries
        // only the path, as servers expect from a client that is no proxy.
        let path = req
            .uri()
            .path_and_query()
            .cloned()
            .unwrap_or_else(|| PathAndQuery::from_static("/"));
        *req.uri_mut() = Uri::from(path);
        req.headers_mut()
            .entry(HOST)
            .or_insert(target.host_header.clone());
        if reuse {
            while let Some(mut conn) = self.take_idle(&target.key, Instant::now()) {
                // Errors, rather than waits, when the connection closed while idle.
                if conn.sender().ready().await.is_err() {
                    continue;
                }
                match conn.sender().try_send_request(req).await {
                    Ok(resp) => return Ok(conn.into_response(resp)),
                    Err(mut e) => match e.take_message() {
                        // Closed before a byte was written: the server saw
                        // nothing, so another connection may carry it.
                        Some(unsent) => req = unsent,
                        None => {
                            return Err(Error::Request {
                                reused: true,
                                source: e.into_error(),
                            })
                        }
                    },
                }
            }
        }
        let mut conn = self.connect(&target).await?;
        match conn.sender().send_request(req).await {
            Ok(resp) => Ok(conn.into_response(resp)),
            Err(source) => Err(Error::Request {
                reused: false,
                source,
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.inner.lock()
    }

    /// The newest idle connection to `key` that is not closed or expired at `now`.
    fn take_idle(&self, key: &str, now: Instant) -> Option<Checkout> {
        let mut dead = Vec::new();
        let taken = {
            let mut state = self.lock();
            let host = state.hosts.get_mut(key)?;
            let mut taken = None;
            while let Some(c) = host.idle.pop() {
                if c.send.is_closed() || now.saturating_duration_since(c.since) >= IDLE_TIMEOUT {
                    dead.push(c);
                    continue;
                }
                host.in_use += 1;
                host.peak_in_use = host.peak_in_use.max(host.in_use);
                taken = Some(c.send);
                break;
            }
            taken
        };
        // Closing connections wakes their tasks; not while holding the lock.
        drop(dead);
        taken.map(|send| Checkout {
            send: Some(send),
            key: key.to_string(),
            pool: self.inner.clone(),
            finished: false,
        })
    }

    async fn connect(&self, target: &Target) -> Result<Checkout, Error> {
        let failed = |source| Error::Connect {
            authority: target.key.clone(),
            source,
        };
        let tls = target.tls.then_some(target.host.as_str());
        let open = async {
            let stream = TcpStream::connect((target.host.as_str(), target.port)).await?;
            stream.set_nodelay(true)?;
            socket2::SockRef::from(&stream)
                .set_tcp_keepalive(&socket2::TcpKeepalive::new().with_time(TCP_KEEPALIVE))?;
            // The TLS handshake is part of connecting: the limit covers both.
            Ok(match tls {
                Some(host) => Stream::Tls(Box::new(super::tls::connect(stream, host).await?)),
                None => Stream::Plain(stream),
            })
        };
        let stream = match self.inner.connect_timeout {
            Some(limit) => match tokio::time::timeout(limit, open).await {
                Ok(r) => r,
                Err(_) => Err(std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    format!("no connection within {limit:?}"),
                )),
            },
            None => open.await,
        }
        .map_err(failed)?;
        let send = match stream {
            Stream::Plain(s) => handshake(TokioIo::new(s)).await,
            Stream::Tls(s) => handshake(TokioIo::new(s)).await,
        }
        .map_err(|e| failed(std::io::Error::other(e)))?;
        {
            let mut state = self.lock();
            let host = state.hosts.entry(target.key.clone()).or_default();
            host.in_use += 1;
            host.peak_in_use = host.peak_in_use.max(host.in_use);
        }
        Ok(Checkout {
            send: Some(send),
            key: target.key.clone(),
            pool: self.inner.clone(),
            finished: false,
        })
    }

    #[cfg(test)]
    fn idle_count(&self) -> usize {
        self.lock().hosts.values().map(|h| h.idle.len()).sum()
    }
}

/// A connection's socket: plain TCP or TLS over it.
enum Stream {
    Plain(TcpStream),
    Tls(Box<tokio_rustls::client::TlsStream<TcpStream>>),
}

/// Start HTTP/1 on `io`; the connection's own task reads and writes the
/// socket, and ends when the connection closes or its last sender is dropped.
async fn handshake<T>(io: T) -> Result<Sender, hyper::Error>
where
    T: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    let (send, conn) = http1::Builder::new()
        .max_buf_size(MAX_BUF_SIZE)
        .handshake(io)
        .await?;
    tokio::spawn(async move {
        let _ = conn.await;
    });
    Ok(send)
}

impl Inner {
    fn lock(&self) -> MutexGuard<'_, State> {
        // The state stays consistent between statements, so a panic elsewhere
        // while holding the lock leaves nothing half-done.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Take back a connection whose use ended; `send` is `None` or not
    /// reusable when it must be closed. Returns what is to be closed.
    fn check_in(self: &Arc<Self>, key: &str, send: Option<Sender>) -> Option<Sender> {
        let mut state = self.lock();
        let Some(host) = state.hosts.get_mut(key) else {
            return send;
        };
        host.in_use = host.in_use.saturating_sub(1);
        let send = match send {
            Some(s) if !s.is_closed() && host.idle.len() < host.peak_in_use => s,
            other => {
                if host.idle.is_empty() && host.in_use == 0 {
                    state.hosts.remove(key);
                }
                return other;
            }
        };
        host.idle.push(Idle {
            send,
            since: Instant::now(),
        });
        if !state.reaper {
            // Without a runtime (a body dropped at shutdown) nothing is
            // reaped, but the pool is going away then too.
            if let Ok(rt) = tokio::runtime::Handle::try_current() {
                state.reaper = true;
                rt.spawn(reap(Arc::downgrade(self)));
            }
        }
        None
    }
}

impl State {
    /// Drop idle connections that closed or expired by `now`; returns them,
    /// to be closed outside the lock.
    fn prune(&mut self, now: Instant) -> Vec<Idle> {
        let mut dead = Vec::new();
        self.hosts.retain(|_, host| {
            let (keep, gone): (Vec<Idle>, Vec<Idle>) =
                std::mem::take(&mut host.idle).into_iter().partition(|c| {
                    !c.send.is_closed() && now.saturating_duration_since(c.since) < IDLE_TIMEOUT
                });
            host.idle = keep;
            dead.extend(gone);
            !host.idle.is_empty() || host.in_use > 0
        });
        dead
    }

    fn oldest_idle(&self) -> Option<Instant> {
        self.hosts
            .values()
            .filter_map(|h| h.idle.first().map(|c| c.since))
            .min()
    }
}

/// Closes idle connections as they expire, until none are idle or the pool is gone.
async fn reap(pool: Weak<Inner>) {
    loop {
        let wake = {
            let Some(inner) = pool.upgrade() else { return };
            let mut state = inner.lock();
            let dead = state.prune(Instant::now());
            let wake = state.oldest_idle().map(|since| since + IDLE_TIMEOUT);
            if wake.is_none() {
                state.reaper = false;
            }
            drop(state);
            drop(dead);
            match wake {
                Some(w) => w,
                None => return,
            }
        };
        tokio::time::sleep_until(wake).await;
    }
}

/// One connection taken from the pool; given back or closed when dropped.
struct Checkout {
    send: Option<Sender>,
    key: String,
    pool: Arc<Inner>,
    /// Set once the response was read to the end, the only state in which
    /// the next request can be sent on this connection.
    finished: bool,
}

impl Checkout {
    fn sender(&mut self) -> &mut Sender {
        self.send
            .as_mut()
            .expect("a checkout holds its sender until dropped")
    }

    fn into_response(self, resp: Response<Incoming>) -> Response<Body> {
        resp.map(|inner| {
            let mut body = Body {
                inner,
                conn: Some(self),
            };
            // An empty answer is finished before anyone reads it.
            if hyper::body::Body::is_end_stream(&body.inner) {
                body.release();
            }
            body
        })
    }
}

impl Drop for Checkout {
    fn drop(&mut self) {
        let send = self.send.take().filter(|_| self.finished);
        drop(self.pool.check_in(&self.key, send));
    }
}

/// A response body that gives its connection back once read to the end.
pub struct Body {
    inner: Incoming,
    conn: Option<Checkout>,
}

impl Body {
    fn release(&mut self) {
        if let Some(mut c) = self.conn.take() {
            c.finished = true;
        }
    }
}

impl std::fmt::Debug for Body {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Body")
            .field("inner", &self.inner)
            .field("pooled", &self.conn.is_some())
            .finish()
    }
}

impl hyper::body::Body for Body {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        let this = &mut *self;
        let polled = Pin::new(&mut this.inner).poll_frame(cx);
        match &polled {
            Poll::Ready(None) => this.release(),
            Poll::Ready(Some(Ok(_))) if this.inner.is_end_stream() => this.release(),
            // A broken answer leaves the connection unusable: close it.
            Poll::Ready(Some(Err(_))) => this.conn = None,
            _ => {}
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::{error_chain, request_retrying};
    use crate::failure::FailureClass;
    use http_body_util::BodyExt;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::sync::Barrier;

    /// What the test server does with one request.
    #[derive(Clone)]
    enum Act {
        /// Answer `ok` in full and keep the connection open.
        Answer { chunked: bool },
        /// Answer in full with `Connection: close`, then close.
        AnswerAndClose,
        /// Answer in full and close without having said so.
        AnswerThenHangUp,
        /// Read the request and close without answering.
        HangUp,
        /// Send the head and one chunk, then hold the connection until the client closes it.
        Partial,
        /// Answer in full once this many requests reached the barrier.
        AfterBarrier(Arc<Barrier>),
    }

    /// A raw HTTP/1.1 server on 127.0.0.1 that counts what it accepted.
    struct Server {
        url: String,
        /// Connections accepted.
        accepted: Arc<AtomicUsize>,
        /// Request heads received, lowercased.
        heads: Arc<Mutex<Vec<String>>>,
    }

    /// Serve with `policy(connection number, request number on it)`, both from 0.
    async fn serve(policy: impl Fn(usize, usize) -> Act + Send + Sync + 'static) -> Server {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let accepted = Arc::new(AtomicUsize::new(0));
        let heads = Arc::new(Mutex::new(Vec::new()));
        let policy = Arc::new(policy);
        let (count, seen) = (accepted.clone(), heads.clone());
        tokio::spawn(async move {
            loop {
                let Ok((sock, _)) = listener.accept().await else {
                    return;
                };
                let n = count.fetch_add(1, Ordering::SeqCst);
                tokio::spawn(serve_conn(sock, n, policy.clone(), seen.clone()));
            }
        });
        Server {
            url,
            accepted,
            heads,
        }
    }

    async fn serve_conn(
        mut sock: TcpStream,
        conn: usize,
        policy: Arc<impl Fn(usize, usize) -> Act>,
        heads: Arc<Mutex<Vec<String>>>,
    ) {
        let mut buf = Vec::new();
        for req in 0.. {
            let head_end = loop {
                if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                    break i + 4;
                }
                let mut tmp = [0u8; 4096];
                match sock.read(&mut tmp).await {
                    Ok(0) | Err(_) => return,
                    Ok(n) => buf.extend_from_slice(&tmp[..n]),
                }
            };
            let head = String::from_utf8_lossy(&buf[..head_end]).to_ascii_lowercase();
            let len: usize = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .map_or(0, |v| v.trim().parse().unwrap());
            while buf.len() < head_end + len {
                let mut tmp = [0u8; 4096];
                match sock.read(&mut tmp).await {
                    Ok(0) | Err(_) => return,
                    Ok(n) => buf.extend_from_slice(&tmp[..n]),
                }
            }
            buf.drain(..head_end + len);
            heads.lock().unwrap().push(head);
            const FULL: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
            let act = policy(conn, req);
            let answer: &[u8] = match &act {
                Act::Answer { chunked: false } | Act::AnswerThenHangUp => FULL,
                Act::Answer { chunked: true } => {
                    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\no\r\n1\r\nk\r\n0\r\n\r\n"
                }
                Act::AnswerAndClose => {
                    b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok"
                }
                Act::HangUp => return,
                Act::Partial => b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\no\r\n",
                Act::AfterBarrier(b) => {
                    b.wait().await;
                    FULL
                }
            };
            if sock.write_all(answer).await.is_err() {
                return;
            }
            match act {
                Act::AnswerAndClose | Act::AnswerThenHangUp => return,
                Act::Partial => {
                    let mut tmp = [0u8; 4096];
                    while matches!(sock.read(&mut tmp).await, Ok(n) if n > 0) {}
                    return;
                }
                _ => {}
            }
        }
    }

    fn get(url: &str, path: &str) -> Request<Full<Bytes>> {
        let mut req = Request::new(Full::new(Bytes::new()));
        *req.uri_mut() = format!("{url}{path}").parse().unwrap();
        req
    }

    async fn body_text(resp: Response<Body>) -> String {
        let bytes = resp.into_body().collect().await.unwrap().to_bytes();
        String::from_utf8(bytes.to_vec()).unwrap()
    }

    /// Fails the test, rather than hanging it, when `fut` never ends.
    async fn bounded<T>(what: &str, fut: impl std::future::Future<Output = T>) -> T {
        tokio::time::timeout(Duration::from_secs(60), fut)
            .await
            .unwrap_or_else(|_| panic!("{what} never finished"))
    }

    #[tokio::test]
    async fn sequential_requests_share_one_connection() {
        let s = serve(|_, req| Act::Answer {
            chunked: req % 2 == 1,
        })
        .await;
        let pool = Pool::new(None);
        for i in 0..6 {
            let resp = pool.send(get(&s.url, "/v1/models?x=1")).await.unwrap();
            if i % 2 == 0 {
                assert_eq!(body_text(resp).await, "ok");
            } else {
                // Read frame by frame to the end, as the streaming client does.
                let mut body = resp.into_body();
                while let Some(f) = body.frame().await {
                    f.unwrap();
                }
            }
        }
        assert_eq!(s.accepted.load(Ordering::SeqCst), 1);
        assert_eq!(pool.idle_count(), 1);
        let port = s.url.rsplit(':').next().unwrap();
        for head in s.heads.lock().unwrap().iter() {
            assert!(
                head.starts_with("get /v1/models?x=1 http/1.1\r\n"),
                "{head}"
            );
            assert!(
                head.contains(&format!("host: 127.0.0.1:{port}\r\n")),
                "{head}"
            );
        }
    }

    #[tokio::test]
    async fn concurrent_requests_each_get_their_own_connection() {
        // The server answers only once all of them arrived: a pool that made
        // one wait for another's connection would never finish.
        const K: usize = 8;
        let barrier = Arc::new(Barrier::new(K));
        let s = serve(move |_, _| Act::AfterBarrier(barrier.clone())).await;
        let pool = Pool::new(None);
        for wave in 0..2 {
            let sends = (0..K).map(|_| {
                let (pool, url) = (pool.clone(), s.url.clone());
                tokio::spawn(
                    async move { body_text(pool.send(get(&url, "/")).await.unwrap()).await },
                )
            });
            let answers = bounded(
                "a wave of concurrent requests",
                futures_util::future::join_all(sends),
            )
            .await;
            assert!(
                answers.into_iter().all(|a| a.unwrap() == "ok"),
                "wave {wave}"
            );
            // The second wave reuses the first wave's connections.
            assert_eq!(s.accepted.load(Ordering::SeqCst), K, "wave {wave}");
            assert_eq!(pool.idle_count(), K, "wave {wave}");
        }
    }

    /// A pool whose first connection's answer has sent one chunk and waits
    /// for the client; every later connection answers `ok` in full.
    async fn one_answer_left_unfinished() -> (Server, Pool, Body) {
        let s = serve(|conn, _| {
            if conn == 0 {
                Act::Partial
            } else {
                Act::Answer { chunked: false }
            }
        })
        .await;
        let pool = Pool::new(None);
        let mut body = pool.send(get(&s.url, "/")).await.unwrap().into_body();
        assert!(body.frame().await.unwrap().unwrap().is_data());
        (s, pool, body)
    }

    #[tokio::test]
    async fn a_request_does_not_wait_for_a_connection_still_streaming() {
        let (s, pool, _streaming) = one_answer_left_unfinished().await;
        let second = bounded("a request beside an unfinished answer", async {
            body_text(pool.send(get(&s.url, "/")).await.unwrap()).await
        })
        .await;
        assert_eq!(second, "ok");
        assert_eq!(s.accepted.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn an_abandoned_answer_does_not_give_its_connection_back() {
        let (s, pool, body) = one_answer_left_unfinished().await;
        drop(body);
        assert_eq!(pool.idle_count(), 0);
        let next = pool.send(get(&s.url, "/")).await.unwrap();
        assert_eq!(body_text(next).await, "ok");
        assert_eq!(s.accepted.load(Ordering::SeqCst), 2);
        assert_eq!(pool.idle_count(), 1);
    }

    #[tokio::test]
    async fn a_connection_closed_as_it_is_reused_costs_one_retry() {
        // Like llama.cpp at its keep-alive limit: the next request on the
        // connection is read and the connection closed unanswered.
        let s = serve(|_, req| {
            if req == 0 {
                Act::Answer { chunked: false }
            } else {
                Act::HangUp
            }
        })
        .await;
        let pool = Pool::new(None);
        let make = || get(&s.url, "/");
        for i in 0..4 {
            let (resp, retries) = request_retrying(&pool, make).await;
            assert_eq!(body_text(resp.unwrap()).await, "ok", "request {i}");
            assert_eq!(retries, u32::from(i > 0), "request {i}");
        }
        assert_eq!(s.accepted.load(Ordering::SeqCst), 4);
        // Every request the server read is one sent or one retried.
        assert_eq!(s.heads.lock().unwrap().len(), 4 + 3);
    }

    #[tokio::test]
    async fn a_connection_the_server_said_it_closes_is_not_reused() {
        let s = serve(|_, _| Act::AnswerAndClose).await;
        let pool = Pool::new(None);
        for i in 0..3 {
            let (resp, retries) = request_retrying(&pool, || get(&s.url, "/")).await;
            assert_eq!(body_text(resp.unwrap()).await, "ok", "request {i}");
            assert_eq!(retries, 0, "request {i}");
        }
        assert_eq!(s.accepted.load(Ordering::SeqCst), 3);
        assert_eq!(s.heads.lock().unwrap().len(), 3);
    }

    #[tokio::test]
    async fn a_server_hanging_up_after_each_answer_is_survived() {
        // Whether the close is seen before the next request is written is a
        // race; either way the request succeeds, with at most one retry.
        let s = serve(|_, _| Act::AnswerThenHangUp).await;
        let pool = Pool::new(None);
        for i in 0..5 {
            let (resp, retries) = request_retrying(&pool, || get(&s.url, "/")).await;
            assert_eq!(body_text(resp.unwrap()).await, "ok", "request {i}");
            assert!(retries <= 1, "request {i}: {retries} retries");
        }
    }

    #[tokio::test]
    async fn a_refused_connection_is_a_connection_failure_naming_the_address() {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let url = format!("http://127.0.0.1:{port}");
        let pool = Pool::new(Some(Duration::from_secs(30)));
        let (resp, retries) = request_retrying(&pool, || get(&url, "/")).await;
        assert_eq!(retries, 0);
        let e = resp.unwrap_err();
        assert!(e.is_connect(), "{e:?}");
        let chain = error_chain(&e);
        assert!(
            chain.contains(&format!("127.0.0.1:{port}")) && chain.contains("refused"),
            "{chain}"
        );
        // Through the streaming client too: classified, and not retried.
        let ep =
            crate::client::Endpoint::new(&url, crate::client::openai::Api::Completions).unwrap();
        let now = std::time::Instant::now();
        let rec = ep
            .stream(
                Bytes::from_static(b"{}"),
                now,
                now,
                Duration::from_secs(60),
                false,
            )
            .await;
        let f = rec.failure.expect("failed");
        assert_eq!(f.class, FailureClass::Connection, "{}", f.detail);
        assert!(f.detail.contains("refused"), "{}", f.detail);
        assert_eq!(rec.retries, 0);
    }

    #[tokio::test]
    async fn idle_connections_expire() {
        let s = serve(|_, _| Act::Answer { chunked: false }).await;
        let pool = Pool::new(None);
        body_text(pool.send(get(&s.url, "/")).await.unwrap()).await;
        assert_eq!(pool.idle_count(), 1);
        let key = s.url.trim_start_matches("http://");
        let later = Instant::now() + IDLE_TIMEOUT;
        assert!(pool.take_idle(key, later).is_none());
        assert_eq!(pool.idle_count(), 0);
        // And the reaper's pass drops them without a request.
        body_text(pool.send(get(&s.url, "/")).await.unwrap()).await;
        assert_eq!(pool.idle_count(), 1);
        let dead = pool.lock().prune(Instant::now() + IDLE_TIMEOUT);
        assert_eq!((dead.len(), pool.idle_count()), (1, 0));
    }

    #[test]
    fn uris_without_an_http_host_are_refused() {
        for bad in ["ftp://h/", "/v1/models", "http:///x", "https:///x"] {
            let uri: Result<Uri, _> = bad.parse();
            if let Ok(uri) = uri {
                assert!(matches!(Target::of(&uri), Err(Error::Uri(_))), "{bad}");
            }
        }
        let t = Target::of(&"http://[::1]:8080/x".parse().unwrap()).unwrap();
        assert_eq!(
            (t.host.as_str(), t.port, t.key.as_str()),
            ("::1", 8080, "[::1]:8080")
        );
        assert_eq!(t.host_header, "[::1]:8080");
        let t = Target::of(&"http://u:p@h/x".parse().unwrap()).unwrap();
        assert_eq!((t.port, t.host_header.to_str().unwrap()), (80, "h"));
        let t = Target::of(&"https://h/x".parse().unwrap()).unwrap();
        assert_eq!(
            (t.port, t.tls, t.key.as_str()),
            (443, true, "https://h:443")
        );
        assert_eq!(t.host_header, "h");
    }
}
