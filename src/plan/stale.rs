//! Why a result stored at a cell's place no longer counts for it: what
//! differs between the settings and input files it was measured with and
//! the campaign's now, in the words `plan` shows beside the cell.

use serde_json::Value;

use crate::campaign::{Campaign, ServerConfig, WorkloadPoint};
use crate::store::identity::METHOD_VERSION;
use crate::store::StoredCell;

/// Settings named per change before the rest are counted.
const NAMED: usize = 3;

/// What changed since `stored` was measured, most telling first; empty
/// when nothing it records differs (a twin's cells, an older layout).
pub fn reason(
    stored: &StoredCell,
    c: &Campaign,
    server: &ServerConfig,
    workload: &WorkloadPoint,
) -> String {
    let mut parts = Vec::new();
    if stored.method_version != METHOD_VERSION {
        parts.push(format!(
            "measurement method {} → {METHOD_VERSION}",
            stored.method_version
        ));
    }
    let now = serde_json::to_value(workload).expect("workload serializes");
    if let Some(then) = &stored.workload {
        if let Some(file) = file_changed(then.get("source"), now.get("source")) {
            parts.push(file);
        }
        let changed = differences(then, &now, &["source"]);
        if !changed.is_empty() {
            parts.push(format!("workload {changed}"));
        }
    }
    let then_server = stored
        .server
        .clone()
        .and_then(|v| serde_json::from_value::<ServerConfig>(v).ok());
    if let Some(then) = then_server {
        let changed = differences(&then.settings(), &server.settings(), &[]);
        if !changed.is_empty() {
            parts.push(format!("server {changed}"));
        }
    }
    let engine = serde_json::to_value(&c.engine).expect("engine serializes");
    if let Some(then) = stored.engine.as_ref().filter(|e| **e != engine) {
        let changed = differences(then, &engine, &[]);
        parts.push(if changed.is_empty() {
            "engine settings changed".into()
        } else {
            format!("engine {changed}")
        });
    }
    if let Some(then) = &stored.model {
        let now = serde_json::to_value(&c.model).expect("model serializes");
        // Cells stored before the digests were kept hold none: a change
        // is told only between two digests, or from none to one.
        if let (Some(a), Some(b)) = (then.get("config_digest"), now.get("config_digest")) {
            if a != b {
                parts.push("model config file changed".into());
            }
        }
        match (then.get("tokenizer_digest"), now.get("tokenizer_digest")) {
            (Some(a), Some(b)) if a != b => parts.push("tokenizer file changed".into()),
            (None, Some(_)) => parts.push("tokenizer file's content now in the identity".into()),
            _ => {}
        }
        if then.get("path") != now.get("path") || then.get("served_name") != now.get("served_name")
        {
            parts.push("model changed".into());
        }
    }
    if stored.prefix_cache_reset.is_some() != c.run.reset_prefix_cache {
        parts.push(format!(
            "reset_prefix_cache turned {}",
            if c.run.reset_prefix_cache {
                "on"
            } else {
                "off"
            }
        ));
    }
    parts.join("; ")
}

/// "scenario file changed" (dataset, checks, trace) when the two sources
/// are the same file by name and differ only in its content's digest.
fn file_changed(then: Option<&Value>, now: Option<&Value>) -> Option<String> {
    let (then, now) = (then?.as_object()?, now?.as_object()?);
    if then.get("digest") == now.get("digest") {
        return None;
    }
    let same_apart_from_digest = then
        .iter()
        .chain(now.iter())
        .all(|(k, _)| k == "digest" || then.get(k) == now.get(k));
    if !same_apart_from_digest {
        return None;
    }
    let what = match now.get("kind").and_then(Value::as_str)? {
        "checks" => "checks",
        "trace" => "trace",
        "dataset" => "dataset",
        "scenario" => "scenario",
        _ => return None,
    };
    Some(if then.get("digest").is_none_or(|d| d == "") {
        format!("{what} file's content now in the identity")
    } else {
        format!("{what} file changed")
    })
}

/// The top-level keys whose values differ, as `key a → b` (scalars) or
/// `key` (anything else), the first few named and the rest counted.
fn differences(then: &Value, now: &Value, skip: &[&str]) -> String {
    let (Some(then), Some(now)) = (then.as_object(), now.as_object()) else {
        return String::new();
    };
    let mut keys: Vec<&String> = then.keys().chain(now.keys()).collect();
    keys.sort();
    keys.dedup();
    let changed: Vec<String> = keys
        .into_iter()
        .filter(|k| !skip.contains(&k.as_str()) && then.get(*k) != now.get(*k))
        .map(|k| match (then.get(k), now.get(k)) {
            (Some(Value::Array(a)), Some(Value::Array(b))) => {
                let (a, b) = changed_part(a, b);
                format!("{k} {a} → {b}")
            }
            (a, b) => {
                let shown = |v: Option<&Value>| v.map_or_else(|| "(none)".to_string(), short);
                format!("{k} {} → {}", shown(a), shown(b))
            }
        })
        .collect();
    match changed.len() {
        0 => String::new(),
        n if n <= NAMED => changed.join(", "),
        n => format!("{} and {} more", changed[..NAMED].join(", "), n - NAMED),
    }
}

/// Two lists as the part that differs, what both share before and after
/// it written `…`: `[…, --x, 1]` → `[…, --x, 2]`.
fn changed_part(a: &[Value], b: &[Value]) -> (String, String) {
    let prefix = a.iter().zip(b).take_while(|(x, y)| x == y).count();
    let room = a.len().min(b.len()) - prefix;
    let suffix = a
        .iter()
        .rev()
        .zip(b.iter().rev())
        .take(room)
        .take_while(|(x, y)| x == y)
        .count();
    let show = |v: &[Value]| {
        let middle = &v[prefix..v.len() - suffix];
        let mut items: Vec<String> = middle.iter().map(item).collect();
        if prefix > 0 {
            items.insert(0, "…".into());
        }
        if suffix > 0 {
            items.push("…".into());
        }
        crate::failure::truncate(&format!("[{}]", items.join(", ")), 80)
    };
    (show(a), show(b))
}

/// A list item as typed: strings bare, anything else as JSON writes it.
fn item(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// A value as short text: scalars as JSON writes them, a list of them as
/// `[a, b]` with strings bare (a command line's flags read as typed), and
/// anything longer cut at 80 characters.
fn short(v: &Value) -> String {
    let text = match v {
        Value::Array(items) => {
            let items: Vec<String> = items.iter().map(item).collect();
            format!("[{}]", items.join(", "))
        }
        other => other.to_string(),
    };
    crate::failure::truncate(&text, 80)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_changed_list_shows_the_part_that_changed() {
        let list = |s: &str| -> Vec<Value> { s.split(" ").map(Value::from).collect() };
        let (a, b) = changed_part(&list("--tp 2 --x 1 --y 3"), &list("--tp 2 --x 2 --y 3"));
        assert_eq!((a.as_str(), b.as_str()), ("[…, 1, …]", "[…, 2, …]"));
        let (a, b) = changed_part(&list("--a"), &list("--b"));
        assert_eq!((a.as_str(), b.as_str()), ("[--a]", "[--b]"));
        // Repeated items are not counted twice as both prefix and suffix.
        let (a, b) = changed_part(&list("x x"), &list("x x x"));
        assert_eq!((a.as_str(), b.as_str()), ("[…]", "[…, x]"));
    }
}
