//! Failure classification: which error lines a log holds and which of
//! them says why a server failed.

use super::text::strip_log_prefix;
use super::{ErrorLine, FailureCause, FailureKind};

/// Classifies why a server failed from the tail of its log.
///
/// Returns the most specific cause found (out of memory, then CUDA, NCCL,
/// address in use, unknown argument, then a bare Python exception), with the
/// first line that shows it, preferring a line that says "error" over a
/// warning of the same class; `None` when no line matches.
pub fn classify_failure(log_tail: &str) -> Option<FailureCause> {
    let mut errors: Vec<ErrorLine> = Vec::new();
    let mut tb = TracebackState::default();
    for (idx, raw) in log_tail.lines().enumerate() {
        let line_number = idx + 1;
        let body = strip_log_prefix(raw);
        if let Some(e) = tb.feed(line_number, body) {
            errors.push(e);
        }
        if let Some(kind) = classify_line(body) {
            errors.push(ErrorLine {
                line_number,
                kind,
                text: body.trim().to_string(),
            });
        }
    }
    if let Some(e) = tb.finish() {
        errors.push(e);
    }
    errors
        .into_iter()
        .enumerate()
        // Within one class, a line that says "error" beats a warning that
        // merely mentions the same condition (e.g. "CUDA warning: ...").
        .min_by_key(|(i, e)| {
            let says_error = e.text.to_ascii_lowercase().contains("error");
            (e.kind.priority(), !says_error, *i)
        })
        .map(|(_, e)| FailureCause {
            kind: e.kind,
            evidence: e.text,
            line_number: e.line_number,
        })
}

/// Classifies one undecorated line, or `None` when it shows no error.
pub(super) fn classify_line(body: &str) -> Option<FailureKind> {
    let lower = body.to_ascii_lowercase();
    let has = |needle: &str| lower.contains(needle);
    if has("out of memory")
        || has("outofmemoryerror")
        || has("cuda_error_out_of_memory")
        || has("cudamalloc failed")
        || has("not enough memory")
        || has("no available memory for the cache blocks")
        || has("insufficient memory")
    {
        return Some(FailureKind::OutOfMemory);
    }
    if has("nccl error")
        || has("ncclunhandledcudaerror")
        || has("ncclsystemerror")
        || has("ncclinternalerror")
        || has("ncclinvalidusage")
        || has("ncclremoteerror")
        || has("distbackenderror")
    {
        return Some(FailureKind::NcclError);
    }
    if has("cuda error")
        || has("cudaerror")
        || has("illegal memory access")
        || has("illegal instruction was encountered")
        || has("device-side assert triggered")
        || has("cuda_error_")
    {
        return Some(FailureKind::CudaError);
    }
    if has("address already in use")
        || has("errno 98")
        || has("couldn't bind http server socket")
        || has("could not bind")
    {
        return Some(FailureKind::AddressInUse);
    }
    if has("unrecognized arguments:")
        || has("error: invalid argument")
        || has("invalid choice:")
        || has("unknown argument")
    {
        return Some(FailureKind::UnknownArgument);
    }
    None
}

/// Tracks Python tracebacks so that their exception line can be reported.
#[derive(Default)]
pub(super) struct TracebackState {
    active: bool,
    start_line: usize,
    exception: Option<(usize, String)>,
}

impl TracebackState {
    /// Feeds one undecorated line; returns an error when a traceback just ended.
    pub(super) fn feed(&mut self, line_number: usize, body: &str) -> Option<ErrorLine> {
        let starts_traceback = body
            .trim_start()
            .starts_with("Traceback (most recent call last)");
        if !self.active {
            if starts_traceback {
                self.active = true;
                self.start_line = line_number;
                self.exception = None;
            }
            return None;
        }
        if starts_traceback
            || body.trim().is_empty()
            || body.starts_with([' ', '\t'])
            || body.starts_with("During handling of the above exception")
            || body.starts_with("The above exception was the direct cause")
        {
            return None;
        }
        if looks_like_exception(body) {
            // Chained tracebacks end with the exception that finally escaped,
            // so a later exception line replaces an earlier one.
            self.exception = Some((line_number, body.trim().to_string()));
            return None;
        }
        if self.exception.is_some() {
            let done = self.finish();
            // The line that ended one traceback may start another.
            let _ = self.feed(line_number, body);
            return done;
        }
        None
    }

    pub(super) fn finish(&mut self) -> Option<ErrorLine> {
        if !self.active {
            return None;
        }
        self.active = false;
        let (line_number, text) = self.exception.take().unwrap_or_else(|| {
            (
                self.start_line,
                "Traceback (most recent call last): (no exception line)".to_string(),
            )
        });
        Some(ErrorLine {
            line_number,
            kind: FailureKind::PythonException,
            text,
        })
    }
}

/// `pkg.mod.SomeError: message` or a bare `KeyboardInterrupt`.
fn looks_like_exception(body: &str) -> bool {
    let head = match body.split_once(':') {
        Some((h, _)) => h,
        None => body.trim_end(),
    };
    let mut chars = head.chars();
    match chars.next() {
        Some(c) if c.is_ascii_alphabetic() || c == '_' => {}
        _ => return false,
    }
    let is_ident = chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.');
    let last = head.rsplit('.').next().unwrap_or(head);
    is_ident
        && (last.ends_with("Error")
            || last.ends_with("Exception")
            || last.ends_with("Interrupt")
            || last.ends_with("Exit")
            || last.ends_with("Warning")
            || last == "AssertionError")
}
