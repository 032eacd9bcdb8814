//! The crate's module graph, checked from the source: no import cycle
//! between top-level modules, and the pure modules (campaign, plan, memory,
//! metrics, search, goal, report, bisect) use no async runtime, processes or sockets, and read or
//! write files only at the named entry points listed here.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Modules whose functions compute from their inputs only.
const PURE: &[&str] = &[
    "campaign", "plan", "memory", "metrics", "search", "goal", "report", "bisect",
];

/// What a pure module must never name.
const IMPURE: &[&str] = &[
    "tokio",
    "std::process",
    "Command::new",
    "std::net",
    "TcpStream",
    "hyper",
    "reqwest",
    "std::thread",
];

/// File-system calls a pure module may make, and where: each is the one
/// entry point that loads its input (or writes the report it renders).
const FILE_IO_ALLOWED: &[(&str, usize)] = &[
    // load: the campaign file (the model's files are digested by workload::file_digest).
    ("src/campaign/mod.rs", 1),
    // model_file_bytes: the size of local weights for the speed prior.
    ("src/plan/eta/priors.rs", 2),
    // prior::load: earlier campaigns' cells given with --prior-results.
    ("src/plan/prior.rs", 2),
    // read_config: the model's config.json.
    ("src/memory/hf_config.rs", 1),
    // report::write_files.
    ("src/report/mod.rs", 1),
];

const FILE_IO: &[&str] = &["std::fs", "fs::", "File::", "OpenOptions"];

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// Source text without comments and string literals, so prose that
/// mentions a module is not an import.
fn code_only(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let b = text.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i..].starts_with(b"//") {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
        } else if b[i..].starts_with(b"/*") {
            i += 2;
            while i < b.len() && !b[i..].starts_with(b"*/") {
                i += 1;
            }
            i += 2;
        } else if b[i..].starts_with(b"r#\"") {
            i += 3;
            while i < b.len() && !b[i..].starts_with(b"\"#") {
                i += 1;
            }
            i += 2;
        } else if b[i] == b'"' {
            i += 1;
            while i < b.len() && b[i] != b'"' {
                i += if b[i] == b'\\' { 2 } else { 1 };
            }
            i += 1;
        } else if b[i] == b'\'' && i + 2 < b.len() && (b[i + 2] == b'\'' || b[i + 1] == b'\\') {
            // A char literal such as '"' or '\n' (not a lifetime).
            let end = text[i + 1..].find('\'').map_or(b.len(), |e| i + 2 + e);
            i = end.max(i + 1);
        } else {
            out.push(b[i] as char);
            i += 1;
        }
    }
    out
}

/// `code` without its `#[cfg(test)] mod … { … }` blocks.
fn without_test_modules(code: &str) -> String {
    let mut out = String::new();
    let mut rest = code;
    while let Some(i) = rest.find("#[cfg(test)]") {
        out.push_str(&rest[..i]);
        let after = &rest[i + "#[cfg(test)]".len()..];
        let trimmed = after.trim_start();
        match (trimmed.starts_with("mod "), trimmed.find(['{', ';'])) {
            (true, Some(j)) if trimmed.as_bytes()[j] == b'{' => {
                let body = &trimmed[j + 1..];
                rest = &body[(matching_brace(body) + 1).min(body.len())..];
            }
            _ => rest = after,
        }
    }
    out.push_str(rest);
    out
}

/// Top-level module a file belongs to (`src/plan/eta.rs` → `plan`).
fn module_of(root: &Path, file: &Path) -> Option<String> {
    let rel = file.strip_prefix(root).ok()?;
    let first = rel.components().next()?.as_os_str().to_str()?;
    let name = first.strip_suffix(".rs").unwrap_or(first);
    (name != "lib" && name != "main").then(|| name.to_string())
}

/// The modules named after `crate::` in `code`, including inside
/// `use crate::{a::x, b}` groups.
fn crate_refs(code: &str, modules: &BTreeSet<String>) -> BTreeSet<String> {
    let mut refs = BTreeSet::new();
    for (i, _) in code.match_indices("crate::") {
        let rest = &code[i + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            let end = matching_brace(group);
            for item in top_level_items(&group[..end]) {
                let name: String = item
                    .trim()
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                if modules.contains(&name) {
                    refs.insert(name);
                }
            }
        } else {
            let name: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            if modules.contains(&name) {
                refs.insert(name);
            }
        }
    }
    refs
}

fn matching_brace(s: &str) -> usize {
    let mut depth = 0usize;
    for (i, c) in s.char_indices() {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => return i,
            '}' => depth -= 1,
            _ => {}
        }
    }
    s.len()
}

/// Comma-separated items at brace depth 0.
fn top_level_items(s: &str) -> Vec<&str> {
    let (mut items, mut depth, mut start) = (Vec::new(), 0usize, 0);
    for (i, c) in s.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                items.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    items.push(&s[start..]);
    items
}

struct Crate {
    root: PathBuf,
    files: Vec<(PathBuf, String, String)>,
    modules: BTreeSet<String>,
}

fn load() -> Crate {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut paths = Vec::new();
    rust_files(&root, &mut paths);
    paths.sort();
    let modules: BTreeSet<String> = paths.iter().filter_map(|p| module_of(&root, p)).collect();
    let files = paths
        .into_iter()
        .filter_map(|p| {
            let m = module_of(&root, &p)?;
            let code = code_only(&std::fs::read_to_string(&p).unwrap());
            Some((p, m, code))
        })
        .collect();
    Crate {
        root,
        files,
        modules,
    }
}

/// Edges `from → to` with the files that make each.
fn graph(c: &Crate) -> BTreeMap<String, BTreeMap<String, BTreeSet<String>>> {
    let mut g: BTreeMap<String, BTreeMap<String, BTreeSet<String>>> = BTreeMap::new();
    for (p, m, code) in &c.files {
        g.entry(m.clone()).or_default();
        for r in crate_refs(code, &c.modules) {
            if &r != m {
                let rel = p.strip_prefix(c.root.parent().unwrap()).unwrap();
                g.entry(m.clone())
                    .or_default()
                    .entry(r)
                    .or_default()
                    .insert(rel.display().to_string());
            }
        }
    }
    g
}

/// One cycle of the graph, if any, as the modules along it.
fn find_cycle(g: &BTreeMap<String, BTreeMap<String, BTreeSet<String>>>) -> Option<Vec<String>> {
    fn visit(
        n: &str,
        g: &BTreeMap<String, BTreeMap<String, BTreeSet<String>>>,
        state: &mut BTreeMap<String, u8>,
        stack: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        state.insert(n.to_string(), 1);
        stack.push(n.to_string());
        for next in g.get(n).into_iter().flat_map(|e| e.keys()) {
            match state.get(next.as_str()).copied().unwrap_or(0) {
                1 => {
                    let from = stack.iter().position(|s| s == next).unwrap();
                    let mut cycle = stack[from..].to_vec();
                    cycle.push(next.clone());
                    return Some(cycle);
                }
                0 => {
                    if let Some(c) = visit(next, g, state, stack) {
                        return Some(c);
                    }
                }
                _ => {}
            }
        }
        stack.pop();
        state.insert(n.to_string(), 2);
        None
    }
    let mut state = BTreeMap::new();
    for n in g.keys() {
        if state.get(n.as_str()).copied().unwrap_or(0) == 0 {
            if let Some(c) = visit(n, g, &mut state, &mut Vec::new()) {
                return Some(c);
            }
        }
    }
    None
}

#[test]
fn top_level_modules_import_each_other_without_a_cycle() {
    let c = load();
    let g = graph(&c);
    // The graph is not trivially empty: the runner reaches most modules.
    assert!(g["runner"].contains_key("launcher") && g["runner"].contains_key("plan"));
    if let Some(cycle) = find_cycle(&g) {
        let edges: Vec<String> = cycle
            .windows(2)
            .map(|w| {
                let files: Vec<&String> = g[&w[0]][&w[1]].iter().collect();
                format!("{} → {} (in {files:?})", w[0], w[1])
            })
            .collect();
        panic!("import cycle: {}", edges.join("; "));
    }
}

/// Edges between the files of `report/`: a file naming `super::x` or
/// `crate::report::x` uses `x.rs`, outside its test module.
fn report_graph(c: &Crate) -> BTreeMap<String, BTreeMap<String, BTreeSet<String>>> {
    let dir = c.root.join("report");
    let names: BTreeSet<String> = c
        .files
        .iter()
        .filter(|(p, _, _)| p.parent() == Some(dir.as_path()))
        .filter_map(|(p, _, _)| Some(p.file_stem()?.to_str()?.to_string()))
        .filter(|n| n != "mod")
        .collect();
    let mut g: BTreeMap<String, BTreeMap<String, BTreeSet<String>>> = BTreeMap::new();
    for (p, _, code) in c
        .files
        .iter()
        .filter(|(p, _, _)| p.parent() == Some(dir.as_path()))
    {
        let me = p.file_stem().unwrap().to_str().unwrap().to_string();
        if me == "mod" {
            continue;
        }
        let code = without_test_modules(code);
        let node = g.entry(me.clone()).or_default();
        for prefix in ["super::", "crate::report::"] {
            for (i, _) in code.match_indices(prefix) {
                let name: String = code[i + prefix.len()..]
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                if names.contains(&name) && name != me {
                    node.entry(name)
                        .or_default()
                        .insert(format!("report/{me}.rs"));
                }
            }
        }
    }
    g
}

#[test]
fn report_files_import_each_other_without_a_cycle() {
    let g = report_graph(&load());
    // The sections read the data, the model assembles them, renderers read the model.
    assert!(g["charts"].contains_key("data") && g["model"].contains_key("charts"));
    assert!(g["html"].contains_key("model") && !g["data"].contains_key("model"));
    if let Some(cycle) = find_cycle(&g) {
        panic!("import cycle in report/: {}", cycle.join(" → "));
    }
}

/// The modules of the layout map in `src/lib.rs`, in the order it lists them.
fn layout_map_order() -> Vec<String> {
    let lib = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/src/lib.rs")).unwrap();
    lib.lines()
        .filter_map(|l| l.strip_prefix("//! - [`"))
        .filter_map(|l| l.split_once("`]").map(|(m, _)| m.to_string()))
        .collect()
}

#[test]
fn the_layout_map_lists_every_module_after_all_it_uses() {
    let c = load();
    let g = graph(&c);
    let order = layout_map_order();
    let listed: BTreeSet<String> = order.iter().cloned().collect();
    assert_eq!(
        listed.len(),
        order.len(),
        "a module listed twice: {order:?}"
    );
    assert_eq!(listed, c.modules, "the map and the crate's modules differ");
    for (i, m) in order.iter().enumerate() {
        for (dep, files) in g.get(m).into_iter().flatten() {
            let at = order.iter().position(|o| o == dep).unwrap();
            assert!(
                at < i,
                "{m} uses {dep} (in {files:?}), listed after it in src/lib.rs"
            );
        }
    }
}

#[test]
fn the_cycle_finder_finds_a_planted_cycle_and_the_reference_parser_reads_use_groups() {
    let modules: BTreeSet<String> = ["a", "b", "c"].iter().map(|s| s.to_string()).collect();
    let refs = crate_refs(
        "use crate::{a::X, b::{Y, Z}};\nlet q = crate::c::f();",
        &modules,
    );
    assert_eq!(refs, modules);
    assert!(crate_refs(
        &code_only("// crate::a::x\nlet s = \"crate::b\";"),
        &modules
    )
    .is_empty());
    let stripped = without_test_modules(
        "fn a() {}\n#[cfg(test)]\nmod tests { fn b() { std::fs::read(1); { } } }\nfn c() { tokio::spawn(); }",
    );
    assert!(
        !stripped.contains("std::fs") && stripped.contains("tokio::spawn"),
        "{stripped}"
    );
    let mut g: BTreeMap<String, BTreeMap<String, BTreeSet<String>>> = BTreeMap::new();
    for (from, to) in [("a", "b"), ("b", "c")] {
        g.entry(from.into())
            .or_default()
            .insert(to.into(), BTreeSet::new());
    }
    assert_eq!(find_cycle(&g), None);
    g.entry("c".into())
        .or_default()
        .insert("a".into(), BTreeSet::new());
    let cycle = find_cycle(&g).expect("a → b → c → a");
    assert_eq!(cycle.first(), cycle.last());
    assert_eq!(cycle.len(), 4);
}

#[test]
fn pure_modules_use_no_runtime_processes_or_sockets_and_touch_files_only_at_their_entry_points() {
    let c = load();
    let mut problems = Vec::new();
    let mut io_sites: BTreeMap<String, usize> = BTreeMap::new();
    for (p, m, code) in &c.files {
        if !PURE.contains(&m.as_str()) {
            continue;
        }
        let rel = p
            .strip_prefix(c.root.parent().unwrap())
            .unwrap()
            .display()
            .to_string();
        // Test modules may build fixtures on disk.
        let name = p.file_stem().and_then(|n| n.to_str()).unwrap_or("");
        if name == "tests" || name.ends_with("_tests") || name.starts_with("tests_") {
            continue;
        }
        let code = &without_test_modules(code);
        for word in IMPURE {
            if code.contains(word) {
                problems.push(format!("{rel} uses `{word}`"));
            }
        }
        let io = FILE_IO.iter().map(|w| code.matches(w).count()).sum::<usize>()
            // `std::fs::` also matches `fs::`.
            - code.matches("std::fs::").count();
        if io > 0 {
            io_sites.insert(rel, io);
        }
    }
    for (file, n) in &io_sites {
        let allowed = FILE_IO_ALLOWED
            .iter()
            .find(|(f, _)| f == file)
            .map_or(0, |(_, n)| *n);
        if *n > allowed {
            problems.push(format!(
                "{file} has {n} file-system calls, {allowed} allowed: pass the data in, \
                 or name the new entry point in FILE_IO_ALLOWED"
            ));
        }
    }
    // `ui` runs the progress line on tokio; plain-text tables live in util.
    let g = graph(&c);
    for m in PURE {
        if let Some(files) = g.get(*m).and_then(|deps| deps.get("ui")) {
            problems.push(format!("{m} uses ui (in {files:?})"));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    // The allow-list is exact: a removed call must be removed here too.
    for (file, n) in FILE_IO_ALLOWED {
        assert_eq!(
            io_sites.get(*file),
            Some(n),
            "{file}: update FILE_IO_ALLOWED"
        );
    }
}
