//! The module tree is the data-flow picture (ARCHITECTURE.md), and this test keeps it one:
//! within each crate, no top-level module imports one that imports it back (directly or
//! around a loop), and the modules the docs call leaves import nothing else of their crate
//! but `util` (a leaf too).
//!
//! And the README's layout and ARCHITECTURE.md name every top-level module.
//!
//! It reads the sources: every `crate::` path outside comments and tests, resolved through
//! the crate root's re-exports (`crate::Store` is the `store` module's).

use crate::sources::{rust_files, workspace};

use std::{
    collections::{BTreeMap, BTreeSet},
    fs,
    path::{Path, PathBuf},
};

/// The crates checked, and the modules their docs promise are leaves.
const CRATES: &[(&str, &[&str])] = &[
    (
        "kube-informer",
        &[
            "workqueue",
            "key",
            "util",
            "json_prefix",
            "resource_version",
        ],
    ),
    ("runtime", &["reconcile", "util", "lease"]),
    ("fake-apiserver", &["util", "registry"]),
];

type Graph = BTreeMap<String, BTreeSet<String>>;

#[test]
fn no_module_imports_one_that_imports_it_back() {
    for (krate, _) in CRATES {
        let graph = module_graph(krate);
        let loops = cycles(&graph);
        assert!(
            loops.is_empty(),
            "{krate}: modules in a loop: {loops:?}\n{graph:#?}"
        );
    }
}

#[test]
fn leaves_import_nothing_else_of_their_crate() {
    for (krate, leaves) in CRATES {
        let graph = module_graph(krate);
        for leaf in *leaves {
            // `util` is itself a leaf: the small helpers every module may share.
            let mut imports = graph.get(*leaf).cloned().unwrap_or_default();
            imports.remove("util");
            assert!(
                imports.is_empty(),
                "{krate}: `{leaf}` should be a leaf (importing at most `util`), imports {imports:?}"
            );
        }
    }
}

#[test]
fn the_check_sees_a_loop() {
    let mut graph = Graph::new();
    graph.entry("a".into()).or_default().insert("b".into());
    graph.entry("b".into()).or_default().insert("c".into());
    assert!(cycles(&graph).is_empty());
    graph.entry("c".into()).or_default().insert("a".into());
    assert_eq!(cycles(&graph), vec![vec!["a", "b", "c"]]);
    let code = "use crate::{a::B, c::{D, e}};\nlet x = crate::f::g(); // crate::h\n";
    assert_eq!(paths(&code_of(code)), ["a", "c", "f"]);
    // And it reads the real trees: known imports are found, through re-exports too.
    let informer = module_graph("kube-informer");
    assert!(informer["informer"].contains("reflector"), "{informer:#?}");
    assert!(
        informer["factory"].contains("index"),
        "crate::Indexers is index's: {informer:#?}"
    );
    let runtime = module_graph("runtime");
    assert!(runtime["manager"].contains("controller"), "{runtime:#?}");
    assert!(runtime["sharding"].contains("reconcile"), "{runtime:#?}");
}

/// The README's layout and ARCHITECTURE.md name every top-level module of the two library
/// crates: a module added (or renamed) without its place in the picture fails here.
#[test]
fn the_docs_name_every_module() {
    let root = workspace();
    let readme = fs::read_to_string(root.join("README.md")).expect("README.md");
    let architecture = fs::read_to_string(root.join("ARCHITECTURE.md")).expect("ARCHITECTURE.md");
    let (_, layout) = readme.split_once("## Layout").expect("a Layout section");
    let words = |text: &str| -> BTreeSet<String> {
        text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .map(str::to_owned)
            .collect()
    };
    let in_architecture = words(&architecture);
    for (krate, dir) in [
        ("kube-informer", "crates/kube-informer/"),
        ("runtime", "crates/runtime/"),
    ] {
        // The crate's entry: from its folder's line to the next crate's.
        let (_, entry) = layout.split_once(dir).expect("the crate in the layout");
        let in_layout = words(entry.split("\ncrates/").next().unwrap_or_default());
        for module in top_level_modules(&src(krate)) {
            assert!(
                in_layout.contains(&module),
                "README.md's layout of {krate} does not name its module `{module}`"
            );
            assert!(
                in_architecture.contains(&module),
                "ARCHITECTURE.md does not name {krate}'s module `{module}`"
            );
        }
    }
}

fn src(krate: &str) -> PathBuf {
    workspace().join("crates").join(krate).join("src")
}

/// The top-level modules of the crate whose sources are `root`: its folders and files but
/// the crate roots.
fn top_level_modules(root: &Path) -> BTreeSet<String> {
    fs::read_dir(root)
        .expect("the crate's src")
        .map(|e| e.expect("a dir entry").path())
        .filter_map(|p| {
            let name = p.file_stem()?.to_str()?.to_owned();
            let is_module = p.is_dir() || p.extension().is_some_and(|e| e == "rs");
            (is_module && !["lib", "main", "bin"].contains(&name.as_str())).then_some(name)
        })
        .collect()
}

/// Top-level module → the top-level modules its non-test code names.
fn module_graph(krate: &str) -> Graph {
    let root = src(krate);
    let modules = top_level_modules(&root);
    let lib = fs::read_to_string(root.join("lib.rs")).expect("lib.rs");
    let reexports = root_reexports(&code_of(&lib));
    let mut graph = Graph::new();
    for module in &modules {
        let mut files = Vec::new();
        let dir = root.join(module);
        if dir.is_dir() {
            // Test files (`tests.rs`, `tests/`) may import anything.
            rust_files(
                &dir,
                &|name| name == "tests" || name == "tests.rs",
                &mut files,
            );
        }
        let file = root.join(format!("{module}.rs"));
        if file.is_file() {
            files.push(file);
        }
        let imports = graph.entry(module.clone()).or_default();
        for file in files {
            let code = code_of(&fs::read_to_string(&file).expect("a source file"));
            for first in paths(&code) {
                let target = match reexports.get(&first) {
                    Some(target) => target.clone(),
                    None => first,
                };
                if modules.contains(&target) && &target != module {
                    imports.insert(target);
                }
            }
        }
    }
    graph
}

/// The code of a file: without comments, and without the tests at its end (everything
/// from an inline `#[cfg(test)] mod tests {` on; a `mod tests;` is a file of its own).
fn code_of(text: &str) -> String {
    let mut code = String::new();
    let mut lines = text.lines().peekable();
    while let Some(line) = lines.next() {
        let trimmed = line.trim_start();
        if trimmed.starts_with("#[cfg(test)]")
            && lines.peek().is_some_and(|next| {
                let next = next.trim();
                next.starts_with("mod ") && next.ends_with('{')
            })
        {
            break;
        }
        let without_comment = match line.find("//") {
            // Not inside a string such as "https://...".
            Some(at) if line[..at].matches('"').count() % 2 == 0 => &line[..at],
            _ => line,
        };
        code.push_str(without_comment);
        code.push('\n');
    }
    code
}

/// The first segment of every `crate::` path in `code`, grouped imports included.
fn paths(code: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut rest = code;
    while let Some(at) = rest.find("crate::") {
        let before = rest[..at].chars().next_back();
        rest = &rest[at + "crate::".len()..];
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue; // `kube_informer_crate::`, not ours
        }
        if let Some(group) = rest.strip_prefix('{') {
            found.extend(group_heads(group));
        } else {
            found.push(ident(rest));
        }
    }
    found.retain(|name| !name.is_empty() && name != "self");
    found
}

/// The first identifier of each item of a `{...}` group (its opening brace consumed).
fn group_heads(group: &str) -> Vec<String> {
    let (mut heads, mut depth, mut expecting) = (Vec::new(), 0usize, true);
    for (i, c) in group.char_indices() {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => break,
            '}' => depth -= 1,
            ',' if depth == 0 => expecting = true,
            c if expecting && depth == 0 && (c.is_alphanumeric() || c == '_') => {
                heads.push(ident(&group[i..]));
                expecting = false;
            }
            _ => {}
        }
    }
    heads
}

fn ident(text: &str) -> String {
    text.chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect()
}

/// The names the crate root re-exports (`pub use self::store::{Store, ...}`) → their
/// module.
fn root_reexports(lib: &str) -> BTreeMap<String, String> {
    let mut names = BTreeMap::new();
    for statement in lib.split(';') {
        let Some(tree) = statement
            .trim()
            .split_once("use ")
            .map(|(_, tree)| tree.trim())
        else {
            continue;
        };
        let tree = tree
            .strip_prefix("self::")
            .or_else(|| tree.strip_prefix("crate::"))
            .unwrap_or(tree);
        leaves(tree, None, &mut names);
    }
    names
}

/// Walks a use tree, recording each leaf name under the module it starts in.
fn leaves(tree: &str, module: Option<&str>, into: &mut BTreeMap<String, String>) {
    let tree = tree.trim();
    if let Some(inner) = tree.strip_prefix('{').and_then(|t| t.strip_suffix('}')) {
        let (mut depth, mut start) = (0, 0);
        for (i, c) in inner.char_indices() {
            match c {
                '{' => depth += 1,
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    leaves(&inner[start..i], module, into);
                    start = i + 1;
                }
                _ => {}
            }
        }
        leaves(&inner[start..], module, into);
        return;
    }
    let head = ident(tree);
    match tree[head.len()..].strip_prefix("::") {
        Some(rest) => leaves(rest, Some(module.unwrap_or(&head)), into),
        None => {
            let name = tree.rsplit(" as ").next().unwrap_or(tree).trim().to_owned();
            if let Some(module) = module {
                into.insert(name, module.to_owned());
            }
        }
    }
}

/// Every loop of modules (the strongly connected components of more than one), sorted.
fn cycles(graph: &Graph) -> Vec<Vec<String>> {
    let reaches = |from: &String| {
        let mut seen = BTreeSet::new();
        let mut stack = vec![from.clone()];
        while let Some(module) = stack.pop() {
            for next in graph.get(&module).into_iter().flatten() {
                if seen.insert(next.clone()) {
                    stack.push(next.clone());
                }
            }
        }
        seen
    };
    let reach: BTreeMap<&String, BTreeSet<String>> =
        graph.keys().map(|m| (m, reaches(m))).collect();
    let mut loops = BTreeSet::new();
    for (module, reached) in &reach {
        if !reached.contains(*module) {
            continue;
        }
        let members: Vec<String> = reached
            .iter()
            .filter(|other| reach.get(other).is_some_and(|r| r.contains(*module)))
            .cloned()
            .collect();
        loops.insert(members);
    }
    loops.into_iter().collect()
}
