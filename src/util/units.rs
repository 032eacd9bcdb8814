//! Parsing of human-written durations, lists and SLO specifications, and
//! the formatting of durations and timestamps.
//!
//! Durations accept `humantime` syntax (`200ms`, `1.5s`, `10m`); a bare
//! number is rejected because its unit would be a guess.

use std::time::Duration;

/// Parse a duration such as `200ms`, `2s`, `1.5s` or `5m`.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let t = s.trim();
    if t.is_empty() {
        return Err("empty duration".into());
    }
    if t.chars().all(|c| c.is_ascii_digit() || c == '.') {
        return Err(format!(
            "duration `{t}` has no unit; write e.g. `{t}ms` or `{t}s`"
        ));
    }
    // humantime has no fractional units, so handle `1.5s`-style values here.
    if let Some(pos) = t.find(|c: char| c.is_ascii_alphabetic()) {
        let (num, unit) = t.split_at(pos);
        if num.contains('.') {
            let v: f64 = num
                .parse()
                .map_err(|_| format!("invalid number `{num}` in duration `{t}`"))?;
            let scale = match unit {
                "ns" => 1e-9,
                "us" | "µs" => 1e-6,
                "ms" => 1e-3,
                "s" | "sec" => 1.0,
                "m" | "min" => 60.0,
                "h" => 3600.0,
                _ => return Err(format!("unknown unit `{unit}` in duration `{t}`")),
            };
            if !(v >= 0.0 && v.is_finite()) {
                return Err(format!("duration `{t}` must be a non-negative number"));
            }
            return Duration::try_from_secs_f64(v * scale)
                .map_err(|_| format!("duration `{t}` is too long"));
        }
    }
    humantime::parse_duration(t).map_err(|e| format!("invalid duration `{t}`: {e}"))
}

/// Parse a comma-separated list of values with `parse_one` for each item.
pub fn parse_list<T>(
    s: &str,
    parse_one: impl Fn(&str) -> Result<T, String>,
) -> Result<Vec<T>, String> {
    let items: Vec<&str> = s.split(',').map(str::trim).collect();
    if items.iter().all(|x| x.is_empty()) {
        return Err("empty list".into());
    }
    // `1,,2` is a typo, not a list of two: say where the value is missing.
    if let Some(i) = items.iter().position(|x| x.is_empty()) {
        return Err(format!(
            "item {} of `{s}` is empty; separate values with single commas, e.g. `1,4,16`",
            i + 1
        ));
    }
    items.into_iter().map(parse_one).collect()
}

/// Service-level objectives a request must meet to count as good.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Slo {
    /// Upper bound on time to first token, in milliseconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ttft_ms: Option<f64>,
    /// Upper bound on time per output token, in milliseconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tpot_ms: Option<f64>,
    /// Upper bound on end-to-end latency, in milliseconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub e2e_ms: Option<f64>,
    /// Share of a point's requests that must meet every bound for the
    /// point to meet the SLO (0 < a ≤ 1); `None` is [`DEFAULT_ATTAINMENT`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attainment: Option<f64>,
}

/// The share of requests that must meet every bound when an SLO names
/// none: serving research judges an SLO by its attainment, and 90 % is
/// DistServe's figure.
pub const DEFAULT_ATTAINMENT: f64 = 0.9;

impl std::fmt::Display for Slo {
    /// `ttft<=200ms, tpot<=50ms`: the bounds set, then the attainment
    /// asked when one was (`, attainment>=95%`).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut parts: Vec<String> = [
            ("ttft", self.ttft_ms),
            ("tpot", self.tpot_ms),
            ("e2e", self.e2e_ms),
        ]
        .into_iter()
        .filter_map(|(k, v)| v.map(|ms| format!("{k}<={}ms", fmt_g(ms))))
        .collect();
        if let Some(a) = self.attainment {
            parts.push(format!("attainment>={}%", fmt_g(a * 100.0)));
        }
        f.write_str(&parts.join(", "))
    }
}

/// A number without trailing zeros (200, 12.5).
fn fmt_g(v: f64) -> String {
    let s = format!("{v:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

impl Slo {
    /// Whether no bound is set.
    pub fn is_empty(&self) -> bool {
        self.ttft_ms.is_none() && self.tpot_ms.is_none() && self.e2e_ms.is_none()
    }

    /// The share of requests that must meet every bound.
    pub fn attainment_needed(&self) -> f64 {
        self.attainment.unwrap_or(DEFAULT_ATTAINMENT)
    }
}

/// An attainment as a share: `95%` or `0.95`, above 0 and at most 1.
pub fn parse_attainment(s: &str) -> Result<f64, String> {
    let t = s.trim();
    let v = match t.strip_suffix('%') {
        Some(p) => p.trim().parse::<f64>().map(|v| v / 100.0),
        None => t.parse::<f64>(),
    }
    .map_err(|_| format!("attainment `{s}` is not a share; write e.g. 90% or 0.9"))?;
    if !(v > 0.0 && v <= 1.0) {
        return Err(format!("attainment `{s}` must be above 0 and at most 100%"));
    }
    Ok(v)
}

/// Parse `ttft=200ms,tpot=50ms,e2e=10s,attainment=95%` into an [`Slo`].
pub fn parse_slo(s: &str) -> Result<Slo, String> {
    let mut slo = Slo::default();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (key, value) = part.split_once('=').ok_or_else(|| {
            format!("SLO item `{part}` is not KEY=DURATION (keys: ttft, tpot, e2e)")
        })?;
        if key.trim() == "attainment" {
            slo.attainment = Some(parse_attainment(value)?);
            continue;
        }
        let ms = parse_duration(value)?.as_secs_f64() * 1000.0;
        match key.trim() {
            "ttft" => slo.ttft_ms = Some(ms),
            "tpot" => slo.tpot_ms = Some(ms),
            "e2e" => slo.e2e_ms = Some(ms),
            other => {
                return Err(format!(
                    "unknown SLO key `{other}`; allowed: ttft, tpot, e2e, attainment"
                ))
            }
        }
    }
    if slo.is_empty() {
        return Err("empty SLO; write e.g. ttft=200ms,tpot=50ms".into());
    }
    Ok(slo)
}

/// Like [`fmt_s`], with a tenth of a second below 10 s.
pub fn fmt_eta(s: f64) -> String {
    if s < 10.0 {
        format!("{:.1}s", s.max(0.0))
    } else {
        fmt_s(s)
    }
}

/// Seconds as `1h02m`, `3m05s` or `42s`.
pub fn fmt_s(s: f64) -> String {
    let s = s.max(0.0).round() as u64;
    if s >= 3600 {
        format!("{}h{:02}m", s / 3600, (s % 3600) / 60)
    } else if s >= 60 {
        format!("{}m{:02}s", s / 60, s % 60)
    } else {
        format!("{s}s")
    }
}

/// Now as RFC 3339.
pub fn now_rfc3339() -> String {
    humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_need_units_and_accept_fractions() {
        assert_eq!(parse_duration("200ms").unwrap(), Duration::from_millis(200));
        assert_eq!(parse_duration("1.5s").unwrap(), Duration::from_millis(1500));
        assert_eq!(parse_duration("2m").unwrap(), Duration::from_secs(120));
        assert!(parse_duration("200").unwrap_err().contains("no unit"));
        assert!(parse_duration("3 parsecs").is_err());
    }

    #[test]
    fn slo_parses_all_keys_and_rejects_unknown() {
        let slo = parse_slo("ttft=200ms, tpot=50ms,e2e=10s").unwrap();
        assert_eq!(slo.ttft_ms, Some(200.0));
        assert_eq!(slo.tpot_ms, Some(50.0));
        assert_eq!(slo.e2e_ms, Some(10_000.0));
        assert!(parse_slo("itl=5ms").unwrap_err().contains("allowed"));
        assert!(parse_slo("ttft").is_err());
    }

    #[test]
    fn lists_parse_each_item() {
        let v = parse_list("1, 4,16", |x| x.parse::<u32>().map_err(|e| e.to_string())).unwrap();
        assert_eq!(v, vec![1, 4, 16]);
        assert!(parse_list("1,x", |x| x.parse::<u32>().map_err(|e| e.to_string())).is_err());
        let e = parse_list("1,,2", |x| x.parse::<u32>().map_err(|e| e.to_string())).unwrap_err();
        assert!(e.contains("item 2 of `1,,2` is empty"), "{e}");
    }
}
