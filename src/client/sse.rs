//! An incremental Server-Sent Events parser: bytes in, `data` payloads out.
//!
//! Frames from the network split lines anywhere, so partial lines are kept
//! until their end arrives. Only `data:` fields matter to us; comment lines
//! (`:` keep-alives), `event:`, `id:` and `retry:` are skipped. A payload that
//! spans several `data:` lines is joined with `\n` as the SSE standard says.
//! Single-line events — nearly all of them — are handed out without copying.

/// Largest event payload (or unfinished line) kept, in bytes: a server that
/// never ends a line must not grow the client without bound.
pub const MAX_EVENT_BYTES: usize = 4 * 1024 * 1024;

/// An event or line outgrew [`MAX_EVENT_BYTES`]; the stream cannot be trusted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Oversized {
    /// Bytes held when the limit was crossed.
    pub bytes: usize,
}

/// Incremental SSE parser state.
#[derive(Debug)]
pub struct SseParser {
    partial: Vec<u8>,
    data: Vec<u8>,
    has_data: bool,
    limit: usize,
}

impl Default for SseParser {
    fn default() -> Self {
        Self::with_limit(MAX_EVENT_BYTES)
    }
}

impl SseParser {
    /// A parser at the start of a stream.
    pub fn new() -> Self {
        Self::default()
    }

    /// A parser that refuses events or lines longer than `limit` bytes.
    pub fn with_limit(limit: usize) -> Self {
        Self {
            partial: Vec::new(),
            data: Vec::new(),
            has_data: false,
            limit,
        }
    }

    /// Feed bytes; `on_event` receives each complete event's data payload.
    pub fn feed(
        &mut self,
        mut bytes: &[u8],
        mut on_event: impl FnMut(&[u8]),
    ) -> Result<(), Oversized> {
        if !self.partial.is_empty() {
            match memchr::memchr(b'\n', bytes) {
                None => {
                    self.keep_partial(bytes)?;
                    return Ok(());
                }
                Some(i) => {
                    let mut line = std::mem::take(&mut self.partial);
                    line.extend_from_slice(&bytes[..i]);
                    self.line(&line, &mut on_event)?;
                    bytes = &bytes[i + 1..];
                }
            }
        }
        while let Some(i) = memchr::memchr(b'\n', bytes) {
            self.line(&bytes[..i], &mut on_event)?;
            bytes = &bytes[i + 1..];
        }
        if !bytes.is_empty() {
            self.keep_partial(bytes)?;
        }
        Ok(())
    }

    /// Deliver a final event that was not followed by a blank line.
    pub fn finish(&mut self, mut on_event: impl FnMut(&[u8])) -> Result<(), Oversized> {
        if !self.partial.is_empty() {
            let line = std::mem::take(&mut self.partial);
            self.line(&line, &mut on_event)?;
        }
        if self.has_data {
            on_event(&self.data);
            self.data.clear();
            self.has_data = false;
        }
        Ok(())
    }

    fn keep_partial(&mut self, bytes: &[u8]) -> Result<(), Oversized> {
        let held = self.partial.len() + bytes.len();
        if held > self.limit {
            self.partial = Vec::new();
            return Err(Oversized { bytes: held });
        }
        self.partial.extend_from_slice(bytes);
        Ok(())
    }

    fn line(&mut self, line: &[u8], on_event: &mut impl FnMut(&[u8])) -> Result<(), Oversized> {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.is_empty() {
            if self.has_data {
                on_event(&self.data);
                self.data.clear();
                self.has_data = false;
            }
            return Ok(());
        }
        let Some(rest) = line.strip_prefix(b"data:") else {
            return Ok(());
        };
        let value = rest.strip_prefix(b" ").unwrap_or(rest);
        let held = self.data.len() + value.len();
        if held > self.limit {
            self.data = Vec::new();
            return Err(Oversized { bytes: held });
        }
        if self.has_data {
            self.data.push(b'\n');
        }
        self.data.extend_from_slice(value);
        self.has_data = true;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn collect(chunks: &[&[u8]]) -> Vec<String> {
        let mut p = SseParser::new();
        let mut out = Vec::new();
        for c in chunks {
            p.feed(c, |d| out.push(String::from_utf8(d.to_vec()).unwrap()))
                .unwrap();
        }
        p.finish(|d| out.push(String::from_utf8(d.to_vec()).unwrap()))
            .unwrap();
        out
    }

    #[test]
    fn events_split_at_every_byte_boundary_parse_the_same() {
        let stream =
            b"data: {\"a\":1}\n\n: keep-alive\n\ndata: {\"b\":2}\r\n\r\nevent: x\ndata: [DONE]\n\n";
        let whole = collect(&[stream]);
        assert_eq!(whole, vec!["{\"a\":1}", "{\"b\":2}", "[DONE]"]);
        for cut in 1..stream.len() {
            let (a, b) = stream.split_at(cut);
            assert_eq!(collect(&[a, b]), whole, "cut at {cut}");
        }
        let bytes: Vec<&[u8]> = stream.chunks(1).collect();
        assert_eq!(collect(&bytes), whole);
    }

    #[test]
    fn multi_line_data_is_joined_and_trailing_event_is_flushed() {
        assert_eq!(
            collect(&[b"data: one\ndata:two\n\ndata: last"]),
            vec!["one\ntwo", "last"]
        );
    }

    #[test]
    fn a_line_that_never_ends_is_refused_at_the_limit() {
        let mut p = SseParser::with_limit(16);
        let mut n = 0;
        assert_eq!(p.feed(b"data: 0123456789", |_| n += 1), Ok(()));
        let e = p.feed(b"abcdefgh", |_| n += 1).unwrap_err();
        assert_eq!(e.bytes, 24);
        // A complete line over the limit in one frame, and many data lines
        // joined into one oversized event, are refused too.
        let mut p = SseParser::with_limit(16);
        assert!(p.feed(b"data: 0123456789abcdefgh\n", |_| n += 1).is_err());
        let mut p = SseParser::with_limit(16);
        assert!(p
            .feed(b"data: 0123456789\ndata: 0123456789\n", |_| n += 1)
            .is_err());
        assert_eq!(n, 0);
    }
}
