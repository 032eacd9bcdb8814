//! Secrets: API keys, tokens and passwords that reach servebench through the
//! environment, engine flags or URLs, and must never be written anywhere.
//!
//! Two mechanisms work together. Structural redaction replaces the values
//! servebench knows to be secret (credential-like environment variables,
//! the values of flags such as `--api-key`, the `user:pass@` of a URL) with
//! a fixed placeholder before a setting is hashed into a cell identity or
//! stored, so rotating a key changes nothing stored. The process-wide
//! registry is the last line: every value registered here is scrubbed from
//! the bytes of each file servebench writes, whatever path it took there
//! (an engine echoing its own command line into its log, say).

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::RwLock;

/// What a secret value is replaced with in everything servebench writes.
pub const REDACTED: &str = "<redacted>";

/// Values shorter than this are never registered: scrubbing `1` or `on`
/// from every file would destroy the numbers, and such values protect nothing.
const MIN_SECRET_LEN: usize = 6;

/// Engine flags whose value is a credential (vLLM `--api-key`, SGLang
/// `--api-key`, llama.cpp `--api-key`, Hugging Face tokens).
pub const SECRET_FLAGS: &[&str] = &[
    "--api-key",
    "--api-keys",
    "--admin-api-key",
    "--hf-token",
    "--token",
    "--password",
];

static REGISTRY: RwLock<Vec<String>> = RwLock::new(Vec::new());

/// Remember `value` as a secret so it is scrubbed from every file written.
pub fn register(value: &str) {
    if value.len() < MIN_SECRET_LEN {
        return;
    }
    let mut forms = vec![value.to_string()];
    // The same value as it appears inside a JSON string.
    let json = serde_json::to_string(value).unwrap_or_default();
    let json = json.trim_matches('"');
    if json != value {
        forms.push(json.to_string());
    }
    let mut reg = REGISTRY.write().unwrap_or_else(|p| p.into_inner());
    for f in forms {
        if !reg.contains(&f) {
            reg.push(f);
        }
    }
    // Longest first, so a secret containing another is replaced whole.
    reg.sort_by_key(|s| std::cmp::Reverse(s.len()));
}

/// `text` with every registered secret replaced by [`REDACTED`].
pub fn scrub_str(text: &str) -> Cow<'_, str> {
    let reg = REGISTRY.read().unwrap_or_else(|p| p.into_inner());
    if !reg.iter().any(|s| text.contains(s.as_str())) {
        return Cow::Borrowed(text);
    }
    let mut out = text.to_string();
    for s in reg.iter() {
        out = out.replace(s.as_str(), REDACTED);
    }
    Cow::Owned(out)
}

/// `bytes` with every registered secret replaced by [`REDACTED`].
pub fn scrub_bytes(bytes: &[u8]) -> Cow<'_, [u8]> {
    let reg = REGISTRY.read().unwrap_or_else(|p| p.into_inner());
    if !reg
        .iter()
        .any(|s| memchr::memmem::find(bytes, s.as_bytes()).is_some())
    {
        return Cow::Borrowed(bytes);
    }
    let mut out = bytes.to_vec();
    for s in reg.iter() {
        out = replace_bytes(&out, s.as_bytes(), REDACTED.as_bytes());
    }
    Cow::Owned(out)
}

/// Rewrite `path` without the registered secrets, if it holds any.
pub fn scrub_file(path: &std::path::Path) -> std::io::Result<()> {
    if REGISTRY
        .read()
        .unwrap_or_else(|p| p.into_inner())
        .is_empty()
    {
        return Ok(());
    }
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    };
    match scrub_bytes(&bytes) {
        Cow::Borrowed(_) => Ok(()),
        Cow::Owned(clean) => super::fsx::write_atomic(path, &clean),
    }
}

fn replace_bytes(hay: &[u8], needle: &[u8], with: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(hay.len());
    let mut rest = hay;
    while let Some(i) = memchr::memmem::find(rest, needle) {
        out.extend_from_slice(&rest[..i]);
        out.extend_from_slice(with);
        rest = &rest[i + needle.len()..];
    }
    out.extend_from_slice(rest);
    out
}

/// Whether an environment variable's name says it holds a credential.
pub fn is_secret_name(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    ["KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL"]
        .iter()
        .any(|w| upper.contains(w))
        // Settings that merely mention keys, not credentials.
        && !upper.contains("KEYBOARD")
        && !upper.contains("KV_CACHE")
}

/// Whether a value has the shape of a well-known credential.
pub fn looks_like_secret_value(value: &str) -> bool {
    const PREFIXES: &[&str] = &["sk-", "hf_", "ghp_", "gho_", "github_pat_", "xoxb-", "AKIA"];
    value.len() >= 12 && PREFIXES.iter().any(|p| value.starts_with(p))
}

/// Whether `name=value` is secret: declared in `declared`, or credential-like.
pub fn is_secret_env(name: &str, value: &str, declared: &[String]) -> bool {
    declared.iter().any(|d| d == name) || is_secret_name(name) || looks_like_secret_value(value)
}

/// The secret values of an environment map (see [`is_secret_env`]).
pub fn env_secrets(env: &BTreeMap<String, String>, declared: &[String]) -> Vec<String> {
    env.iter()
        .filter(|(k, v)| is_secret_env(k, v, declared))
        .map(|(_, v)| v.clone())
        .collect()
}

/// The environment with secret values replaced by [`REDACTED`].
pub fn redact_env(env: &BTreeMap<String, String>, declared: &[String]) -> BTreeMap<String, String> {
    env.iter()
        .map(|(k, v)| {
            let v = if is_secret_env(k, v, declared) {
                REDACTED.to_string()
            } else {
                v.clone()
            };
            (k.clone(), v)
        })
        .collect()
}

/// The values of secret flags in an argv (`--api-key K` and `--api-key=K`).
pub fn argv_secrets(argv: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    let mut take_next = false;
    for a in argv {
        if take_next {
            out.push(a.clone());
            take_next = false;
            continue;
        }
        if SECRET_FLAGS.contains(&a.as_str()) {
            take_next = true;
        } else if let Some((flag, value)) = a.split_once('=') {
            if SECRET_FLAGS.contains(&flag) {
                out.push(value.to_string());
            }
        } else if looks_like_secret_value(a) {
            out.push(a.clone());
        }
    }
    out
}

/// An argv with the values of secret flags replaced by [`REDACTED`].
pub fn redact_argv(argv: &[String]) -> Vec<String> {
    let secrets = argv_secrets(argv);
    let mut out = Vec::with_capacity(argv.len());
    let mut redact_next = false;
    for a in argv {
        if redact_next {
            out.push(REDACTED.to_string());
            redact_next = false;
            continue;
        }
        if SECRET_FLAGS.contains(&a.as_str()) {
            redact_next = true;
            out.push(a.clone());
        } else if let Some((flag, _)) = a.split_once('=').filter(|(f, _)| SECRET_FLAGS.contains(f))
        {
            out.push(format!("{flag}={REDACTED}"));
        } else if secrets.contains(a) {
            out.push(REDACTED.to_string());
        } else {
            out.push(a.clone());
        }
    }
    out
}

/// The API key to send: given directly, or read from the variable named by
/// `env_name`; an unset or empty variable is an error naming it.
pub fn api_key(direct: Option<&str>, env_name: Option<&str>) -> Result<Option<String>, String> {
    if let Some(k) = direct {
        return Ok(Some(k.to_string()));
    }
    let Some(name) = env_name else {
        return Ok(None);
    };
    match std::env::var(name) {
        Ok(v) if !v.is_empty() => Ok(Some(v)),
        _ => Err(format!(
            "the API key variable `{name}` is unset or empty; export it (`export {name}=...`) or drop the setting"
        )),
    }
}

/// A URL split into the URL without `user:pass@` and the userinfo it had.
pub fn split_userinfo(url: &str) -> (String, Option<String>) {
    let Some((scheme, rest)) = url.split_once("://") else {
        return (url.to_string(), None);
    };
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(authority_end);
    match authority.rsplit_once('@') {
        Some((userinfo, host)) => (
            format!("{scheme}://{host}{tail}"),
            Some(userinfo.to_string()),
        ),
        None => (url.to_string(), None),
    }
}

/// A URL without its `user:pass@` (for anything stored or shown).
pub fn strip_userinfo(url: &str) -> String {
    split_userinfo(url).0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn secret_flag_values_are_redacted_in_both_spellings_and_nothing_else() {
        let argv = s(&[
            "vllm",
            "serve",
            "m",
            "--api-key",
            "abc123xyz",
            "--port",
            "8000",
            "--hf-token=hf_abcdefghijkl",
        ]);
        assert_eq!(
            redact_argv(&argv),
            s(&[
                "vllm",
                "serve",
                "m",
                "--api-key",
                REDACTED,
                "--port",
                "8000",
                "--hf-token=<redacted>"
            ])
        );
        assert_eq!(argv_secrets(&argv), s(&["abc123xyz", "hf_abcdefghijkl"]));
    }

    #[test]
    fn credential_like_env_is_redacted_and_settings_are_kept() {
        let env: BTreeMap<String, String> = [
            ("HF_TOKEN", "t0ken-value"),
            ("OPENAI_API_KEY", "whatever1"),
            ("CUDA_VISIBLE_DEVICES", "0,1"),
            ("SGLANG_KV_CACHE_DTYPE", "fp8"),
            ("MY_VAR", "sk-abcdefghijklmnop"),
            ("DECLARED", "plainvalue"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        let red = redact_env(&env, &["DECLARED".to_string()]);
        assert_eq!(red["HF_TOKEN"], REDACTED);
        assert_eq!(red["OPENAI_API_KEY"], REDACTED);
        assert_eq!(red["MY_VAR"], REDACTED);
        assert_eq!(red["DECLARED"], REDACTED);
        assert_eq!(red["CUDA_VISIBLE_DEVICES"], "0,1");
        assert_eq!(red["SGLANG_KV_CACHE_DTYPE"], "fp8");
    }

    #[test]
    fn userinfo_is_split_off_the_authority_only() {
        assert_eq!(
            split_userinfo("http://u:p%40ss@127.0.0.1:8000/v1?x=a@b"),
            (
                "http://127.0.0.1:8000/v1?x=a@b".to_string(),
                Some("u:p%40ss".to_string())
            )
        );
        assert_eq!(
            split_userinfo("http://127.0.0.1:8000/a@b"),
            ("http://127.0.0.1:8000/a@b".to_string(), None)
        );
    }

    #[test]
    fn registered_secrets_are_scrubbed_from_text_and_json_escapes() {
        register("zz-secret\"quoted-1");
        register("ab"); // too short to register
        let text = r#"{"k":"zz-secret\"quoted-1","n":"ab"}"#;
        assert_eq!(scrub_str(text), format!(r#"{{"k":"{REDACTED}","n":"ab"}}"#));
        assert_eq!(
            scrub_bytes(b"x zz-secret\"quoted-1 y").as_ref(),
            format!("x {REDACTED} y").as_bytes()
        );
    }
}
