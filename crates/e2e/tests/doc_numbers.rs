//! Every measured number in the docs says where it was measured, so that it can be checked
//! and re-measured (issue #60): a paragraph of README.md, ARCHITECTURE.md or docs/, or a doc
//! comment of a published crate, that states a speed, a ratio or a memory figure names its
//! source — BENCHMARKS.md (and, quoted, a section that exists there), a benchmark under
//! `benches/`, or an `informer-bench` command — and every section of BENCHMARKS.md quoted
//! anywhere exists.

use crate::sources::{rust_files, workspace};

use std::{fs, path::Path, sync::LazyLock};

use regex::Regex;

/// A measured figure: a ratio (`1.34×`), a share (`31% fewer`), a rate or memory per object.
static FIGURE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"\d(\.\d+)?×|\d+(\.\d+)?\s?% (fewer|less|more|faster|slower|smaller|larger|of the time)|\d\s?(events|pods|objects|keys)/s|KiB (per|/)|KiB/pod|MiB per",
    )
    .unwrap()
});

/// Where a figure comes from.
static SOURCE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"BENCHMARKS\.md|benches/\w+\.rs|informer-bench").unwrap());

/// A section of BENCHMARKS.md, quoted: `BENCHMARKS.md, "Protobuf"` or `BENCHMARKS.md "…"`.
static QUOTED: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r#"BENCHMARKS\.md[,:]?\s+\(?"([^"]+)""#).unwrap());

/// The paragraphs of a file (a Markdown block between blank lines, a table whole, a list
/// with the line that introduces it; a block of doc comment lines), each with the line it
/// starts on.
fn paragraphs(path: &Path) -> Vec<(usize, String)> {
    let text = fs::read_to_string(path).unwrap();
    let rust = path.extension().is_some_and(|e| e == "rs");
    let mut out = Vec::new();
    let mut current: Option<(usize, String)> = None;
    for (i, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        let body = if rust {
            trimmed
                .strip_prefix("///")
                .or_else(|| trimmed.strip_prefix("//!"))
        } else {
            Some(line)
        };
        match body.map(str::trim) {
            Some(body) if !body.is_empty() => {
                let (_, text) = current.get_or_insert_with(|| (i + 1, String::new()));
                text.push(' ');
                text.push_str(body);
            }
            _ => push(&mut out, current.take(), rust),
        }
    }
    push(&mut out, current, rust);
    out
}

/// Adds a finished paragraph; in Markdown, a list introduced by a line ending in `:` is one
/// paragraph with it (the source named before the colon covers the list).
fn push(out: &mut Vec<(usize, String)>, paragraph: Option<(usize, String)>, rust: bool) {
    let Some((line, text)) = paragraph else {
        return;
    };
    match out.last_mut() {
        Some((_, previous)) if !rust && previous.ends_with(':') => previous.push_str(&text),
        _ => out.push((line, text)),
    }
}

/// The files whose numbers are checked.
fn documents() -> Vec<std::path::PathBuf> {
    let root = workspace();
    let mut files = vec![root.join("README.md"), root.join("ARCHITECTURE.md")];
    for dir in ["docs"] {
        for entry in fs::read_dir(root.join(dir)).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "md") {
                files.push(path);
            }
        }
    }
    for krate in [
        "kube-informer",
        "runtime",
        "fake-apiserver",
        "envtest",
        "protobuf-schema",
    ] {
        let src = root.join("crates").join(krate).join("src");
        rust_files(&src, &|name| name == "generated.rs", &mut files);
        files.push(root.join("crates").join(krate).join("README.md"));
    }
    files.retain(|f| f.exists());
    files
}

/// The paragraphs that state a figure without its source.
fn unsourced(paragraphs: &[(usize, String)]) -> Vec<(usize, String)> {
    paragraphs
        .iter()
        .filter(|(_, text)| FIGURE.is_match(text) && !SOURCE.is_match(text))
        .cloned()
        .collect()
}

#[test]
fn every_measured_number_names_its_benchmark() {
    let root = workspace();
    let headings: Vec<String> = fs::read_to_string(root.join("BENCHMARKS.md"))
        .unwrap()
        .lines()
        .filter(|l| l.starts_with('#'))
        .map(|l| l.trim_start_matches('#').trim().to_owned())
        .collect();
    let mut problems = Vec::new();
    let mut figures = 0;
    for file in documents() {
        let shown = file.strip_prefix(&root).unwrap().display().to_string();
        let paragraphs = paragraphs(&file);
        figures += paragraphs
            .iter()
            .filter(|(_, t)| FIGURE.is_match(t))
            .count();
        for (line, text) in unsourced(&paragraphs) {
            let start: String = text.chars().take(120).collect();
            problems.push(format!(
                "{shown}:{line}: a figure without its source:{start}…"
            ));
        }
        for (line, text) in &paragraphs {
            for quoted in QUOTED.captures_iter(text) {
                let section = &quoted[1];
                if !headings.iter().any(|h| h.starts_with(section)) {
                    problems.push(format!(
                        "{shown}:{line}: BENCHMARKS.md has no section \"{section}\""
                    ));
                }
            }
        }
    }
    assert!(
        figures >= 10,
        "the docs' figures were not found ({figures})"
    );
    assert!(
        problems.is_empty(),
        "cite BENCHMARKS.md (a section that exists), a bench under benches/, or an \
         informer-bench command beside each measured number:\n{}",
        problems.join("\n")
    );
}

#[test]
fn the_check_sees_a_figure_without_its_source() {
    let found = |text: &str| unsourced(&[(1, text.to_owned())]).len();
    assert_eq!(found("decodes at 1.34× the rate of JSON"), 1);
    assert_eq!(found("31% fewer bytes than JSON"), 1);
    assert_eq!(found("about 40,000 events/s"), 1);
    assert_eq!(found("6.6 KiB per cached pod"), 1);
    assert_eq!(
        found("1.34× the rate of JSON (BENCHMARKS.md, \"Decoding one pod\")"),
        0
    );
    assert_eq!(
        found("the API server's 3 MiB limit"),
        0,
        "a limit, not a figure"
    );
    assert_eq!(
        found("more than 10% of reconciles fail"),
        0,
        "an alert's threshold"
    );
}
