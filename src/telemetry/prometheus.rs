//! Prometheus text exposition format (version 0.0.4) parsing and scrape deltas.
//!
//! servebench scrapes an engine's `/metrics` before and after each cell and
//! keeps the difference, so the numbers in a result describe that cell only.
//!
//! Invariants:
//! - [`parse`] never panics; malformed input yields a [`ParseError`] naming the
//!   1-based line number.
//! - Every sample is attached to exactly one [`MetricFamily`]. Histogram and
//!   summary samples (`_bucket`, `_sum`, `_count`, `_created`) join the family
//!   declared by `# TYPE`; samples without a declaration get an `untyped` family
//!   of their own name.
//! - [`delta`] never reports a negative counter increase: a counter that went
//!   down was reset, so the increase is taken as its `after` value and the
//!   series is flagged.
//! - Non-finite values (`NaN`, `+Inf`, `-Inf`) survive a JSON round trip; they
//!   are written as the strings `"NaN"`, `"+Inf"` and `"-Inf"`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The type a `# TYPE` line declares for a metric family.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MetricType {
    /// Monotonically increasing value; restarts from zero when the process does.
    Counter,
    /// Value that may go up and down.
    Gauge,
    /// Cumulative buckets plus `_sum` and `_count`.
    Histogram,
    /// Quantiles plus `_sum` and `_count`.
    Summary,
    /// No `# TYPE` line, or the type `untyped`.
    Untyped,
}

impl MetricType {
    fn from_keyword(word: &str) -> Option<Self> {
        match word {
            "counter" => Some(Self::Counter),
            "gauge" => Some(Self::Gauge),
            "histogram" => Some(Self::Histogram),
            "summary" => Some(Self::Summary),
            "untyped" | "unknown" => Some(Self::Untyped),
            _ => None,
        }
    }
}

/// One sample line: a series (name plus labels) and its value.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Sample {
    /// The full sample name as written, e.g. `vllm:e2e_request_latency_seconds_bucket`.
    pub name: String,
    /// Label pairs, unescaped, ordered by label name.
    pub labels: BTreeMap<String, String>,
    /// The sample value; may be NaN or infinite.
    #[serde(with = "float_repr")]
    pub value: f64,
    /// Optional timestamp in milliseconds since the Unix epoch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timestamp_ms: Option<i64>,
}

impl Sample {
    /// A stable identifier of the series: `name{a="x",b="y"}` with labels sorted.
    pub fn series_id(&self) -> String {
        series_id(&self.name, &self.labels)
    }
}

/// All samples of one metric family with its declared type and help text.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MetricFamily {
    /// The family name from `# TYPE` (for histograms, without the `_bucket` suffix).
    pub name: String,
    /// Declared type, `untyped` when undeclared.
    pub metric_type: MetricType,
    /// The `# HELP` text, unescaped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub help: Option<String>,
    /// Samples in the order they appeared.
    pub samples: Vec<Sample>,
}

/// One parsed `/metrics` response.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Scrape {
    /// Families keyed by family name.
    pub families: BTreeMap<String, MetricFamily>,
}

impl Scrape {
    /// Every sample whose full name equals `name`, across all label sets.
    pub fn samples_named<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a Sample> + 'a {
        self.families
            .values()
            .flat_map(|f| f.samples.iter())
            .filter(move |s| s.name == name)
    }

    /// Sum of the values of all series named `name`, or `None` when there is none.
    pub fn sum(&self, name: &str) -> Option<f64> {
        let mut found = false;
        let mut total = 0.0;
        for s in self.samples_named(name) {
            found = true;
            total += s.value;
        }
        found.then_some(total)
    }

    /// The metric type of the family a sample name belongs to.
    pub fn type_of(&self, sample_name: &str) -> Option<MetricType> {
        self.families
            .values()
            .find(|f| f.samples.iter().any(|s| s.name == sample_name))
            .map(|f| f.metric_type)
    }

    /// Total number of samples in the scrape.
    pub fn sample_count(&self) -> usize {
        self.families.values().map(|f| f.samples.len()).sum()
    }
}

/// Why a line of exposition text could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {message}")]
pub struct ParseError {
    /// 1-based line number of the offending line.
    pub line: usize,
    /// What was wrong with it.
    pub message: String,
}

fn err(line: usize, message: impl Into<String>) -> ParseError {
    ParseError {
        line,
        message: message.into(),
    }
}

/// Parses Prometheus text exposition format 0.0.4.
pub fn parse(text: &str) -> Result<Scrape, ParseError> {
    let mut helps: BTreeMap<String, String> = BTreeMap::new();
    let mut types: BTreeMap<String, MetricType> = BTreeMap::new();
    let mut samples: Vec<Sample> = Vec::new();

    for (idx, raw) in text.split('\n').enumerate() {
        let line_no = idx + 1;
        let line = raw.strip_suffix('\r').unwrap_or(raw);
        let trimmed = line.trim_start_matches([' ', '\t']);
        if trimmed.trim().is_empty() {
            continue;
        }
        if let Some(comment) = trimmed.strip_prefix('#') {
            parse_comment(comment, line_no, &mut helps, &mut types)?;
            continue;
        }
        samples.push(parse_sample(trimmed, line_no)?);
    }

    let mut families: BTreeMap<String, MetricFamily> = BTreeMap::new();
    for (name, metric_type) in &types {
        families.insert(
            name.clone(),
            MetricFamily {
                name: name.clone(),
                metric_type: *metric_type,
                help: helps.get(name).cloned(),
                samples: Vec::new(),
            },
        );
    }
    for sample in samples {
        let family_name = family_for(&sample.name, &types);
        families
            .entry(family_name.clone())
            .or_insert_with(|| MetricFamily {
                help: helps.get(&family_name).cloned(),
                name: family_name,
                metric_type: MetricType::Untyped,
                samples: Vec::new(),
            })
            .samples
            .push(sample);
    }
    // A HELP/TYPE pair with no samples is legal (vLLM emits them for unused
    // labelled metrics) but carries nothing worth keeping.
    families.retain(|_, f| !f.samples.is_empty());
    Ok(Scrape { families })
}

fn family_for(sample_name: &str, types: &BTreeMap<String, MetricType>) -> String {
    if types.contains_key(sample_name) {
        return sample_name.to_string();
    }
    const SUFFIXES: [(&str, &[MetricType]); 5] = [
        ("_bucket", &[MetricType::Histogram]),
        ("_sum", &[MetricType::Histogram, MetricType::Summary]),
        ("_count", &[MetricType::Histogram, MetricType::Summary]),
        (
            "_created",
            &[
                MetricType::Histogram,
                MetricType::Summary,
                MetricType::Counter,
            ],
        ),
        ("_total", &[MetricType::Counter]),
    ];
    for (suffix, allowed) in SUFFIXES {
        if let Some(base) = sample_name.strip_suffix(suffix) {
            if let Some(t) = types.get(base) {
                if allowed.contains(t) {
                    return base.to_string();
                }
            }
        }
    }
    sample_name.to_string()
}

fn parse_comment(
    comment: &str,
    line_no: usize,
    helps: &mut BTreeMap<String, String>,
    types: &mut BTreeMap<String, MetricType>,
) -> Result<(), ParseError> {
    let body = comment.trim_start_matches([' ', '\t']);
    let (keyword, rest) = split_token(body);
    match keyword {
        "HELP" => {
            let (name, doc) = split_token(rest);
            if !is_metric_name(name) {
                return Err(err(
                    line_no,
                    format!("invalid metric name in HELP: {name:?}"),
                ));
            }
            helps.insert(name.to_string(), unescape_help(doc));
        }
        "TYPE" => {
            let (name, rest) = split_token(rest);
            if !is_metric_name(name) {
                return Err(err(
                    line_no,
                    format!("invalid metric name in TYPE: {name:?}"),
                ));
            }
            let (word, trailing) = split_token(rest);
            if !trailing.trim().is_empty() {
                return Err(err(line_no, "unexpected text after the type in TYPE"));
            }
            let metric_type = MetricType::from_keyword(word)
                .ok_or_else(|| err(line_no, format!("unknown metric type {word:?}")))?;
            if let Some(previous) = types.get(name) {
                if *previous != metric_type {
                    return Err(err(
                        line_no,
                        format!("conflicting TYPE for {name}: {previous:?} then {metric_type:?}"),
                    ));
                }
            }
            types.insert(name.to_string(), metric_type);
        }
        // Any other comment is free text.
        _ => {}
    }
    Ok(())
}

/// Splits off the first whitespace-delimited token; the rest keeps its inner spacing.
fn split_token(s: &str) -> (&str, &str) {
    let s = s.trim_start_matches([' ', '\t']);
    match s.find([' ', '\t']) {
        Some(pos) => (&s[..pos], s[pos..].trim_start_matches([' ', '\t'])),
        None => (s, ""),
    }
}

fn unescape_help(doc: &str) -> String {
    let mut out = String::with_capacity(doc.len());
    let mut chars = doc.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            match chars.next() {
                Some('n') => out.push('\n'),
                Some('\\') => out.push('\\'),
                // HELP text only defines \\ and \n; anything else is kept verbatim.
                Some(other) => {
                    out.push('\\');
                    out.push(other);
                }
                None => out.push('\\'),
            }
        } else {
            out.push(c);
        }
    }
    out.trim_end().to_string()
}

fn is_metric_name(name: &str) -> bool {
    let mut chars = name.chars();
    match chars.next() {
        Some(c) if c.is_ascii_alphabetic() || c == '_' || c == ':' => {}
        _ => return false,
    }
    chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
}

fn is_label_name(name: &str) -> bool {
    let mut chars = name.chars();
    match chars.next() {
        Some(c) if c.is_ascii_alphabetic() || c == '_' => {}
        _ => return false,
    }
    chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

fn parse_sample(line: &str, line_no: usize) -> Result<Sample, ParseError> {
    let name_end = line
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'))
        .unwrap_or(line.len());
    let name = &line[..name_end];
    if !is_metric_name(name) {
        return Err(err(line_no, format!("invalid metric name {name:?}")));
    }
    let mut rest = &line[name_end..];
    let mut labels = BTreeMap::new();
    if let Some(after_brace) = rest.strip_prefix('{') {
        rest = parse_labels(after_brace, line_no, &mut labels)?;
    }
    if !rest.starts_with([' ', '\t']) {
        return Err(err(line_no, "expected whitespace before the sample value"));
    }
    let mut fields = rest.split([' ', '\t']).filter(|f| !f.is_empty());
    let value_text = fields
        .next()
        .ok_or_else(|| err(line_no, "missing sample value"))?;
    let value = parse_value(value_text)
        .ok_or_else(|| err(line_no, format!("invalid sample value {value_text:?}")))?;
    let timestamp_ms = match fields.next() {
        Some(ts) => Some(
            ts.parse::<i64>()
                .map_err(|_| err(line_no, format!("invalid timestamp {ts:?}")))?,
        ),
        None => None,
    };
    if let Some(extra) = fields.next() {
        return Err(err(
            line_no,
            format!("unexpected text after the sample: {extra:?}"),
        ));
    }
    Ok(Sample {
        name: name.to_string(),
        labels,
        value,
        timestamp_ms,
    })
}

/// Parses `name="value",...}` and returns what follows the closing brace.
fn parse_labels<'a>(
    mut s: &'a str,
    line_no: usize,
    labels: &mut BTreeMap<String, String>,
) -> Result<&'a str, ParseError> {
    loop {
        s = s.trim_start_matches([' ', '\t']);
        if let Some(after) = s.strip_prefix('}') {
            return Ok(after);
        }
        let eq = s
            .find('=')
            .ok_or_else(|| err(line_no, "expected '=' in label set"))?;
        let label_name = s[..eq].trim_end_matches([' ', '\t']);
        if !is_label_name(label_name) {
            return Err(err(line_no, format!("invalid label name {label_name:?}")));
        }
        s = s[eq + 1..].trim_start_matches([' ', '\t']);
        s = s
            .strip_prefix('"')
            .ok_or_else(|| err(line_no, format!("label {label_name} value must be quoted")))?;
        let mut value = String::new();
        let mut closed_at = None;
        let mut chars = s.char_indices();
        while let Some((i, c)) = chars.next() {
            match c {
                '"' => {
                    closed_at = Some(i + 1);
                    break;
                }
                '\\' => match chars.next() {
                    Some((_, '\\')) => value.push('\\'),
                    Some((_, '"')) => value.push('"'),
                    Some((_, 'n')) => value.push('\n'),
                    Some((_, other)) => {
                        return Err(err(
                            line_no,
                            format!("invalid escape \\{other} in label {label_name}"),
                        ))
                    }
                    None => break,
                },
                _ => value.push(c),
            }
        }
        let closed_at = closed_at
            .ok_or_else(|| err(line_no, format!("unterminated value of label {label_name}")))?;
        if labels.insert(label_name.to_string(), value).is_some() {
            return Err(err(line_no, format!("duplicate label {label_name}")));
        }
        s = s[closed_at..].trim_start_matches([' ', '\t']);
        if let Some(after) = s.strip_prefix(',') {
            s = after;
        } else if !s.starts_with('}') {
            return Err(err(line_no, "expected ',' or '}' after a label value"));
        }
    }
}

fn parse_value(text: &str) -> Option<f64> {
    match text {
        "NaN" | "nan" => Some(f64::NAN),
        "+Inf" | "Inf" | "inf" | "+inf" => Some(f64::INFINITY),
        "-Inf" | "-inf" => Some(f64::NEG_INFINITY),
        _ => {
            // Rust also accepts spellings such as "infinity"; Prometheus clients
            // never write them, so only plain decimal/exponent forms pass here.
            if text
                .chars()
                .all(|c| c.is_ascii_digit() || matches!(c, '.' | 'e' | 'E' | '+' | '-'))
            {
                text.parse::<f64>().ok()
            } else {
                None
            }
        }
    }
}

/// `name{a="x",b="y"}` with labels sorted and values escaped as in the text format.
pub fn series_id(name: &str, labels: &BTreeMap<String, String>) -> String {
    if labels.is_empty() {
        return name.to_string();
    }
    let inner: Vec<String> = labels
        .iter()
        .map(|(k, v)| {
            let escaped = v
                .replace('\\', "\\\\")
                .replace('"', "\\\"")
                .replace('\n', "\\n");
            format!("{k}=\"{escaped}\"")
        })
        .collect();
    format!("{name}{{{}}}", inner.join(","))
}

/// The change of one counter series between two scrapes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CounterDelta {
    /// Sample name, e.g. `vllm:prompt_tokens_total`.
    pub name: String,
    /// Labels of the series.
    pub labels: BTreeMap<String, String>,
    /// Increase over the interval; never negative.
    #[serde(with = "float_repr")]
    pub delta: f64,
    /// True when the counter went down (process restart), so `delta` is its `after` value.
    pub reset: bool,
}

/// The `after` value of one gauge series.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GaugeValue {
    /// Sample name.
    pub name: String,
    /// Labels of the series.
    pub labels: BTreeMap<String, String>,
    /// Value in the `after` scrape.
    #[serde(with = "float_repr")]
    pub value: f64,
}

/// The change of one histogram series (one label set, all buckets) between two scrapes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HistogramDelta {
    /// Family name, without `_bucket`.
    pub name: String,
    /// Labels of the series, without `le`.
    pub labels: BTreeMap<String, String>,
    /// Cumulative bucket count increases, ordered by upper bound.
    pub buckets: Vec<BucketDelta>,
    /// Increase of `_sum`.
    #[serde(with = "float_repr")]
    pub sum: f64,
    /// Increase of `_count`.
    #[serde(with = "float_repr")]
    pub count: f64,
    /// True when the histogram went backwards (process restart); values are the `after` ones.
    pub reset: bool,
}

/// One bucket of a [`HistogramDelta`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BucketDelta {
    /// Upper bound (`le`); `+Inf` for the last bucket.
    #[serde(with = "float_repr")]
    pub le: f64,
    /// Increase of the cumulative count.
    #[serde(with = "float_repr")]
    pub count: f64,
}

/// What changed between a scrape before and a scrape after a measurement.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MetricsDelta {
    /// Counter increases, including the `_sum`/`_count` of summaries.
    pub counters: Vec<CounterDelta>,
    /// Gauge (and untyped, and summary quantile) values from the `after` scrape.
    pub gauges: Vec<GaugeValue>,
    /// Histogram increases.
    pub histograms: Vec<HistogramDelta>,
    /// Series ids of counters and histograms that were reset during the interval.
    pub resets: Vec<String>,
}

impl MetricsDelta {
    /// Sum of the increases of all counter series named `name`; `None` when absent.
    pub fn counter(&self, name: &str) -> Option<f64> {
        let mut found = false;
        let mut total = 0.0;
        for c in self.counters.iter().filter(|c| c.name == name) {
            found = true;
            total += c.delta;
        }
        found.then_some(total)
    }

    /// Counter increases of series named `name`, summed per value of `label`.
    pub fn counter_by_label(&self, name: &str, label: &str) -> BTreeMap<String, f64> {
        let mut out = BTreeMap::new();
        for c in self.counters.iter().filter(|c| c.name == name) {
            if let Some(v) = c.labels.get(label) {
                *out.entry(v.clone()).or_insert(0.0) += c.delta;
            }
        }
        out
    }

    /// Sum of the `after` values of all gauge series named `name`; `None` when absent.
    pub fn gauge_sum(&self, name: &str) -> Option<f64> {
        let mut found = false;
        let mut total = 0.0;
        for g in self.gauges.iter().filter(|g| g.name == name) {
            found = true;
            total += g.value;
        }
        found.then_some(total)
    }

    /// Largest `after` value of the gauge series named `name`; `None` when absent.
    pub fn gauge_max(&self, name: &str) -> Option<f64> {
        self.gauges
            .iter()
            .filter(|g| g.name == name)
            .map(|g| g.value)
            .fold(None, |acc: Option<f64>, v| {
                Some(acc.map_or(v, |a| a.max(v)))
            })
    }

    /// True when any series named `name` was reset during the interval.
    pub fn was_reset(&self, name: &str) -> bool {
        self.counters.iter().any(|c| c.name == name && c.reset)
            || self.histograms.iter().any(|h| h.name == name && h.reset)
    }
}

/// Computes counter and histogram increases and the `after` gauge values.
///
/// Series that exist only in `after` are treated as having started from zero;
/// series that exist only in `before` are dropped (they no longer exist).
pub fn delta(before: &Scrape, after: &Scrape) -> MetricsDelta {
    let mut before_index: BTreeMap<String, f64> = BTreeMap::new();
    for family in before.families.values() {
        for s in &family.samples {
            before_index.insert(s.series_id(), s.value);
        }
    }

    let mut out = MetricsDelta::default();
    for family in after.families.values() {
        match family.metric_type {
            MetricType::Counter => {
                for s in &family.samples {
                    if s.name.ends_with("_created") {
                        continue;
                    }
                    push_counter(&mut out, s, before_index.get(&s.series_id()).copied());
                }
            }
            MetricType::Gauge | MetricType::Untyped => {
                for s in &family.samples {
                    out.gauges.push(GaugeValue {
                        name: s.name.clone(),
                        labels: s.labels.clone(),
                        value: s.value,
                    });
                }
            }
            MetricType::Summary => {
                for s in &family.samples {
                    if s.name.ends_with("_created") {
                        continue;
                    }
                    if s.name.ends_with("_sum") || s.name.ends_with("_count") {
                        push_counter(&mut out, s, before_index.get(&s.series_id()).copied());
                    } else {
                        out.gauges.push(GaugeValue {
                            name: s.name.clone(),
                            labels: s.labels.clone(),
                            value: s.value,
                        });
                    }
                }
            }
            MetricType::Histogram => {
                histogram_deltas(&mut out, family, &before_index);
            }
        }
    }
    out
}

fn push_counter(out: &mut MetricsDelta, s: &Sample, before: Option<f64>) {
    let prior = before.unwrap_or(0.0);
    let (delta, reset) = if s.value < prior {
        (s.value, true)
    } else {
        (s.value - prior, false)
    };
    if reset {
        out.resets.push(s.series_id());
    }
    out.counters.push(CounterDelta {
        name: s.name.clone(),
        labels: s.labels.clone(),
        delta,
        reset,
    });
}

fn histogram_deltas(out: &mut MetricsDelta, family: &MetricFamily, before: &BTreeMap<String, f64>) {
    struct Acc {
        buckets: Vec<(f64, f64, f64)>,
        sum: (f64, f64),
        count: (f64, f64),
    }
    let bucket_name = format!("{}_bucket", family.name);
    let sum_name = format!("{}_sum", family.name);
    let count_name = format!("{}_count", family.name);
    let mut series: BTreeMap<String, (BTreeMap<String, String>, Acc)> = BTreeMap::new();

    for s in &family.samples {
        let prior = before.get(&s.series_id()).copied().unwrap_or(0.0);
        let mut labels = s.labels.clone();
        let le = labels.remove("le");
        let key = series_id(&family.name, &labels);
        let entry = series.entry(key).or_insert_with(|| {
            (
                labels.clone(),
                Acc {
                    buckets: Vec::new(),
                    sum: (0.0, 0.0),
                    count: (0.0, 0.0),
                },
            )
        });
        if s.name == bucket_name {
            if let Some(bound) = le.as_deref().and_then(parse_value) {
                entry.1.buckets.push((bound, prior, s.value));
            }
        } else if s.name == sum_name {
            entry.1.sum = (prior, s.value);
        } else if s.name == count_name {
            entry.1.count = (prior, s.value);
        }
    }

    for (key, (labels, mut acc)) in series {
        acc.buckets
            .sort_by(|a, b| a.0.partial_cmp(&b.0).unwrap_or(std::cmp::Ordering::Equal));
        // A restart shows up as any cumulative value going down; then the whole
        // `after` histogram is the increase.
        let reset = acc.count.1 < acc.count.0 || acc.buckets.iter().any(|(_, b, a)| a < b);
        let pick = |prior: f64, now: f64| if reset { now } else { now - prior };
        if reset {
            out.resets.push(key);
        }
        out.histograms.push(HistogramDelta {
            name: family.name.clone(),
            labels,
            buckets: acc
                .buckets
                .iter()
                .map(|(le, b, a)| BucketDelta {
                    le: *le,
                    count: pick(*b, *a),
                })
                .collect(),
            sum: pick(acc.sum.0, acc.sum.1),
            count: pick(acc.count.0, acc.count.1),
            reset,
        });
    }
}

/// Serde helpers that keep NaN and infinities intact in JSON.
pub mod float_repr {
    use serde::{Deserialize, Deserializer, Serializer};

    /// Writes finite values as numbers and the rest as `"NaN"`, `"+Inf"`, `"-Inf"`.
    pub fn serialize<S: Serializer>(v: &f64, s: S) -> Result<S::Ok, S::Error> {
        if v.is_nan() {
            s.serialize_str("NaN")
        } else if *v == f64::INFINITY {
            s.serialize_str("+Inf")
        } else if *v == f64::NEG_INFINITY {
            s.serialize_str("-Inf")
        } else {
            s.serialize_f64(*v)
        }
    }

    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Repr {
        Num(f64),
        Text(String),
    }

    /// Reads what [`serialize`] writes.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
        match Repr::deserialize(d)? {
            Repr::Num(n) => Ok(n),
            Repr::Text(t) => match t.as_str() {
                "NaN" => Ok(f64::NAN),
                "+Inf" | "Inf" => Ok(f64::INFINITY),
                "-Inf" => Ok(f64::NEG_INFINITY),
                other => Err(serde::de::Error::custom(format!(
                    "expected a number, NaN, +Inf or -Inf, got {other:?}"
                ))),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASIC: &str = r#"# HELP http_requests_total The total number of HTTP requests.
# TYPE http_requests_total counter
http_requests_total{method="post",code="200"} 1027 1395066363000
http_requests_total{method="post",code="400"}    3 1395066363000

# Escaping in label values:
msdos_file_access_time_seconds{path="C:\\DIR\\FILE.TXT",error="Cannot find file:\n\"FILE.TXT\""} 1.458255915e9

# Minimalistic line:
metric_without_timestamp_and_labels 12.47

# A weird metric from before the epoch:
something_weird{problem="division by zero"} +Inf -3982045

# A histogram, which has a pretty complex representation in the text format:
# HELP http_request_duration_seconds A histogram of the request duration.
# TYPE http_request_duration_seconds histogram
http_request_duration_seconds_bucket{le="0.05"} 24054
http_request_duration_seconds_bucket{le="0.1"} 33444
http_request_duration_seconds_bucket{le="0.2"} 100392
http_request_duration_seconds_bucket{le="0.5"} 129389
http_request_duration_seconds_bucket{le="1"} 133988
http_request_duration_seconds_bucket{le="+Inf"} 144320
http_request_duration_seconds_sum 53423
http_request_duration_seconds_count 144320

# Finally a summary, which has a complex representation, too:
# HELP rpc_duration_seconds A summary of the RPC duration in seconds.
# TYPE rpc_duration_seconds summary
rpc_duration_seconds{quantile="0.01"} 3102
rpc_duration_seconds{quantile="0.05"} 3272
rpc_duration_seconds{quantile="0.5"} 4773
rpc_duration_seconds{quantile="0.9"} 9001
rpc_duration_seconds{quantile="0.99"} 76656
rpc_duration_seconds_sum 1.7560473e+07
rpc_duration_seconds_count 2693
"#;

    #[test]
    fn parses_the_format_reference_example() {
        let scrape = parse(BASIC).unwrap();
        let reqs = &scrape.families["http_requests_total"];
        assert_eq!(reqs.metric_type, MetricType::Counter);
        assert_eq!(reqs.samples.len(), 2);
        assert_eq!(reqs.samples[0].timestamp_ms, Some(1395066363000));
        assert_eq!(scrape.sum("http_requests_total"), Some(1030.0));

        let msdos = &scrape.families["msdos_file_access_time_seconds"];
        assert_eq!(msdos.metric_type, MetricType::Untyped);
        assert_eq!(msdos.samples[0].labels["path"], r"C:\DIR\FILE.TXT");
        assert_eq!(
            msdos.samples[0].labels["error"],
            "Cannot find file:\n\"FILE.TXT\""
        );

        let weird = &scrape.families["something_weird"].samples[0];
        assert_eq!(weird.value, f64::INFINITY);
        assert_eq!(weird.timestamp_ms, Some(-3982045));

        let hist = &scrape.families["http_request_duration_seconds"];
        assert_eq!(hist.metric_type, MetricType::Histogram);
        assert_eq!(hist.samples.len(), 8);

        let summary = &scrape.families["rpc_duration_seconds"];
        assert_eq!(summary.metric_type, MetricType::Summary);
        assert_eq!(summary.samples.len(), 7);
        assert_eq!(
            scrape.type_of("rpc_duration_seconds_count"),
            Some(MetricType::Summary)
        );
    }

    #[test]
    fn nan_values_and_crlf_are_accepted() {
        let scrape = parse("# TYPE g gauge\r\ng NaN\r\nh -Inf\r\n").unwrap();
        assert!(scrape.families["g"].samples[0].value.is_nan());
        assert_eq!(scrape.families["h"].samples[0].value, f64::NEG_INFINITY);
    }

    #[test]
    fn errors_name_the_line() {
        let cases = [
            ("ok 1\nbad{a=\"x} 1\n", 2),
            ("ok 1\n\n9metric 1\n", 3),
            ("m{a=\"x\"}\n", 1),
            ("m abc\n", 1),
            ("m 1 notatime\n", 1),
            ("# TYPE m wibble\n", 1),
            ("# TYPE m gauge\n# TYPE m counter\n", 2),
            ("m{a=\"\\q\"} 1\n", 1),
            ("m{a=\"x\",a=\"y\"} 1\n", 1),
            ("m{a=x} 1\n", 1),
            ("m 1 2 3\n", 1),
            ("m{a=\"x\"b=\"y\"} 1\n", 1),
        ];
        for (text, line) in cases {
            let e = parse(text).expect_err(text);
            assert_eq!(e.line, line, "{text:?}: {e}");
            assert!(e.to_string().starts_with(&format!("line {line}:")));
        }
    }

    #[test]
    fn trailing_comma_and_spaces_in_labels() {
        let s = parse("m{ a = \"1\" , b=\"2\", } 5\n").unwrap();
        let sample = &s.families["m"].samples[0];
        assert_eq!(sample.labels.len(), 2);
        assert_eq!(sample.series_id(), "m{a=\"1\",b=\"2\"}");
    }

    #[test]
    fn arbitrary_bytes_never_panic() {
        let inputs = [
            "{",
            "}",
            "m{",
            "m{a",
            "m{a=",
            "m{a=\"",
            "m{a=\"\\",
            "#",
            "# TYPE",
            "# HELP",
            "# HELP m",
            "\u{0}",
            "m{é=\"x\"} 1",
            "m \u{1F600}",
            "m{a=\"\u{1F600}\"} 1",
            "m 1e999",
            "m -",
            "m .",
            "m{}1",
        ];
        for input in inputs {
            let _ = parse(input);
        }
        assert_eq!(
            parse("m 1e999").unwrap().families["m"].samples[0].value,
            f64::INFINITY
        );
    }

    #[test]
    fn counter_delta_and_reset() {
        let before = parse("# TYPE c_total counter\nc_total{x=\"a\"} 10\nc_total{x=\"b\"} 50\n# TYPE g gauge\ng 3\n").unwrap();
        let after = parse("# TYPE c_total counter\nc_total{x=\"a\"} 15\nc_total{x=\"b\"} 7\nc_total{x=\"c\"} 2\n# TYPE g gauge\ng 9\n").unwrap();
        let d = delta(&before, &after);
        assert_eq!(d.counter("c_total"), Some(5.0 + 7.0 + 2.0));
        let by = d.counter_by_label("c_total", "x");
        assert_eq!(by["a"], 5.0);
        assert_eq!(by["b"], 7.0);
        assert_eq!(by["c"], 2.0);
        assert!(d.was_reset("c_total"));
        assert_eq!(d.resets, vec!["c_total{x=\"b\"}".to_string()]);
        assert!(d.counters.iter().all(|c| c.delta >= 0.0));
        assert_eq!(d.gauge_sum("g"), Some(9.0));
        assert_eq!(d.counter("missing"), None);
    }

    #[test]
    fn histogram_delta() {
        let before = parse(
            "# TYPE h histogram\nh_bucket{le=\"1\"} 2\nh_bucket{le=\"+Inf\"} 3\nh_sum 4.5\nh_count 3\n",
        )
        .unwrap();
        let after = parse(
            "# TYPE h histogram\nh_bucket{le=\"+Inf\"} 10\nh_bucket{le=\"1\"} 6\nh_sum 20\nh_count 10\n",
        )
        .unwrap();
        let d = delta(&before, &after);
        assert_eq!(d.histograms.len(), 1);
        let h = &d.histograms[0];
        assert!(!h.reset);
        assert_eq!(h.count, 7.0);
        assert_eq!(h.sum, 15.5);
        assert_eq!(h.buckets[0].le, 1.0);
        assert_eq!(h.buckets[0].count, 4.0);
        assert_eq!(h.buckets[1].le, f64::INFINITY);
        assert_eq!(h.buckets[1].count, 7.0);

        let restarted = delta(&after, &before);
        assert!(restarted.histograms[0].reset);
        assert_eq!(restarted.histograms[0].count, 3.0);
        assert_eq!(restarted.resets, vec!["h".to_string()]);
    }

    #[test]
    fn summary_delta_keeps_quantiles_as_gauges() {
        let before =
            parse("# TYPE s summary\ns{quantile=\"0.5\"} 1\ns_sum 10\ns_count 4\n").unwrap();
        let after =
            parse("# TYPE s summary\ns{quantile=\"0.5\"} 2\ns_sum 16\ns_count 6\n").unwrap();
        let d = delta(&before, &after);
        assert_eq!(d.counter("s_sum"), Some(6.0));
        assert_eq!(d.counter("s_count"), Some(2.0));
        assert_eq!(d.gauge_sum("s"), Some(2.0));
    }

    #[test]
    fn json_round_trip_keeps_non_finite_values() {
        let scrape = parse("a NaN\nb +Inf\nc -Inf\nd 1.5\n").unwrap();
        let json = serde_json::to_string(&scrape).unwrap();
        assert!(json.contains("\"NaN\"") && json.contains("\"+Inf\"") && json.contains("\"-Inf\""));
        assert!(json.contains("\"metric_type\":\"untyped\""));
        let back: Scrape = serde_json::from_str(&json).unwrap();
        assert!(back.families["a"].samples[0].value.is_nan());
        assert_eq!(back.families["b"].samples[0].value, f64::INFINITY);
        assert_eq!(back.families["d"].samples[0].value, 1.5);
    }
}
