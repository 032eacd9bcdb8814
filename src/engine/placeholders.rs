//! `{name}` placeholders in server flags, environment values and `command`
//! executables.
//!
//! A placeholder is `{` + a lowercase identifier + `}`. Everything else with
//! braces stays as written, so JSON values such as
//! `--speculative-config {"method": "ngram"}` and environment references
//! `${VAR}` are never taken for placeholders.
//!
//! Two kinds are filled at two moments: the server's own settings
//! ([`SERVER`]) when the campaign is resolved, so they are part of every
//! cell's identity, and the address ([`LAUNCH`]) when the server starts,
//! because the port is chosen then.

/// Placeholders filled from a server config when the campaign is resolved.
pub const SERVER: &[&str] = &[
    "id",
    "tp",
    "dp",
    "dp_attention",
    "ep",
    "pp",
    "method",
    "budget",
    "mem_fraction",
    "max_running_requests",
    "context_length",
    "build",
    "grammar_backend",
    "tool_call_parser",
];

/// Placeholders filled when the server is launched.
pub const LAUNCH: &[&str] = &["host", "port", "model", "served_model_name"];

/// Whether `name` is a placeholder servebench fills.
pub fn is_known(name: &str) -> bool {
    SERVER.contains(&name) || LAUNCH.contains(&name)
}

/// The list of known placeholders, for error messages.
pub fn known_list() -> String {
    SERVER
        .iter()
        .chain(LAUNCH)
        .map(|n| format!("{{{n}}}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// One placeholder found in a text: its name and byte range (braces included).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found<'a> {
    /// The name between the braces.
    pub name: &'a str,
    /// Byte range of `{name}` in the text.
    pub range: std::ops::Range<usize>,
}

/// Every placeholder in `text`, in order.
pub fn find(text: &str) -> Vec<Found<'_>> {
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while let Some(off) = text[i..].find('{') {
        let open = i + off;
        i = open + 1;
        // `${VAR}` is an environment reference, expanded elsewhere.
        if open > 0 && bytes[open - 1] == b'$' {
            continue;
        }
        let Some(len) = text[open + 1..].find('}') else {
            break;
        };
        let name = &text[open + 1..open + 1 + len];
        let ident = name
            .bytes()
            .next()
            .is_some_and(|b| b.is_ascii_lowercase() || b == b'_')
            && name
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
        if ident {
            out.push(Found {
                name,
                range: open..open + len + 2,
            });
            i = open + len + 2;
        }
    }
    out
}

/// `text` with every placeholder for which `value` gives a value replaced;
/// the others stay as written.
pub fn fill(text: &str, value: impl Fn(&str) -> Option<String>) -> String {
    let mut out = String::with_capacity(text.len());
    let mut last = 0;
    for f in find(text) {
        if let Some(v) = value(f.name) {
            out.push_str(&text[last..f.range.start]);
            out.push_str(&v);
            last = f.range.end;
        }
    }
    out.push_str(&text[last..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(t: &str) -> Vec<&str> {
        find(t).into_iter().map(|f| f.name).collect()
    }

    #[test]
    fn only_lowercase_identifiers_in_braces_are_placeholders() {
        assert_eq!(names("--budget {budget}"), ["budget"]);
        assert_eq!(
            names("{id}-{tp}x{max_running_requests}"),
            ["id", "tp", "max_running_requests"]
        );
        // JSON, environment references, empty and odd braces stay text.
        assert!(names(r#"{"method": "ngram", "n": 4}"#).is_empty());
        assert!(names("${HOME}/x ${TP:-1}").is_empty());
        assert!(names("{} {Budget} {1x} {a-b} {").is_empty());
        assert_eq!(names(r#"{"k": "{port}"}"#), ["port"]);
    }

    #[test]
    fn fill_replaces_what_has_a_value_and_keeps_the_rest() {
        let v = |n: &str| match n {
            "tp" => Some("4".to_string()),
            "budget" => Some("16".to_string()),
            _ => None,
        };
        assert_eq!(fill("tp{tp}-b{budget}", v), "tp4-b16");
        assert_eq!(fill("{port}:{tp} ${X}", v), "{port}:4 ${X}");
        assert_eq!(fill(r#"{"a": {tp}}"#, v), r#"{"a": 4}"#);
    }

    #[test]
    fn the_known_set_covers_server_and_launch_values() {
        for n in ["id", "tp", "budget", "method", "port", "host"] {
            assert!(is_known(n), "{n}");
        }
        assert!(!is_known("gpu"));
        assert!(known_list().contains("{budget}"));
    }
}
