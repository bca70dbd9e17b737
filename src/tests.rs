//! The crate's shape, checked: the layers of `docs/design.md` ("Where
//! things live"), read from the source itself. Every `crate::`, `super::`
//! and child-module path in a file's code (unit tests aside) is an import
//! of the module file it names; no file may import a file of a layer above
//! its own, no files may import each other in a circle, and no file is
//! longer than one reader can hold. Run with `cargo test --lib layers`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The layers, bottom up, by the first segment of a module's path.
const LAYERS: [(&str, &[&str]); 7] = [
    (
        "the ground floor: codec, arithmetic, clocks, errors, the OS",
        &[
            "resp", "os", "clock", "quorum", "value", "holder", "error", "events", "cluster",
            "names",
        ],
    ),
    ("what is said to a master", &["command"]),
    ("one connection", &["conn"]),
    ("one round over all masters", &["round"]),
    ("the handle's internals", &["handle"]),
    ("the lock's life", &["lock"]),
    ("the public facade", &["redlock", "lib", "tests"]),
];

/// The longest a file under `src/` may be, its unit tests included.
const MAX_LINES: usize = 600;

/// A module file: its path under `src/`, its module path, its text.
struct Room {
    file: String,
    module: Vec<String>,
    text: String,
}

fn rooms() -> Vec<Room> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).expect("src/ is readable") {
            let path = entry.expect("a directory entry").path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    walk(&src, &mut files);
    files.sort();
    files
        .into_iter()
        .map(|path| {
            let file = path
                .strip_prefix(&src)
                .expect("under src/")
                .to_string_lossy()
                .replace('\\', "/");
            let mut module: Vec<String> = file
                .trim_end_matches(".rs")
                .split('/')
                .map(String::from)
                .collect();
            if module.last().is_some_and(|m| m == "mod") || file == "lib.rs" {
                module.pop();
            }
            let text = std::fs::read_to_string(&path).expect("a source file");
            Room { file, module, text }
        })
        .collect()
}

/// The code of a file: comment lines and `#[cfg(test)]` modules left out.
fn code(text: &str) -> String {
    let mut out = String::new();
    let mut after_cfg_test = false;
    // While inside a test module: how deep its braces go.
    let mut in_test: Option<isize> = None;
    for line in text.lines() {
        let trimmed = line.trim_start();
        if let Some(depth) = in_test.as_mut() {
            *depth += line.matches('{').count() as isize - line.matches('}').count() as isize;
            if *depth <= 0 {
                in_test = None;
            }
            continue;
        }
        if trimmed.starts_with("//") {
            continue;
        }
        if trimmed.starts_with("#[cfg(test)]") {
            after_cfg_test = true;
            continue;
        }
        if after_cfg_test && trimmed.starts_with("mod ") && line.contains('{') {
            after_cfg_test = false;
            let depth = line.matches('{').count() as isize - line.matches('}').count() as isize;
            if depth > 0 {
                in_test = Some(depth);
            }
            continue;
        }
        after_cfg_test = false;
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// The module paths a file's code names, resolved to absolute paths.
fn named(room: &Room, children: &BTreeSet<String>) -> BTreeSet<Vec<String>> {
    let code = code(&room.text);
    let mut paths = BTreeSet::new();
    // Paths inside `use` braces are written relative to what precedes
    // them: expand `use a::{b, c::{d, e}}` into `a::b`, `a::c::d` and
    // `a::c::e` first.
    let mut flat = String::new();
    for stmt in code.split(';') {
        let stmt = stmt.split_whitespace().collect::<Vec<_>>().join(" ");
        let start = stmt
            .match_indices("use ")
            .map(|(i, _)| i)
            .find(|&i| i == 0 || stmt[..i].ends_with(['}', ' ', ')']));
        match start {
            Some(i) if stmt[i..].contains('{') => {
                for path in expand("", &stmt[i + 4..]) {
                    flat.push_str(&format!(" {path} "));
                }
            }
            _ => {
                flat.push_str(&stmt);
                flat.push(' ');
            }
        }
    }
    let words = flat.split(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'));
    for word in words {
        let segments: Vec<&str> = word.split("::").filter(|s| !s.is_empty()).collect();
        // `pub(crate)`, `pub(super)`: a word, not a path.
        let (Some(first), true) = (segments.first(), segments.len() > 1) else {
            continue;
        };
        let mut path: Vec<String> = match *first {
            "crate" => Vec::new(),
            "super" => {
                // `super` of `a/b.rs` is `a`; of `a/b/mod.rs`, also `a`.
                let mut base = room.module.clone();
                base.pop();
                base
            }
            child if children.contains(child) => {
                let mut base = room.module.clone();
                base.push(child.to_string());
                paths.insert(base);
                continue;
            }
            _ => continue,
        };
        for segment in &segments[1..] {
            if *segment == "super" {
                path.pop();
            } else {
                path.push(segment.to_string());
            }
        }
        paths.insert(path);
    }
    paths
}

/// The paths of a `use` tree: `a::{b, c::{d, e}}` gives `a::b`, `a::c::d`
/// and `a::c::e`.
fn expand(prefix: &str, tree: &str) -> Vec<String> {
    let tree = tree.trim();
    let Some(open) = tree.find('{') else {
        return vec![format!("{prefix}{tree}")];
    };
    let head = format!("{prefix}{}", &tree[..open]);
    let inner = &tree[open + 1..tree.rfind('}').unwrap_or(tree.len()).max(open + 1)];
    let (mut parts, mut depth, mut from) = (Vec::new(), 0, 0);
    for (i, c) in inner.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&inner[from..i]);
                from = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&inner[from..]);
    parts
        .into_iter()
        .filter(|p| !p.trim().is_empty())
        .flat_map(|p| expand(&head, p))
        .collect()
}

/// The file a module path lands in: the longest prefix that is a file.
fn file_of<'a>(path: &[String], files: &'a BTreeMap<Vec<String>, String>) -> Option<&'a String> {
    (1..=path.len())
        .rev()
        .find_map(|n| files.get(&path[..n]))
        .or_else(|| files.get(&Vec::new()))
}

fn layer(module: &[String]) -> usize {
    let first = module.first().map_or("lib", String::as_str);
    LAYERS
        .iter()
        .position(|(_, names)| names.contains(&first))
        .unwrap_or_else(|| panic!("module {first} is in no layer: add it to LAYERS"))
}

/// The import graph between files: file -> files it imports.
fn graph(rooms: &[Room]) -> BTreeMap<String, BTreeSet<String>> {
    let files: BTreeMap<Vec<String>, String> = rooms
        .iter()
        .filter(|r| !r.file.ends_with("tests.rs"))
        .map(|r| (r.module.clone(), r.file.clone()))
        .collect();
    let mut edges = BTreeMap::new();
    for room in rooms.iter().filter(|r| !r.file.ends_with("tests.rs")) {
        let children: BTreeSet<String> = files
            .keys()
            .filter(|m| m.len() == room.module.len() + 1 && m.starts_with(&room.module))
            .map(|m| m[m.len() - 1].clone())
            .collect();
        let targets: BTreeSet<String> = named(room, &children)
            .iter()
            .filter_map(|path| file_of(path, &files))
            .filter(|file| **file != room.file)
            .cloned()
            .collect();
        edges.insert(room.file.clone(), targets);
    }
    edges
}

/// The circles of the graph (Tarjan's strongly connected components of
/// more than one file).
fn circles(edges: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    struct State<'a> {
        edges: &'a BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on_stack: BTreeSet<&'a str>,
        found: Vec<Vec<String>>,
    }
    fn visit<'a>(s: &mut State<'a>, v: &'a str) {
        let n = s.index.len();
        s.index.insert(v, n);
        s.low.insert(v, n);
        s.stack.push(v);
        s.on_stack.insert(v);
        for w in s.edges.get(v).into_iter().flatten() {
            let w = w.as_str();
            if !s.index.contains_key(w) {
                visit(s, w);
                let low = s.low[v].min(s.low[w]);
                s.low.insert(v, low);
            } else if s.on_stack.contains(w) {
                let low = s.low[v].min(s.index[w]);
                s.low.insert(v, low);
            }
        }
        if s.low[v] == s.index[v] {
            let mut component = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on_stack.remove(w);
                component.push(w.to_string());
                if w == v {
                    break;
                }
            }
            if component.len() > 1 {
                s.found.push(component);
            }
        }
    }
    let mut state = State {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        found: Vec::new(),
    };
    for v in edges.keys() {
        if !state.index.contains_key(v.as_str()) {
            visit(&mut state, v);
        }
    }
    state.found
}

#[test]
fn layers_no_file_imports_a_layer_above_its_own() {
    let rooms = rooms();
    let modules: BTreeMap<&str, &[String]> = rooms
        .iter()
        .map(|r| (r.file.as_str(), r.module.as_slice()))
        .collect();
    let mut upward = Vec::new();
    for (from, targets) in graph(&rooms) {
        for to in targets {
            let (a, b) = (layer(modules[from.as_str()]), layer(modules[to.as_str()]));
            if b > a {
                upward.push(format!(
                    "{from} ({}) imports {to} ({})",
                    LAYERS[a].0, LAYERS[b].0
                ));
            }
        }
    }
    assert!(
        upward.is_empty(),
        "imports that run upward:\n{}",
        upward.join("\n")
    );
}

#[test]
fn layers_no_files_import_each_other_in_a_circle() {
    let found = circles(&graph(&rooms()));
    assert!(found.is_empty(), "import circles: {found:?}");
}

#[test]
fn layers_no_file_is_longer_than_a_reader_can_hold() {
    let long: Vec<String> = rooms()
        .iter()
        .map(|r| (r.file.clone(), r.text.lines().count()))
        .filter(|(_, lines)| *lines > MAX_LINES)
        .map(|(file, lines)| format!("{file}: {lines} lines"))
        .collect();
    assert!(long.is_empty(), "files over {MAX_LINES} lines: {long:?}");
}

#[test]
fn layers_the_check_sees_imports_and_circles() {
    // The reader of imports, on the kinds of paths the crate uses.
    let room = Room {
        file: "round/look.rs".into(),
        module: vec!["round".into(), "look".into()],
        text: "use super::connections::Connections;\n\
               use crate::conn::{Conn, Node};\n\
               // use crate::lock::Lock;\n\
               fn f() { let x = crate::quorum::quorum(3); }\n\
               #[cfg(test)]\nmod tests {\n    use crate::redlock::Redlock;\n}\n"
            .into(),
    };
    let named = named(&room, &BTreeSet::new());
    let strings: BTreeSet<String> = named.iter().map(|p| p.join("::")).collect();
    assert!(
        strings.contains("round::connections::Connections"),
        "{strings:?}"
    );
    assert!(strings.contains("conn::Conn") && strings.contains("conn::Node"));
    assert!(strings.contains("quorum::quorum"), "{strings:?}");
    assert!(!strings
        .iter()
        .any(|s| s.starts_with("lock") || s.starts_with("redlock")));
    let edges: BTreeMap<String, BTreeSet<String>> = [
        ("a", &["b"][..]),
        ("b", &["c"][..]),
        ("c", &["a"][..]),
        ("d", &["a"][..]),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.iter().map(|s| s.to_string()).collect()))
    .collect();
    let found = circles(&edges);
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].len(), 3);
}
