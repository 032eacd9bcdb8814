//! `--only` filters: `tp=1`, `server=ddtree-*`, `workload=context`,
//! `method=eagle`, `budget=16`, `output_len=256`, `concurrency=8`. Values
//! may use `*` and `?` wildcards; all filters must match.

use crate::campaign::{ServerConfig, WorkloadPoint};
use crate::load::schedule::LoadShape;

/// Keys a filter may name.
pub const KEYS: &[&str] = &[
    "server",
    "tp",
    "dp",
    "dp_attention",
    "ep",
    "pp",
    "layout",
    "method",
    "budget",
    "mem_fraction",
    "max_running_requests",
    "context_length",
    "build",
    "workload",
    "input_len",
    "output_len",
    "concurrency",
    "rate",
    "cell",
];

/// One `key=pattern` filter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Filter {
    key: String,
    pattern: String,
}

impl std::str::FromStr for Filter {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let (k, v) = s
            .split_once('=')
            .ok_or_else(|| format!("filter `{s}` is not KEY=VALUE; keys: {}", KEYS.join(", ")))?;
        let key = k.trim().to_string();
        if !KEYS.contains(&key.as_str()) {
            return Err(format!(
                "unknown filter key `{key}`; keys: {}",
                KEYS.join(", ")
            ));
        }
        Ok(Filter {
            key,
            pattern: v.trim().to_string(),
        })
    }
}

/// Parse a comma-separated list of filters.
pub fn parse_filters(items: &[String]) -> Result<Vec<Filter>, String> {
    items
        .iter()
        .flat_map(|s| s.split(','))
        .filter(|s| !s.trim().is_empty())
        .map(str::parse)
        .collect()
}

impl Filter {
    /// Whether the cell (server × workload point) passes this filter.
    pub fn matches(&self, s: &ServerConfig, w: &WorkloadPoint) -> bool {
        let value = match self.key.as_str() {
            "workload" => Some(w.workload.clone()),
            "input_len" => Some(w.input_len.to_string()),
            "output_len" => Some(w.output_len.to_string()),
            "concurrency" => match w.load {
                LoadShape::Concurrency { value } => Some(value.to_string()),
                _ => None,
            },
            "rate" => match w.load {
                LoadShape::Rate { value, .. } => Some(value.to_string()),
                _ => None,
            },
            "cell" => Some(w.cell_name()),
            key => s.param(key),
        };
        value.is_some_and(|v| glob(&self.pattern, &v))
    }
}

/// Match `text` against a pattern with `*` (any run) and `?` (one character).
pub fn glob(pattern: &str, text: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let t: Vec<char> = text.chars().collect();
    let (mut pi, mut ti) = (0, 0);
    let (mut star, mut mark) = (None, 0);
    while ti < t.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == t[ti]) {
            pi += 1;
            ti += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some(pi);
            mark = ti;
            pi += 1;
        } else if let Some(sp) = star {
            pi = sp + 1;
            mark += 1;
            ti = mark;
        } else {
            return false;
        }
    }
    while pi < p.len() && p[pi] == '*' {
        pi += 1;
    }
    pi == p.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_match_prefixes_suffixes_and_single_chars() {
        assert!(glob("ddtree-*", "ddtree-tp4-b16"));
        assert!(glob("*-b16", "ddtree-tp4-b16"));
        assert!(glob("tp?", "tp4"));
        assert!(!glob("tp?", "tp16"));
        assert!(glob("*", ""));
        assert!(!glob("a*b", "acbd"));
    }

    #[test]
    fn filters_reject_unknown_keys_and_need_key_value() {
        assert!("gpu=1".parse::<Filter>().unwrap_err().contains("keys:"));
        assert!("tp".parse::<Filter>().is_err());
        assert_eq!(
            parse_filters(&["tp=1,workload=ctx*".into()]).unwrap().len(),
            2
        );
    }
}
