//! Cell identity: a stable hash of every setting that can change a number.
//!
//! The input is canonical JSON (object keys sorted at every level), so key
//! order in the campaign file, comments and the server's id do not matter,
//! while any value that reaches the engine or the load generator does, and
//! so does the content of every file a workload reads (its digest).

use serde::Serialize;

use crate::campaign::resolve::EngineSpec;
use crate::campaign::{Campaign, ServerConfig, WorkloadPoint};

/// Version of the measurement method; bump when a change alters numbers.
///
/// 2: seeded draws (prompts, arrivals, simulator) moved from `StdRng` to
/// ChaCha8, so a seed now yields other prompts than cells stored under 1.
/// 3: each cell draws from its seed mixed with its load
/// (`runner::draw_seed`), so cells of one server at other loads no longer
/// send the same prompts and hit the server's prefix cache.
/// 4: a trace replay's block texts are salted by that seed too
/// (`BlockCache::salted`), so a second time scale, repetition or search
/// probe on one launch no longer resends the first one's prompts.
pub const METHOD_VERSION: u32 = 4;

#[derive(Serialize)]
struct IdentityInput<'a> {
    method_version: u32,
    engine: &'a EngineSpec,
    model_path: &'a str,
    served_name: &'a str,
    model_config_digest: Option<&'a str>,
    /// Left out without a tokenizer file, so those campaigns keep theirs.
    #[serde(skip_serializing_if = "Option::is_none")]
    tokenizer_digest: Option<&'a str>,
    server: serde_json::Value,
    workload: &'a WorkloadPoint,
    /// Whether the engine's prefix cache is emptied before the cell; left
    /// out when not, so campaigns without it keep their identities.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    prefix_cache_reset: bool,
    /// Which exact twin of an earlier server this one is (0: none), so two
    /// servers of identical settings keep their own cells; left out at 0.
    #[serde(skip_serializing_if = "is_zero")]
    twin: u32,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// The identity of one cell (the model's config digest as read when the
/// campaign was resolved).
pub fn cell_identity(c: &Campaign, server: &ServerConfig, workload: &WorkloadPoint) -> String {
    let (engine, model) = (&c.engine, &c.model);
    let input = IdentityInput {
        method_version: METHOD_VERSION,
        engine,
        model_path: &model.path,
        served_name: &model.served_name,
        model_config_digest: model.config_digest.as_deref(),
        tokenizer_digest: model.tokenizer_digest.as_deref(),
        server: server.settings(),
        workload,
        prefix_cache_reset: c.run.reset_prefix_cache,
        twin: c.twins.get(&server.id).copied().unwrap_or(0),
    };
    let value = serde_json::to_value(&input).expect("identity input serializes");
    let mut canonical = String::new();
    write_canonical(&value, &mut canonical);
    crate::util::hash::sha256_hex(canonical.as_bytes(), 32)
}

fn write_canonical(v: &serde_json::Value, out: &mut String) {
    match v {
        serde_json::Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for (i, k) in keys.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&serde_json::Value::String((*k).clone()).to_string());
                out.push(':');
                write_canonical(&map[*k], out);
            }
            out.push('}');
        }
        serde_json::Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(item, out);
            }
            out.push(']');
        }
        other => out.push_str(&other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::campaign::{parse, resolve};
    use std::path::Path;

    fn ids(text: &str) -> Vec<(String, String)> {
        let (raw, src) = parse(Path::new("c.toml"), text).unwrap();
        let c = resolve(raw, &src).unwrap();
        let mut out = Vec::new();
        for s in &c.servers {
            for w in &c.workloads {
                out.push((s.id.clone(), cell_identity(&c, s, w)));
            }
        }
        out
    }

    const BASE: &str = r#"
[campaign]
name = "t"
[model]
path = "m"
[engine]
kind = "sim"
[[server]]
id = "a"
max_running_requests = 8
[[server]]
id = "b"
context_length = 4096
[[workload]]
name = "w"
concurrency = [1, 2]
num_requests = 4
"#;

    #[test]
    fn the_model_configs_bytes_are_part_of_the_identity_read_once_at_load() {
        let dir = tempfile::tempdir().unwrap();
        let cfg = dir.path().join("config.json");
        let file = dir.path().join("c.toml");
        let load = |text: &str| {
            std::fs::write(&file, text).unwrap();
            crate::campaign::load_campaign(&file).unwrap()
        };
        let with_config = BASE.replace("path = \"m\"", "path = \"m\"\nconfig = \".\"");
        std::fs::write(&cfg, r#"{"num_hidden_layers": 32}"#).unwrap();
        let first = load(&with_config);
        assert_eq!(
            first.model.config_digest.as_deref(),
            Some(crate::util::hash::sha256_hex(br#"{"num_hidden_layers": 32}"#, 16).as_str())
        );
        let id = |c: &crate::campaign::Campaign| cell_identity(c, &c.servers[0], &c.workloads[0]);
        assert_eq!(id(&first), id(&load(&with_config)));
        // No config, or another config: other cells.
        assert_ne!(id(&first), id(&load(BASE)));
        let before = id(&first);
        std::fs::write(&cfg, r#"{"num_hidden_layers": 64}"#).unwrap();
        let second = load(&with_config);
        assert_ne!(id(&first), id(&second));
        // A loaded campaign keeps the digest it read: the file changing
        // afterwards moves no identity of it.
        assert_eq!(id(&first), before);
    }

    #[test]
    fn the_tokenizer_files_bytes_are_part_of_the_identity_and_no_tokenizer_keeps_it() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("c.toml");
        let load = |text: &str| {
            std::fs::write(&file, text).unwrap();
            crate::campaign::load_campaign(&file).unwrap()
        };
        let id = |c: &crate::campaign::Campaign| cell_identity(c, &c.servers[0], &c.workloads[0]);
        let plain = load(BASE);
        assert_eq!(id(&plain), ids(BASE)[0].1, "no tokenizer, no change");
        let with = BASE.replace("path = \"m\"", "path = \"m\"\ntokenizer = \"tok.json\"");
        std::fs::write(dir.path().join("tok.json"), r#"{"model": 1}"#).unwrap();
        let first = load(&with);
        assert_ne!(id(&first), id(&plain));
        assert_eq!(id(&first), id(&load(&with)));
        std::fs::write(dir.path().join("tok.json"), r#"{"model": 2}"#).unwrap();
        assert_ne!(id(&first), id(&load(&with)));
    }

    #[test]
    fn exact_twins_get_their_own_identities_and_others_keep_theirs() {
        let twins = BASE.replace("context_length = 4096", "max_running_requests = 8");
        let with_twin = ids(&twins);
        let base = ids(BASE);
        // The first of the twins keeps the identities it had alone.
        assert_eq!(with_twin[..2], base[..2]);
        // The second's are its own, and stay so under a rename.
        assert!(with_twin[2..]
            .iter()
            .all(|t| with_twin[..2].iter().all(|f| f.1 != t.1)));
        let renamed = ids(&twins.replace("id = \"b\"", "id = \"b2\""));
        assert_eq!(
            renamed.iter().map(|x| &x.1).collect::<Vec<_>>(),
            with_twin.iter().map(|x| &x.1).collect::<Vec<_>>()
        );
    }

    #[test]
    fn cosmetic_changes_keep_identity_and_settings_change_it() {
        let base = ids(BASE);
        assert_eq!(base.len(), 4);
        // Comments, key order and server renames do not matter.
        let cosmetic = BASE
            .replace(
                "[[workload]]\nname = \"w\"\nconcurrency = [1, 2]\nnum_requests = 4",
                "# sweep\n[[workload]]\nnum_requests = 4\nname = \"w\"\nconcurrency = [1, 2]",
            )
            .replace("id = \"a\"", "id = \"renamed\"");
        let c = ids(&cosmetic);
        assert_eq!(
            c.iter().map(|x| &x.1).collect::<Vec<_>>(),
            base.iter().map(|x| &x.1).collect::<Vec<_>>()
        );
        // One server parameter changes only that server's cells.
        let changed = ids(&BASE.replace("max_running_requests = 8", "max_running_requests = 16"));
        assert_ne!(changed[0].1, base[0].1);
        assert_ne!(changed[1].1, base[1].1);
        assert_eq!(changed[2..], base[2..]);
        // Workload settings change every cell.
        let w = ids(&BASE.replace("num_requests = 4", "num_requests = 5"));
        assert!(w.iter().zip(&base).all(|(a, b)| a.1 != b.1));
    }
}
