//! A minimal reference client for fidelity checks: blocking sockets, one OS
//! thread per stream, no async runtime and no HTTP library.
//!
//! It sends the same streaming `/v1/completions` request `servebench bench`
//! sends to a server on 127.0.0.1, in a closed loop bounded by a request
//! count, and timestamps every `read` as it returns. Chunks that complete in
//! the same read share that read's timestamp, as they would for any client.
//! TTFT is send → first content-bearing `data:` chunk; ITL is the gap between
//! consecutive content chunks of one request, pooled over requests.
//!
//! ```text
//! cargo run --release --example raw_stream_reader -- --port 8000 \
//!     --threads 256 --requests 2048 --warmup 256 --output-len 64
//! ```
//!
//! Prints one JSON object on stdout.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

/// Bytes asked of each `read`: large, so a backlog of chunks drains in one call.
const READ_SIZE: usize = 256 * 1024;

/// Prompt words, as varied as servebench's synthetic prompts.
const VOCAB: [&str; 8] = [
    "river", "stone", "copper", "lantern", "orbit", "meadow", "signal", "harbor",
];

/// Command-line settings.
#[derive(Debug, Clone)]
struct Opts {
    port: u16,
    threads: usize,
    requests: u64,
    warmup: u64,
    input_len: u64,
    output_len: u64,
    model: String,
    timeout: Duration,
}

fn parse_opts() -> Result<Opts, String> {
    let mut o = Opts {
        port: 0,
        threads: 64,
        requests: 1024,
        warmup: 0,
        input_len: 128,
        output_len: 64,
        model: "sim-model".into(),
        timeout: Duration::from_secs(600),
    };
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let value = args.next().ok_or_else(|| format!("{flag} needs a value"))?;
        let num = |v: &str| {
            v.parse::<u64>()
                .map_err(|_| format!("{flag}: bad number `{v}`"))
        };
        match flag.as_str() {
            "--port" => o.port = num(&value)? as u16,
            "--threads" => o.threads = num(&value)? as usize,
            "--requests" => o.requests = num(&value)?,
            "--warmup" => o.warmup = num(&value)?,
            "--input-len" => o.input_len = num(&value)?.max(1),
            "--output-len" => o.output_len = num(&value)?.max(1),
            "--model" => o.model = value,
            "--timeout-s" => o.timeout = Duration::from_secs(num(&value)?.max(1)),
            _ => return Err(format!("unknown flag {flag}")),
        }
    }
    if o.port == 0 || o.threads == 0 || o.requests == 0 {
        return Err(
            "usage: raw_stream_reader --port P [--threads N] [--requests R] [--warmup W] \
             [--input-len I] [--output-len O] [--model M] [--timeout-s S]"
                .into(),
        );
    }
    Ok(o)
}

/// The request bytes for request `index`: the same body fields servebench sends.
fn request_bytes(o: &Opts, index: u64) -> Vec<u8> {
    let mut prompt = format!("r{index}");
    for i in 1..o.input_len {
        prompt.push(' ');
        prompt.push_str(VOCAB[((index.wrapping_mul(31) + i * 7) % VOCAB.len() as u64) as usize]);
    }
    let body = serde_json::json!({
        "model": o.model,
        "prompt": prompt,
        "max_tokens": o.output_len,
        "min_tokens": o.output_len,
        "ignore_eos": true,
        "temperature": 0.0,
        "stream": true,
        "stream_options": {"include_usage": true, "continuous_usage_stats": true},
    })
    .to_string();
    let mut req = format!(
        "POST /v1/completions HTTP/1.1\r\nhost: 127.0.0.1:{}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
        o.port,
        body.len()
    )
    .into_bytes();
    req.extend_from_slice(body.as_bytes());
    req
}

/// Where the HTTP/1.1 response parser stands.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Phase {
    Head,
    ChunkSize,
    ChunkData(usize),
    ChunkEnd,
    Trailer,
    Fixed(usize),
    Done,
}

/// Parses one response at a time from raw socket bytes and collects the
/// arrival times of its content-bearing SSE chunks.
struct Response {
    phase: Phase,
    status: u16,
    close: bool,
    /// An SSE line whose end has not arrived yet (split across reads or chunks).
    line: Vec<u8>,
    chunks: Vec<Instant>,
    done: bool,
}

impl Response {
    fn new() -> Self {
        Self {
            phase: Phase::Head,
            status: 0,
            close: false,
            line: Vec::new(),
            chunks: Vec::new(),
            done: false,
        }
    }

    /// Consume what it can of `acc` (bytes that arrived at `at`); returns bytes used.
    fn feed(&mut self, acc: &[u8], at: Instant) -> Result<usize, String> {
        let mut pos = 0;
        loop {
            let rest = &acc[pos..];
            match self.phase {
                Phase::Done => return Ok(pos),
                Phase::Head => {
                    let Some(end) = find(rest, b"\r\n\r\n") else {
                        return Ok(pos);
                    };
                    let head = String::from_utf8_lossy(&rest[..end]).to_ascii_lowercase();
                    self.status = head
                        .split_whitespace()
                        .nth(1)
                        .and_then(|s| s.parse().ok())
                        .ok_or_else(|| format!("bad status line in {head:?}"))?;
                    let mut length = None;
                    let mut chunked = false;
                    for h in head.lines().skip(1) {
                        let Some((k, v)) = h.split_once(':') else {
                            continue;
                        };
                        match k.trim() {
                            "content-length" => length = v.trim().parse().ok(),
                            "transfer-encoding" => chunked = v.contains("chunked"),
                            "connection" => self.close = v.contains("close"),
                            _ => {}
                        }
                    }
                    self.phase = if chunked {
                        Phase::ChunkSize
                    } else {
                        match length {
                            Some(0) => Phase::Done,
                            Some(n) => Phase::Fixed(n),
                            None => return Err("response without length or chunking".into()),
                        }
                    };
                    pos += end + 4;
                }
                Phase::ChunkSize => {
                    let Some(end) = find(rest, b"\r\n") else {
                        return Ok(pos);
                    };
                    let text = String::from_utf8_lossy(&rest[..end]);
                    let hex = text.split(';').next().unwrap_or("").trim();
                    let size = usize::from_str_radix(hex, 16)
                        .map_err(|_| format!("bad chunk size line {text:?}"))?;
                    self.phase = if size == 0 {
                        Phase::Trailer
                    } else {
                        Phase::ChunkData(size)
                    };
                    pos += end + 2;
                }
                Phase::ChunkData(left) => {
                    if rest.is_empty() {
                        return Ok(pos);
                    }
                    let n = left.min(rest.len());
                    self.body(&rest[..n], at);
                    pos += n;
                    self.phase = if n == left {
                        Phase::ChunkEnd
                    } else {
                        Phase::ChunkData(left - n)
                    };
                }
                Phase::ChunkEnd => {
                    if rest.len() < 2 {
                        return Ok(pos);
                    }
                    if &rest[..2] != b"\r\n" {
                        return Err("chunk data not followed by CRLF".into());
                    }
                    pos += 2;
                    self.phase = Phase::ChunkSize;
                }
                Phase::Trailer => {
                    let Some(end) = find(rest, b"\r\n") else {
                        return Ok(pos);
                    };
                    pos += end + 2;
                    if end == 0 {
                        self.phase = Phase::Done;
                    }
                }
                Phase::Fixed(left) => {
                    if rest.is_empty() {
                        return Ok(pos);
                    }
                    let n = left.min(rest.len());
                    self.body(&rest[..n], at);
                    pos += n;
                    self.phase = if n == left {
                        Phase::Done
                    } else {
                        Phase::Fixed(left - n)
                    };
                }
            }
        }
    }

    /// Body bytes: split into lines, keeping an unfinished line for later.
    fn body(&mut self, mut data: &[u8], at: Instant) {
        while let Some(i) = data.iter().position(|&b| b == b'\n') {
            if self.line.is_empty() {
                self.on_line(&data[..i], at);
            } else {
                let mut line = std::mem::take(&mut self.line);
                line.extend_from_slice(&data[..i]);
                self.on_line(&line, at);
                line.clear();
                self.line = line;
            }
            data = &data[i + 1..];
        }
        self.line.extend_from_slice(data);
    }

    fn on_line(&mut self, line: &[u8], at: Instant) {
        let Some(payload) = line.strip_prefix(b"data:") else {
            return;
        };
        let payload = payload.strip_prefix(b" ").unwrap_or(payload);
        if payload.starts_with(b"[DONE]") {
            self.done = true;
        } else if payload.starts_with(b"{") && has_text(payload) {
            self.chunks.push(at);
        }
    }
}

/// Whether a chunk carries non-empty `text` (completions) or `content` (chat).
fn has_text(payload: &[u8]) -> bool {
    [&b"\"text\":\""[..], &b"\"content\":\""[..]]
        .iter()
        .any(|key| find(payload, key).is_some_and(|i| payload.get(i + key.len()) != Some(&b'"')))
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// What one thread measured.
#[derive(Default)]
struct Samples {
    ttft_ms: Vec<f64>,
    itl_ms: Vec<f64>,
    ok: u64,
    failed: u64,
    chunks: u64,
    errors: Vec<String>,
}

/// A thread's socket buffers, reused across requests.
struct Buffers {
    /// Received bytes not yet consumed by the parser.
    acc: Vec<u8>,
    /// Where each `read` lands.
    read: Vec<u8>,
}

/// Send one request on `conn` (connecting first if needed) and read its whole answer.
fn one_request(
    o: &Opts,
    conn: &mut Option<TcpStream>,
    io: &mut Buffers,
    index: u64,
) -> Result<(Instant, Response), String> {
    let req = request_bytes(o, index);
    // The clock starts before connecting, as servebench's does when its pool
    // has no idle connection.
    let sent = Instant::now();
    if conn.is_none() {
        let s = TcpStream::connect(("127.0.0.1", o.port)).map_err(|e| format!("connect: {e}"))?;
        s.set_nodelay(true).map_err(|e| e.to_string())?;
        s.set_read_timeout(Some(o.timeout))
            .map_err(|e| e.to_string())?;
        *conn = Some(s);
        io.acc.clear();
    }
    let s = conn.as_mut().expect("connected above");
    s.write_all(&req).map_err(|e| format!("write: {e}"))?;
    let deadline = sent + o.timeout;
    let mut resp = Response::new();
    let Buffers { acc, read } = io;
    loop {
        if Instant::now() > deadline {
            return Err("request timed out".into());
        }
        let n = match s.read(read) {
            Ok(0) => return Err("connection closed mid-response".into()),
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(format!("read: {e}")),
        };
        // Taken as the read returns, before any parsing.
        let at = Instant::now();
        acc.extend_from_slice(&read[..n]);
        let used = resp.feed(acc, at)?;
        acc.drain(..used);
        if resp.phase == Phase::Done {
            return Ok((sent, resp));
        }
    }
}

fn ms(a: Instant, b: Instant) -> f64 {
    b.saturating_duration_since(a).as_secs_f64() * 1000.0
}

/// Run requests claimed from `next` until `limit` is reached; record them when `measure`.
fn run_phase(
    o: &Opts,
    next: &AtomicU64,
    limit: u64,
    conn: &mut Option<TcpStream>,
    io: &mut Buffers,
    out: &mut Samples,
    measure: bool,
) {
    loop {
        let index = next.fetch_add(1, Ordering::Relaxed);
        if index >= limit {
            return;
        }
        match one_request(o, conn, io, index) {
            Ok((sent, resp)) if resp.status == 200 && resp.done && !resp.chunks.is_empty() => {
                if resp.close {
                    *conn = None;
                }
                if measure {
                    out.ok += 1;
                    out.chunks += resp.chunks.len() as u64;
                    out.ttft_ms.push(ms(sent, resp.chunks[0]));
                    out.itl_ms
                        .extend(resp.chunks.windows(2).map(|w| ms(w[0], w[1])));
                }
            }
            Ok((_, resp)) => {
                if resp.close {
                    *conn = None;
                }
                if measure {
                    out.failed += 1;
                    out.errors.push(format!(
                        "status {}, done {}, {} content chunks",
                        resp.status,
                        resp.done,
                        resp.chunks.len()
                    ));
                }
            }
            Err(e) => {
                *conn = None;
                if measure {
                    out.failed += 1;
                    out.errors.push(e);
                }
            }
        }
    }
}

/// Percentile `p` (0–100) of sorted values, interpolating between ranks like servebench.
fn percentile(sorted: &[f64], p: f64) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = p / 100.0 * (sorted.len() - 1) as f64;
    let (lo, hi) = (rank.floor() as usize, rank.ceil() as usize);
    Some(sorted[lo] + (sorted[hi] - sorted[lo]) * (rank - lo as f64))
}

fn stats(mut v: Vec<f64>) -> serde_json::Value {
    v.sort_by(f64::total_cmp);
    let mean = (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64);
    serde_json::json!({
        "count": v.len(),
        "mean": mean,
        "p50": percentile(&v, 50.0),
        "p90": percentile(&v, 90.0),
        "p99": percentile(&v, 99.0),
        "max": v.last(),
    })
}

fn main() {
    let o = match parse_opts() {
        Ok(o) => Arc::new(o),
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(2);
        }
    };
    let warm_next = Arc::new(AtomicU64::new(0));
    let next = Arc::new(AtomicU64::new(o.warmup));
    // Every thread finishes warming up before any measured request leaves,
    // as servebench's warm-up phase does.
    let barrier = Arc::new(Barrier::new(o.threads + 1));
    let mut handles = Vec::with_capacity(o.threads);
    for _ in 0..o.threads {
        let (o, warm_next, next, barrier) =
            (o.clone(), warm_next.clone(), next.clone(), barrier.clone());
        let spawned = std::thread::Builder::new()
            .stack_size(256 * 1024)
            .spawn(move || {
                let mut conn = None;
                let mut io = Buffers {
                    acc: Vec::with_capacity(READ_SIZE),
                    read: vec![0; READ_SIZE],
                };
                let mut out = Samples::default();
                run_phase(
                    &o, &warm_next, o.warmup, &mut conn, &mut io, &mut out, false,
                );
                barrier.wait();
                run_phase(
                    &o,
                    &next,
                    o.warmup + o.requests,
                    &mut conn,
                    &mut io,
                    &mut out,
                    true,
                );
                out
            });
        match spawned {
            Ok(h) => handles.push(h),
            Err(e) => {
                eprintln!("cannot start thread: {e}");
                std::process::exit(1);
            }
        }
    }
    barrier.wait();
    let t0 = Instant::now();
    let mut all = Samples::default();
    for h in handles {
        let s = h.join().expect("reader thread panicked");
        all.ttft_ms.extend(s.ttft_ms);
        all.itl_ms.extend(s.itl_ms);
        all.ok += s.ok;
        all.failed += s.failed;
        all.chunks += s.chunks;
        all.errors.extend(s.errors.into_iter().take(3));
    }
    let wall = t0.elapsed().as_secs_f64();
    all.errors.truncate(5);
    let report = serde_json::json!({
        "threads": o.threads,
        "requests": all.ok,
        "failed": all.failed,
        "chunks": all.chunks,
        "wall_s": wall,
        "chunks_per_s": all.chunks as f64 / wall,
        "ttft_ms": stats(all.ttft_ms),
        "itl_ms": stats(all.itl_ms),
        "errors": all.errors,
    });
    println!("{report}");
    if all.failed > 0 {
        std::process::exit(3);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const RESPONSE: &[u8] =
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n\
        25\r\ndata: {\"choices\":[{\"text\":\" the\"}]}\n\n\r\n\
        27\r\ndata: {\"choices\":[{\"text\":\"\"}]}\n\ndata: \r\n\
        8\r\n[DONE]\n\n\r\n\
        0\r\n\r\n";

    fn parse(parts: &[&[u8]]) -> Response {
        let mut resp = Response::new();
        let mut acc = Vec::new();
        let at = Instant::now();
        for p in parts {
            acc.extend_from_slice(p);
            let used = resp.feed(&acc, at).unwrap();
            acc.drain(..used);
        }
        assert!(acc.is_empty());
        resp
    }

    #[test]
    fn a_response_split_at_any_byte_parses_the_same() {
        let whole = parse(&[RESPONSE]);
        assert_eq!(
            (whole.status, whole.phase, whole.done),
            (200, Phase::Done, true)
        );
        // The empty-text finish chunk is not content.
        assert_eq!(whole.chunks.len(), 1);
        for cut in 1..RESPONSE.len() {
            let (a, b) = RESPONSE.split_at(cut);
            let r = parse(&[a, b]);
            assert_eq!(
                (r.phase, r.done, r.chunks.len()),
                (Phase::Done, true, 1),
                "cut {cut}"
            );
        }
    }
}
