//! Parser messages in the campaign's own words: an unknown key names the
//! key that was meant, and a wrong type says what to write instead of
//! naming Rust types (`expected u64`).

use std::sync::LazyLock;

use regex::Regex;

use crate::util::suggest::did_you_mean;

/// `message` from the TOML and serde parsers, rewritten for a user.
pub fn plain(message: &str) -> String {
    unknown_name(message)
        .or_else(|| wrong_type(message))
        .or_else(|| missing_key(message))
        .unwrap_or_else(|| message.to_string())
}

/// `unknown field|variant `x`, expected one of `a`, `b`` (or `expected `a``).
fn unknown_name(message: &str) -> Option<String> {
    static RE: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r"^unknown (field|variant) `([^`]*)`, expected (?:one of )?(.*)$")
            .expect("valid")
    });
    let caps = RE.captures(message.trim())?;
    let what = if &caps[1] == "field" { "key" } else { "value" };
    let given = &caps[2];
    let list = caps[3].replace(" or ", ", ");
    let allowed: Vec<&str> = list
        .split(", ")
        .map(|a| a.trim().trim_start_matches("or ").trim_matches('`'))
        .filter(|a| !a.is_empty())
        .collect();
    Some(match did_you_mean(given, allowed.iter().copied()) {
        Some(near) => format!("unknown {what} `{given}`: did you mean `{near}`?"),
        None => format!("unknown {what} `{given}`; allowed: {}", allowed.join(", ")),
    })
}

/// `missing field `model`` (a table or key the campaign must have).
fn missing_key(message: &str) -> Option<String> {
    let name = message
        .trim()
        .strip_prefix("missing field `")?
        .strip_suffix('`')?;
    Some(format!("missing key `{name}`: this table needs it"))
}

/// `invalid type: string "16", expected u64`, and the same for `invalid value`.
fn wrong_type(message: &str) -> Option<String> {
    static RE: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r"^invalid (?:type|value): (.*), expected (.*)$").expect("valid")
    });
    let caps = RE.captures(message.trim())?;
    let (found, expected) = (&caps[1], &caps[2]);
    let wanted = expected_words(expected);
    let mut out = format!("expected {wanted}, found {}", found_words(found));
    // A number written as text: say how to write it.
    if let Some(text) = found
        .strip_prefix("string \"")
        .and_then(|f| f.strip_suffix('"'))
    {
        if wanted.contains("number") && text.parse::<f64>().is_ok() {
            out.push_str(&format!(" (write it without quotes: {text})"));
        }
    }
    Some(out)
}

/// The parser's name of an expected type, in words.
fn expected_words(expected: &str) -> String {
    match expected {
        "u8" | "u16" | "u32" | "u64" | "usize" => "a whole number of 0 or more".into(),
        "i8" | "i16" | "i32" | "i64" | "isize" => "a whole number".into(),
        "f32" | "f64" => "a number".into(),
        "a boolean" | "bool" => "true or false".into(),
        "a sequence" => "a list, e.g. [1, 2]".into(),
        "a map" => "a table".into(),
        e if e.starts_with("struct ") => "a table".into(),
        e => e.to_string(),
    }
}

/// The parser's description of what was found, in words.
fn found_words(found: &str) -> String {
    if let Some(text) = found.strip_prefix("string ") {
        return format!("the text {text}");
    }
    for (prefix, words) in [
        ("integer ", "the number "),
        ("floating point ", "the number "),
        ("boolean ", ""),
    ] {
        if let Some(v) = found.strip_prefix(prefix) {
            return format!("{words}{}", v.trim_matches('`'));
        }
    }
    match found {
        "sequence" => "a list".into(),
        "map" => "a table".into(),
        f => f.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parser_messages_read_as_the_campaign_speaks() {
        assert_eq!(
            plain("unknown field `num_request`, expected one of `name`, `num_requests`, `concurrency`"),
            "unknown key `num_request`: did you mean `num_requests`?"
        );
        assert_eq!(
            plain("unknown field `zzz`, expected `name` or `path`"),
            "unknown key `zzz`; allowed: name, path"
        );
        assert_eq!(
            plain("unknown variant `vlm`, expected one of `sim`, `vllm`, `sglang`"),
            "unknown value `vlm`: did you mean `vllm`?"
        );
        assert_eq!(
            plain("invalid type: string \"16\", expected u64"),
            "expected a whole number of 0 or more, found the text \"16\" (write it without quotes: 16)"
        );
        assert_eq!(
            plain("invalid type: integer `3`, expected a boolean"),
            "expected true or false, found the number 3"
        );
        assert_eq!(
            plain("missing field `path`"),
            "missing key `path`: this table needs it"
        );
        assert_eq!(plain("something else"), "something else");
    }
}
