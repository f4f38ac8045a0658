//! The published crates' public surface, listed and committed
//! (`crates/e2e/tests/public-api/<crate>.txt`): every `pub` item as written in `src/` —
//! modules, functions and methods with their signatures, types, traits, fields, variants,
//! re-exports, trait implementations of public types, exported macros — with the features
//! (`#[cfg(...)]`) that gate it and whether it is `#[doc(hidden)]` or `#[deprecated]`.
//! Test code (`#[cfg(test)]`) is left out. A change to the surface fails this test until
//! the listing is regenerated, so it shows up in review as a diff of the listing:
//!
//! ```text
//! UPDATE_PUBLIC_API=1 cargo test -p e2e --test integration public_api
//! ```
//!
//! The listing is of what is written `pub`; an item in a private module that nothing
//! re-exports is listed too (the `unreachable_pub` lint keeps those few and deliberate).

use crate::sources::workspace;

use std::{
    collections::BTreeSet,
    fs,
    path::{Path, PathBuf},
};

use quote::ToTokens;
use syn::{Attribute, ImplItem, Item, TraitItem, Visibility};

/// The published crates: (package, folder).
const CRATES: &[(&str, &str)] = &[
    ("kube-informer", "kube-informer"),
    ("kube-informer-runtime", "runtime"),
    ("fake-apiserver", "fake-apiserver"),
    ("kube-envtest", "envtest"),
    ("kube-protobuf-schema", "protobuf-schema"),
];

#[test]
fn the_public_surface_is_the_committed_listing() {
    let update = std::env::var_os("UPDATE_PUBLIC_API").is_some();
    let mut stale = Vec::new();
    for (package, folder) in CRATES {
        let listing = listing(
            package,
            &workspace().join("crates").join(folder).join("src"),
        );
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/public-api")
            .join(format!("{package}.txt"));
        let committed = fs::read_to_string(&path).unwrap_or_default();
        if committed == listing {
            continue;
        }
        if update {
            fs::create_dir_all(path.parent().unwrap()).unwrap();
            fs::write(&path, &listing).unwrap();
            continue;
        }
        let (old, new): (BTreeSet<&str>, BTreeSet<&str>) =
            (committed.lines().collect(), listing.lines().collect());
        let gone: Vec<_> = old.difference(&new).take(20).collect();
        let added: Vec<_> = new.difference(&old).take(20).collect();
        stale.push(format!(
            "{package}: the public surface changed\n  added: {added:#?}\n  gone: {gone:#?}"
        ));
    }
    assert!(
        stale.is_empty(),
        "{}\nIf the change is meant, regenerate the listings and commit them:\n  \
         UPDATE_PUBLIC_API=1 cargo test -p e2e --test integration public_api",
        stale.join("\n")
    );
}

#[test]
fn the_listing_sees_what_is_public() {
    let code = r#"
        pub mod a { pub fn f(x: u32) -> u32 { x } pub async fn w() {} fn private() {} }
        mod b { pub(crate) fn g() {} }
        #[cfg(feature = "x")] pub struct S { pub field: u8, hidden: u8 }
        impl S { pub fn new() -> Self { todo!() } fn not_listed(&self) {} }
        impl Clone for S { fn clone(&self) -> Self { todo!() } }
        #[cfg(test)] mod tests { pub fn in_test() {} }
        pub use a::f as g;
        #[cfg(feature = "y")] pub mod c { pub fn h() {} }
        mod d { pub struct T; impl T { pub fn m(&self) {} } pub fn e() {} }
        #[cfg(feature = "z")] pub use self::d::T;
        pub use d::e;
    "#;
    let file: syn::File = syn::parse_str(code).unwrap();
    let mut lister = Lister::default();
    lister.items("k", &file.items, None);
    lister.finish();
    let lines: Vec<&str> = lister.lines.iter().map(String::as_str).collect();
    assert_eq!(lines.iter().filter(|l| is_function(l)).count(), 6);
    assert_eq!(
        lines,
        [
            "mod k::a",
            "fn k::a::f(x: u32) -> u32",
            "async fn k::a::w()",
            "#[cfg(feature = \"x\")] struct k::S",
            "#[cfg(feature = \"x\")] field k::S::field: u8",
            "fn k::S::new() -> Self",
            "use k::a::f as g",
            "#[cfg(feature = \"y\")] mod k::c",
            "#[cfg(feature = \"y\")] fn k::c::h()",
            "#[cfg(feature = \"z\")] struct k::d::T",
            "#[cfg(feature = \"z\")] fn k::d::T::m(&self)",
            "fn k::d::e()",
            "#[cfg(feature = \"z\")] use k::d::T",
            "use k::d::e",
            "impl Clone for S",
        ]
    );
}

/// The listing of the crate whose sources are in `src`: a header, then one line per item.
fn listing(package: &str, src: &Path) -> String {
    let mut lister = Lister::default();
    let root = name_of_crate(package);
    lister.file(&root, &src.join("lib.rs"), src);
    lister.finish();
    let mut lines = lister.lines;
    lines.sort();
    lines.dedup();
    // Test support (the feature `testing`: in-memory doubles, hooks for this workspace's
    // benchmarks and fuzzers) is listed, but is not what a controller is written against.
    let testing = |l: &&String| l.contains("feature = \"testing\"");
    let functions = lines
        .iter()
        .filter(|l| is_function(l) && !testing(l))
        .count();
    let for_tests = lines
        .iter()
        .filter(|l| is_function(l) && testing(l))
        .count();
    // The density changes with every line of code, so it is printed, not committed.
    let code = lister.code_lines;
    println!(
        "{package}: {functions} public functions and methods (and {for_tests} behind the \
         feature `testing`) in {code} lines of code (src/ without generated files and test \
         modules): {:.1} per 1,000",
        functions as f64 * 1000.0 / code.max(1) as f64
    );
    let mut out = format!(
        "# The public surface of {package}, as written in src/ (crates/e2e/tests/public_api.rs).\n\
         # {functions} public functions and methods, and {for_tests} behind the feature `testing`.\n"
    );
    for line in lines {
        out.push_str(&line);
        out.push('\n');
    }
    out
}

/// A function's line: `fn path::name(args) -> T`, its qualifiers (`async`, `const`,
/// `unsafe`) before the `fn`.
fn function(path: &str, sig: &syn::Signature) -> String {
    let text = tokens(sig);
    match text.split_once("fn ") {
        Some((qualifiers, rest)) => format!("{qualifiers}fn {path}::{rest}"),
        None => text,
    }
}

/// Whether a listing line is a function's (past its markers and qualifiers).
fn is_function(line: &str) -> bool {
    let line = line.rsplit("] ").next().unwrap_or(line);
    line.split_once("fn ").is_some_and(|(qualifiers, _)| {
        qualifiers
            .split_whitespace()
            .all(|q| ["async", "const", "unsafe"].contains(&q))
    })
}

/// The lines of a source file before its test module (the convention: a trailing
/// `#[cfg(test)] mod tests`).
fn code_lines(text: &str) -> usize {
    let lines: Vec<&str> = text.lines().collect();
    let test_module = lines
        .windows(2)
        .position(|w| w[0] == "#[cfg(test)]" && w[1].starts_with("mod "));
    test_module.unwrap_or(lines.len())
}

fn name_of_crate(package: &str) -> String {
    package.replace('-', "_")
}

/// Collects the lines; trait impls wait until every public type's name is known.
#[derive(Default)]
struct Lister {
    lines: Vec<String>,
    /// Lines of the files read, without generated files and trailing test modules.
    code_lines: usize,
    public_types: BTreeSet<String>,
    trait_impls: Vec<(String, String)>,
    /// The markers of the modules around the items being read (a `#[cfg(feature = ..)]`
    /// module gates everything in it), put before each of their lines.
    gate: String,
    /// The modules declared without `pub`: what is in them is public only where a
    /// `pub use` re-exports it.
    private_modules: BTreeSet<String>,
    /// Each `pub use`'s target paths (`a::b::C`; `a::b` for a glob), with its markers.
    reexports: Vec<(String, String)>,
}

impl Lister {
    /// The file `path`, the module `module`; its child modules' files are under `dir`.
    fn file(&mut self, module: &str, path: &Path, dir: &Path) {
        let text = fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let file: syn::File =
            syn::parse_file(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        if !path.ends_with("generated.rs") {
            self.code_lines += code_lines(&text);
        }
        self.items(module, &file.items, Some(dir));
    }

    fn items(&mut self, module: &str, items: &[Item], dir: Option<&Path>) {
        for item in items {
            self.item(module, item, dir);
        }
    }

    fn item(&mut self, module: &str, item: &Item, dir: Option<&Path>) {
        let (lines, impls) = (self.lines.len(), self.trait_impls.len());
        self.item_ungated(module, item, dir);
        if matches!(item, Item::Mod(_)) || self.gate.is_empty() {
            return;
        }
        for line in &mut self.lines[lines..] {
            line.insert_str(0, &self.gate);
        }
        for (_, text) in &mut self.trait_impls[impls..] {
            text.insert_str(0, &self.gate);
        }
    }

    /// An item's lines, without the markers of the modules around it.
    fn item_ungated(&mut self, module: &str, item: &Item, dir: Option<&Path>) {
        let line = |attrs: &[Attribute], text: String| format!("{}{text}", markers(attrs));
        match item {
            Item::Mod(m) if !is_test(&m.attrs) => {
                let name = format!("{module}::{}", m.ident);
                if is_pub(&m.vis) {
                    let text = line(&m.attrs, format!("mod {name}"));
                    self.lines.push(format!("{}{text}", self.gate));
                }
                if !is_pub(&m.vis) {
                    self.private_modules.insert(name.clone());
                }
                let outer = self.gate.clone();
                self.gate.push_str(&markers(&m.attrs));
                match (&m.content, dir) {
                    (Some((_, items)), _) => {
                        let child = dir.map(|d| d.join(m.ident.to_string()));
                        self.items(&name, items, child.as_deref());
                    }
                    (None, Some(dir)) => {
                        let (file, child) = module_file(dir, &m.ident.to_string());
                        self.file(&name, &file, &child);
                    }
                    (None, None) => {}
                }
                self.gate = outer;
            }
            Item::Fn(f) if is_pub(&f.vis) && !is_test(&f.attrs) => {
                self.lines.push(line(&f.attrs, function(module, &f.sig)));
            }
            Item::Struct(s) if is_pub(&s.vis) => {
                let name = self.public_type("struct", module, &s.ident, &s.generics, &s.attrs);
                for field in s.fields.iter().filter(|f| is_pub(&f.vis)) {
                    let field_name = field
                        .ident
                        .as_ref()
                        .map_or("0".to_owned(), |i| i.to_string());
                    let text = format!("field {name}::{field_name}: {}", tokens(&field.ty));
                    self.lines.push(line(&s.attrs, text));
                }
            }
            Item::Enum(e) if is_pub(&e.vis) => {
                let name = self.public_type("enum", module, &e.ident, &e.generics, &e.attrs);
                for variant in &e.variants {
                    let text = format!(
                        "variant {name}::{}{}",
                        variant.ident,
                        fields(&variant.fields)
                    );
                    self.lines.push(line(&e.attrs, text));
                }
            }
            Item::Trait(t) if is_pub(&t.vis) => {
                let name = format!("{module}::{}", t.ident);
                self.public_types.insert(t.ident.to_string());
                let bounds = tokens(&t.supertraits);
                let text = format!("trait {name}{}: {bounds}", tokens(&t.generics));
                self.lines.push(line(&t.attrs, text));
                for inner in &t.items {
                    if let TraitItem::Fn(f) = inner {
                        let text = function(&name, &f.sig);
                        self.lines
                            .push(format!("{}{}", markers(&t.attrs), line(&f.attrs, text)));
                    }
                }
            }
            Item::Type(t) if is_pub(&t.vis) => {
                self.public_types.insert(t.ident.to_string());
                let text = format!(
                    "type {module}::{}{} = {}",
                    t.ident,
                    tokens(&t.generics),
                    tokens(&t.ty)
                );
                self.lines.push(line(&t.attrs, text));
            }
            Item::Const(c) if is_pub(&c.vis) => {
                let text = format!("const {module}::{}: {}", c.ident, tokens(&c.ty));
                self.lines.push(line(&c.attrs, text));
            }
            Item::Static(s) if is_pub(&s.vis) => {
                let text = format!("static {module}::{}: {}", s.ident, tokens(&s.ty));
                self.lines.push(line(&s.attrs, text));
            }
            Item::Use(u) if is_pub(&u.vis) => {
                let gate = format!("{}{}", self.gate, markers(&u.attrs));
                for target in use_targets(module, &u.tree) {
                    self.reexports.push((target, gate.clone()));
                }
                self.lines.push(line(
                    &u.attrs,
                    format!(
                        "use {module}::{}",
                        tokens(&u.tree).trim_start_matches("self::")
                    ),
                ));
            }
            Item::Macro(m) if m.attrs.iter().any(|a| a.path().is_ident("macro_export")) => {
                let name = m
                    .ident
                    .as_ref()
                    .map_or_else(String::new, ToString::to_string);
                self.lines.push(line(&m.attrs, format!("macro {name}!")));
            }
            Item::Impl(i) if !is_test(&i.attrs) => {
                let self_ty = tokens(&i.self_ty);
                match &i.trait_ {
                    Some((negative, path, _)) => {
                        let not = if negative.is_some() { "!" } else { "" };
                        let text = format!(
                            "{}impl{} {not}{} for {self_ty}",
                            markers(&i.attrs),
                            tokens(&i.generics),
                            tokens(path)
                        );
                        self.trait_impls.push((type_name(&self_ty), text));
                    }
                    None => {
                        for inner in &i.items {
                            let ImplItem::Fn(f) = inner else { continue };
                            if !is_pub(&f.vis) || is_test(&f.attrs) {
                                continue;
                            }
                            let ty = type_name(&self_ty);
                            let text = function(&format!("{module}::{ty}"), &f.sig);
                            let markers = format!("{}{}", markers(&i.attrs), markers(&f.attrs));
                            self.lines.push(format!("{markers}{text}"));
                        }
                    }
                }
            }
            _ => {}
        }
    }

    /// Lists the header of the public type `ident` (a struct or an enum) and notes its name
    /// for the trait implementations; its path.
    fn public_type(
        &mut self,
        kind: &str,
        module: &str,
        ident: &syn::Ident,
        generics: &syn::Generics,
        attrs: &[Attribute],
    ) -> String {
        let name = format!("{module}::{ident}");
        self.public_types.insert(ident.to_string());
        let text = format!("{kind} {name}{}", tokens(generics));
        self.lines.push(format!("{}{text}", markers(attrs)));
        name
    }

    /// Keeps the trait implementations of public types, and gives an item of a private
    /// module the markers of the re-exports that make it public, when every one has some
    /// (a `#[cfg(feature = "testing")] pub use` of an item the crate uses inside).
    fn finish(&mut self) {
        for line in &mut self.lines {
            let Some(path) = item_path(line) else {
                continue;
            };
            let behind_private = self
                .private_modules
                .iter()
                .any(|m| path.starts_with(&format!("{m}::")));
            if !behind_private {
                continue;
            }
            let mut gates = self
                .reexports
                .iter()
                .filter(|(target, _)| &path == target || path.starts_with(&format!("{target}::")));
            let first = gates.next();
            if let Some((_, gate)) = first.filter(|(_, g)| !g.is_empty())
                && gates.all(|(_, g)| !g.is_empty())
                && !line.starts_with(gate.as_str())
            {
                line.insert_str(0, gate);
            }
        }
        for (ty, text) in std::mem::take(&mut self.trait_impls) {
            if self.public_types.contains(&ty) {
                self.lines.push(text);
            }
        }
    }
}

/// The paths a `use` tree in `module` names, resolved from `self`, `super` and `crate`
/// (a glob's is its module's path); renames keep the path of what they rename.
fn use_targets(module: &str, tree: &syn::UseTree) -> Vec<String> {
    fn walk(prefix: Vec<String>, tree: &syn::UseTree, out: &mut Vec<Vec<String>>) {
        let with = |name: String| {
            let mut p = prefix.clone();
            p.push(name);
            p
        };
        match tree {
            syn::UseTree::Path(p) => walk(with(p.ident.to_string()), &p.tree, out),
            syn::UseTree::Name(n) => out.push(with(n.ident.to_string())),
            syn::UseTree::Rename(r) => out.push(with(r.ident.to_string())),
            syn::UseTree::Glob(_) => out.push(prefix),
            syn::UseTree::Group(g) => g.items.iter().for_each(|t| walk(prefix.clone(), t, out)),
        }
    }
    let mut paths = Vec::new();
    walk(Vec::new(), tree, &mut paths);
    let root = module.split("::").next().unwrap_or(module);
    paths
        .into_iter()
        .map(|segments| {
            let mut here: Vec<&str> = module.split("::").collect();
            let mut rest = segments.as_slice();
            while let Some((first, tail)) = rest.split_first() {
                match first.as_str() {
                    "self" => {}
                    "super" => {
                        here.pop();
                    }
                    "crate" => here = vec![root],
                    _ => break,
                }
                rest = tail;
            }
            here.into_iter()
                .map(str::to_owned)
                .chain(rest.iter().cloned())
                .collect::<Vec<_>>()
                .join("::")
        })
        .collect()
}

/// The path of the item a listing line is about (`k::a::f` of `fn k::a::f(x: u32)`), past
/// its markers and qualifiers; `None` for `use`, `impl` and `mod` lines.
fn item_path(line: &str) -> Option<String> {
    let line = line.rsplit("] ").next().unwrap_or(line);
    let mut words = line.split_whitespace();
    let kind = words.find(|w| !["async", "const", "unsafe"].contains(w))?;
    if ["use", "impl", "mod"].contains(&kind) || kind.starts_with("impl") {
        return None;
    }
    let rest = words.next()?;
    let end = rest
        .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
        .unwrap_or(rest.len());
    Some(rest[..end].trim_end_matches(':').to_owned())
}

/// The file of module `name` declared in a file whose children live in `dir` (src/ has no
/// `#[path]`), and the folder of its own children.
fn module_file(dir: &Path, name: &str) -> (PathBuf, PathBuf) {
    let flat = dir.join(format!("{name}.rs"));
    if flat.is_file() {
        (flat, dir.join(name))
    } else {
        (dir.join(name).join("mod.rs"), dir.join(name))
    }
}

/// A variant's fields without their docs: `(T)`, `{a: T, b: U}`.
fn fields(fields: &syn::Fields) -> String {
    let each = fields.iter().map(|f| match &f.ident {
        Some(name) => format!("{name}: {}", tokens(&f.ty)),
        None => tokens(&f.ty),
    });
    let each: Vec<String> = each.collect();
    match fields {
        syn::Fields::Named(_) => format!(" {{{}}}", each.join(", ")),
        syn::Fields::Unnamed(_) => format!("({})", each.join(", ")),
        syn::Fields::Unit => String::new(),
    }
}

/// `Foo` of `Foo<K>`, `&Foo`, `path::Foo<K>`.
fn type_name(ty: &str) -> String {
    let ty = ty.trim_start_matches('&').trim_start_matches("mut ").trim();
    let ty = ty.split('<').next().unwrap_or(ty).trim();
    ty.rsplit("::").next().unwrap_or(ty).trim().to_owned()
}

fn is_pub(vis: &Visibility) -> bool {
    matches!(vis, Visibility::Public(_))
}

/// `#[cfg(test)]` (or a `cfg` that includes `test`).
fn is_test(attrs: &[Attribute]) -> bool {
    attrs.iter().any(|a| {
        a.path().is_ident("cfg") && {
            let text = tokens(&a.meta);
            ["cfg(test)", "cfg(doctest)"].contains(&text.as_str())
                || text.starts_with("cfg(all(test")
        }
    })
}

/// What gates an item or marks it: its `cfg`s, `doc(hidden)`, `deprecated`.
fn markers(attrs: &[Attribute]) -> String {
    let mut out = String::new();
    for attr in attrs {
        let text = tokens(&attr.meta);
        if attr.path().is_ident("deprecated") {
            out.push_str("#[deprecated] ");
        } else if attr.path().is_ident("cfg") || text == "doc(hidden)" {
            out.push_str(&format!("#[{text}] "));
        }
    }
    out
}

/// The tokens of `t` as text, spaced as Rust is written (`Option<Arc<K>>`, `x: u32`,
/// `&self`), not as the token stream prints them (`Option < Arc < K > >`).
fn tokens(t: &impl ToTokens) -> String {
    let mut text = t.to_token_stream().to_string();
    for (from, to) in [
        (" :: ", "::"),
        (":: ", "::"),
        (" ::", "::"),
        (" < ", "<"),
        ("< ", "<"),
        (" <", "<"),
        (" >", ">"),
        (" ,", ","),
        ("( ", "("),
        (" )", ")"),
        (" (", "("),
        ("[ ", "["),
        (" ]", "]"),
        (" ;", ";"),
        ("& ", "&"),
        (" : ", ": "),
        (" !", "!"),
    ] {
        text = text.replace(from, to);
    }
    let text = text
        .replace("->", " -> ")
        .replace("  ", " ")
        .replace("=>", " => ");
    let text = text
        .replace(",)", ")")
        .replace("::self::", "::")
        .replace("(mut self", "(self");
    let text = text
        .replace("{ ", "{")
        .replace(", }", "}")
        .replace(" }", "}");
    text.trim_end_matches(',').to_owned()
}
