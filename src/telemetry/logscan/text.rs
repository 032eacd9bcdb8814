//! A log line's text: its decorations removed, and the numbers and memory
//! sizes that follow a key phrase.

/// Removes timestamps, levels, process tags and container names from a line.
pub fn strip_log_prefix(line: &str) -> &str {
    let mut s = line.trim_end_matches(['\r', '\n']);
    for _ in 0..8 {
        let before = s.len();
        s = strip_compose(s);
        s = strip_process_tag(s);
        s = strip_bracketed_stamp(s);
        s = strip_vllm_level(s);
        s = strip_llamacpp_stamp(s);
        if s.len() == before {
            break;
        }
    }
    s
}

/// `service-name    | rest` (docker compose).
fn strip_compose(s: &str) -> &str {
    let Some(bar) = s.find(" | ") else {
        return s;
    };
    let name = s.get(..bar).unwrap_or("").trim_end();
    if !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
    {
        s.get(bar + 3..).unwrap_or(s)
    } else {
        s
    }
}

/// `(EngineCore_DP0 pid=151) rest`.
fn strip_process_tag(s: &str) -> &str {
    if !s.starts_with('(') {
        return s;
    }
    match s.find(')') {
        Some(close) if s.get(..close).is_some_and(|t| t.contains("pid=")) => {
            s.get(close + 1..).map(|r| r.trim_start()).unwrap_or(s)
        }
        _ => s,
    }
}

/// `[2025-09-03 18:33:18 TP0] rest`, `[rank0]: rest`, `[41123] rest`.
fn strip_bracketed_stamp(s: &str) -> &str {
    if !s.starts_with('[') {
        return s;
    }
    let Some(close) = s.find(']') else {
        return s;
    };
    let inner = s.get(1..close).unwrap_or("");
    let dated = inner.len() >= 10
        && inner.as_bytes()[..4].iter().all(u8::is_ascii_digit)
        && inner.as_bytes()[4] == b'-';
    // Older SGLang prints only the time: `[04:40:55 TP0]`.
    let timed = inner.len() >= 8
        && inner.as_bytes()[..2].iter().all(u8::is_ascii_digit)
        && inner.as_bytes()[2] == b':';
    let pid = !inner.is_empty() && inner.bytes().all(|b| b.is_ascii_digit());
    let rank = inner.starts_with("rank") && inner[4..].bytes().all(|b| b.is_ascii_digit());
    if dated || timed || pid || rank {
        let rest = s.get(close + 1..).unwrap_or("");
        let rest = rest.strip_prefix(':').unwrap_or(rest);
        rest.trim_start()
    } else {
        s
    }
}

/// `INFO 09-03 16:28:10 [file.py:123] rest` and the older `INFO 01-30 03:18:12 file.py:848] rest`.
fn strip_vllm_level(s: &str) -> &str {
    const LEVELS: [&str; 6] = [
        "DEBUG ",
        "INFO ",
        "WARNING ",
        "ERROR ",
        "CRITICAL ",
        "WARN ",
    ];
    let Some(level) = LEVELS.iter().find(|l| s.starts_with(**l)) else {
        return s;
    };
    let rest = s.get(level.len()..).unwrap_or("").trim_start();
    let b = rest.as_bytes();
    let dated = b.len() >= 15
        && b[2] == b'-'
        && b[5] == b' '
        && b[8] == b':'
        && b[11] == b':'
        && b[..2].iter().all(u8::is_ascii_digit);
    if !dated {
        return s;
    }
    let after_time = rest.get(14..).unwrap_or("").trim_start();
    match after_time.find("] ") {
        Some(end) if end < 80 && !after_time.get(..end).unwrap_or("").contains(' ') => {
            after_time.get(end + 2..).unwrap_or(after_time)
        }
        _ => after_time,
    }
}

/// llama.cpp's `0.08.500.798 I rest` / `214.40.099.656 W rest`.
fn strip_llamacpp_stamp(s: &str) -> &str {
    let Some(space) = s.find(' ') else {
        return s;
    };
    let stamp = s.get(..space).unwrap_or("");
    let looks_like_stamp = stamp.len() >= 7
        && stamp.bytes().all(|b| b.is_ascii_digit() || b == b'.')
        && stamp.bytes().filter(|b| *b == b'.').count() == 3;
    if !looks_like_stamp {
        return s;
    }
    let rest = s.get(space + 1..).unwrap_or("");
    let bytes = rest.as_bytes();
    if bytes.len() >= 2 && matches!(bytes[0], b'I' | b'W' | b'E' | b'D') && bytes[1] == b' ' {
        rest.get(2..).unwrap_or(rest)
    } else {
        rest
    }
}

/// Index just past `key`, where `key` is not glued to a preceding identifier.
pub(in crate::telemetry) fn find_key(hay: &str, key: &str) -> Option<usize> {
    if key.is_empty() {
        return None;
    }
    let mut start = 0;
    while let Some(pos) = hay.get(start..)?.find(key) {
        let abs = start + pos;
        let glued = hay
            .get(..abs)
            .and_then(|p| p.chars().next_back())
            .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_');
        if !glued || !key.starts_with(|c: char| c.is_ascii_alphanumeric() || c == '_') {
            return Some(abs + key.len());
        }
        start = abs + key.len();
    }
    None
}

/// A leading decimal number (thousands commas allowed) and the text after it.
pub(in crate::telemetry) fn leading_number(s: &str) -> Option<(f64, &str)> {
    let b = s.as_bytes();
    let mut i = 0;
    if i < b.len() && (b[i] == b'-' || b[i] == b'+') {
        i += 1;
    }
    let digits_start = i;
    let mut text = String::new();
    if digits_start == 1 && b[0] == b'-' {
        text.push('-');
    }
    while i < b.len() {
        let c = b[i];
        if c.is_ascii_digit() || c == b'.' {
            text.push(c as char);
            i += 1;
        } else if c == b',' && i + 1 < b.len() && b[i + 1].is_ascii_digit() && i > digits_start {
            // "75,840 tokens" but not "580364, chunked"
            i += 1;
        } else if (c == b'e' || c == b'E')
            && i > digits_start
            && i + 1 < b.len()
            && (b[i + 1].is_ascii_digit() || b[i + 1] == b'-' || b[i + 1] == b'+')
        {
            text.push('e');
            i += 1;
            if b[i] == b'-' || b[i] == b'+' {
                text.push(b[i] as char);
                i += 1;
            }
        } else {
            break;
        }
    }
    let value = text.trim_end_matches('.').parse::<f64>().ok()?;
    value.is_finite().then(|| (value, s.get(i..).unwrap_or("")))
}

fn skip_separators(s: &str) -> &str {
    s.trim_start_matches([' ', '\t', '=', ':'])
}

pub(in crate::telemetry) fn num_after(hay: &str, key: &str) -> Option<f64> {
    let at = find_key(hay, key)?;
    leading_number(skip_separators(hay.get(at..)?)).map(|(v, _)| v)
}

pub(in crate::telemetry) fn to_u64(v: f64) -> Option<u64> {
    (v.is_finite() && v >= 0.0 && v <= u64::MAX as f64).then(|| v.round() as u64)
}

pub(in crate::telemetry) fn u64_after(hay: &str, key: &str) -> Option<u64> {
    num_after(hay, key).and_then(to_u64)
}

/// Converts a number followed by a memory unit to GiB.
pub(super) fn mem_value(s: &str) -> Option<f64> {
    let (value, rest) = leading_number(skip_separators(s))?;
    let unit: String = rest
        .trim_start()
        .chars()
        .take_while(|c| c.is_ascii_alphabetic())
        .collect();
    let factor = match unit.as_str() {
        "GiB" | "GB" | "G" => 1.0,
        "MiB" | "MB" | "M" => 1.0 / 1024.0,
        "KiB" | "KB" | "kB" | "K" => 1.0 / (1024.0 * 1024.0),
        "TiB" | "TB" => 1024.0,
        _ => return None,
    };
    Some(value * factor)
}

pub(in crate::telemetry) fn mem_after(hay: &str, key: &str) -> Option<f64> {
    let at = find_key(hay, key)?;
    mem_value(hay.get(at..)?)
}

/// `K (f16): 1024.00 MiB`: the size after the closing parenthesis.
pub(in crate::telemetry) fn mem_after_paren(hay: &str, key: &str) -> Option<f64> {
    let at = find_key(hay, key)?;
    let rest = hay.get(at..)?;
    let close = rest.find(')')?;
    mem_value(rest.get(close + 1..)?)
}

/// The number immediately before `key`, e.g. `16384` in `( 16384 cells`.
pub(in crate::telemetry) fn u64_before(hay: &str, key: &str) -> Option<u64> {
    number_before_key(hay, key).and_then(to_u64)
}

pub(in crate::telemetry) fn number_before_key(hay: &str, key: &str) -> Option<f64> {
    let at = hay.find(key)?;
    let head = hay.get(..at)?.trim_end();
    let start = head
        .rfind(|c: char| !(c.is_ascii_digit() || c == '.' || c == ','))
        .map_or(0, |i| i + 1);
    leading_number(head.get(start..)?).map(|(v, _)| v)
}
