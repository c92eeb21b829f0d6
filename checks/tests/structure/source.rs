//! A crate's modules and the paths its code uses, read with `syn`.
//!
//! A crate is read from its root file through its `mod` declarations
//! (`foo.rs` or `foo/mod.rs`, `#[path]`). Every item that is not test code
//! gives the paths it names: its `use` trees (grouped, renamed, globs) and
//! every path of two or more segments in its types, expressions, patterns
//! and macro arguments. Test code is an item with `#[cfg(test)]` (or
//! `#[cfg(all(test, ..))]`), a `#[test]` fn or a `mod tests`, wherever it
//! stands in a file; a file declared by a test module is test code whole.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use proc_macro2::{TokenStream, TokenTree};
use syn::spanned::Spanned;
use syn::visit::Visit;

/// A module: a file, or an inline `mod name { .. }` in one.
#[derive(Debug, Default)]
pub struct Module {
    /// The module's path in its crate (empty for the root).
    pub path: Vec<String>,
    /// Index of its file in [`Crate::files`].
    pub file: usize,
    pub parent: Option<usize>,
    pub children: BTreeMap<String, usize>,
    /// Names of the items defined here (not test code).
    pub items: BTreeSet<String>,
    /// Names brought in by `use` (not test code): name -> where it points.
    pub uses: BTreeMap<String, Pointer>,
    /// `use path::*` (not test code).
    pub globs: Vec<Pointer>,
}

/// A path as written, and the module it is read from.
#[derive(Clone, Debug)]
pub struct Pointer {
    /// The module where the first of `segments` is looked up.
    pub base: usize,
    pub segments: Vec<String>,
    /// Whether the first segment may name another crate (a path that
    /// starts neither with `crate`, `self` nor `super`).
    pub relative: bool,
}

/// A path named by a file's code.
#[derive(Clone, Debug)]
pub struct Use {
    pub pointer: Pointer,
    /// The path as written, for the reports.
    pub text: String,
    pub line: usize,
}

/// A source file of the crate.
#[derive(Debug, Default)]
pub struct File {
    /// Relative to the crate's `src/` directory, with `/`.
    pub rel: String,
    pub test: bool,
    /// The paths named by its code that is not test code.
    pub uses: Vec<Use>,
}

/// A crate read from its root file.
#[derive(Debug, Default)]
pub struct Crate {
    pub src: PathBuf,
    pub files: Vec<File>,
    pub modules: Vec<Module>,
}

/// Whether an item with these attributes is test code.
pub fn is_test(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| {
        if a.path().is_ident("test") {
            return true;
        }
        if !a.path().is_ident("cfg") {
            return false;
        }
        a.parse_args::<syn::Meta>().is_ok_and(|m| cfg_needs_test(&m))
    })
}

/// Whether a `cfg` predicate holds only in a test build.
fn cfg_needs_test(meta: &syn::Meta) -> bool {
    match meta {
        syn::Meta::Path(p) => p.is_ident("test"),
        syn::Meta::List(l) if l.path.is_ident("all") => l
            .parse_args_with(syn::punctuated::Punctuated::<syn::Meta, syn::Token![,]>::parse_terminated)
            .is_ok_and(|args| args.iter().any(cfg_needs_test)),
        _ => false,
    }
}

/// The attributes of an item, if it has any.
pub fn item_attrs(item: &syn::Item) -> &[syn::Attribute] {
    use syn::Item::*;
    match item {
        Const(i) => &i.attrs,
        Enum(i) => &i.attrs,
        ExternCrate(i) => &i.attrs,
        Fn(i) => &i.attrs,
        ForeignMod(i) => &i.attrs,
        Impl(i) => &i.attrs,
        Macro(i) => &i.attrs,
        Mod(i) => &i.attrs,
        Static(i) => &i.attrs,
        Struct(i) => &i.attrs,
        Trait(i) => &i.attrs,
        TraitAlias(i) => &i.attrs,
        Type(i) => &i.attrs,
        Union(i) => &i.attrs,
        Use(i) => &i.attrs,
        _ => &[],
    }
}

/// Whether an item is test code.
pub fn is_test_item(item: &syn::Item) -> bool {
    match item {
        syn::Item::Mod(m) if m.ident == "tests" => true,
        _ => is_test(item_attrs(item)),
    }
}

/// The name an item defines in its module's namespace.
fn item_name(item: &syn::Item) -> Option<String> {
    use syn::Item::*;
    let ident = match item {
        Const(i) => &i.ident,
        Enum(i) => &i.ident,
        Fn(i) => &i.sig.ident,
        Static(i) => &i.ident,
        Struct(i) => &i.ident,
        Trait(i) => &i.ident,
        TraitAlias(i) => &i.ident,
        Type(i) => &i.ident,
        Union(i) => &i.ident,
        Macro(i) => i.ident.as_ref()?,
        _ => return None,
    };
    Some(ident.to_string())
}

impl Crate {
    /// Reads the crate whose root file is `src/<root>` (`lib.rs`, `main.rs`).
    pub fn read(src: &Path, root: &str) -> Crate {
        let mut krate = Crate {
            src: src.to_path_buf(),
            ..Crate::default()
        };
        let text =
            std::fs::read_to_string(src.join(root)).unwrap_or_else(|e| panic!("{}: {e}", src.join(root).display()));
        krate.read_file_text(root, &text, Vec::new(), None, false);
        krate
    }

    /// Reads a crate whose files are given as text (for the checker's own
    /// tests): `files` maps a path relative to `src/` to its text; the root
    /// is `lib.rs`.
    pub fn from_texts(files: &[(&str, &str)]) -> Crate {
        let mut krate = Crate {
            src: PathBuf::from("/nonexistent"),
            ..Crate::default()
        };
        let texts: BTreeMap<String, String> = files.iter().map(|(p, t)| (p.to_string(), t.to_string())).collect();
        krate.read_texts(&texts);
        krate
    }

    fn read_texts(&mut self, texts: &BTreeMap<String, String>) {
        let root = texts.get("lib.rs").expect("a fixture has a lib.rs");
        FIXTURES.with(|f| *f.borrow_mut() = Some(texts.clone()));
        self.read_file_text("lib.rs", root, Vec::new(), None, false);
        FIXTURES.with(|f| *f.borrow_mut() = None);
    }

    /// The text of a file of the crate, if it exists.
    fn text(&self, rel: &str) -> Option<String> {
        let fixture = FIXTURES.with(|f| f.borrow().as_ref().map(|t| t.get(rel).cloned()));
        match fixture {
            Some(text) => text,
            None => std::fs::read_to_string(self.src.join(rel)).ok(),
        }
    }

    fn read_file_text(&mut self, rel: &str, text: &str, path: Vec<String>, parent: Option<usize>, test: bool) -> usize {
        let ast = syn::parse_file(text).unwrap_or_else(|e| panic!("{rel}: {e}"));
        let file = self.files.len();
        self.files.push(File {
            rel: rel.to_string(),
            test,
            uses: Vec::new(),
        });
        let module = self.new_module(path, file, parent);
        // Where the files of its `mod foo;` declarations are.
        let name = Path::new(rel)
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned();
        let dir = Path::new(rel).parent().unwrap_or(Path::new("")).to_path_buf();
        let children_dir = if matches!(name.as_str(), "lib.rs" | "main.rs" | "mod.rs") || parent.is_none() {
            dir.clone()
        } else {
            dir.join(name.trim_end_matches(".rs"))
        };
        self.read_items(
            &ast.items,
            module,
            &Dirs {
                own: dir,
                children: children_dir,
            },
            test,
        );
        module
    }

    fn new_module(&mut self, path: Vec<String>, file: usize, parent: Option<usize>) -> usize {
        let id = self.modules.len();
        if let (Some(p), Some(name)) = (parent, path.last()) {
            self.modules[p].children.insert(name.clone(), id);
        }
        self.modules.push(Module {
            path,
            file,
            parent,
            ..Module::default()
        });
        id
    }

    fn read_items(&mut self, items: &[syn::Item], module: usize, dirs: &Dirs, test: bool) {
        // Declarations first, so that the paths of every item can be read
        // against the module's names.
        for item in items {
            let item_test = test || is_test_item(item);
            match item {
                syn::Item::Mod(m) => self.read_mod(m, module, dirs, item_test),
                syn::Item::Use(u) if !item_test => {
                    let mut found = Vec::new();
                    use_tree(&u.tree, Vec::new(), &mut found);
                    for (name, segments) in found {
                        let pointer = self.pointer(module, &segments);
                        let Some(pointer) = pointer else { continue };
                        match name {
                            Some(n) if n != "_" => {
                                self.modules[module].uses.insert(n, pointer);
                            }
                            Some(_) => {}
                            None => self.modules[module].globs.push(pointer),
                        }
                    }
                }
                _ if !item_test => {
                    if let Some(name) = item_name(item) {
                        self.modules[module].items.insert(name);
                    }
                }
                _ => {}
            }
        }
        if test {
            return;
        }
        for item in items {
            if is_test_item(item) {
                continue;
            }
            match item {
                syn::Item::Mod(_) => {}
                syn::Item::Use(u) => {
                    let mut found = Vec::new();
                    use_tree(&u.tree, Vec::new(), &mut found);
                    for (_, segments) in found {
                        self.add_use(module, &segments, line_of(u.span()));
                    }
                }
                _ => {
                    let mut paths = Paths::default();
                    paths.visit_item(item);
                    for (segments, line) in paths.found {
                        if segments.len() > 1 {
                            self.add_use(module, &segments, line);
                        }
                    }
                }
            }
        }
    }

    fn read_mod(&mut self, m: &syn::ItemMod, module: usize, dirs: &Dirs, test: bool) {
        let mut path = self.modules[module].path.clone();
        path.push(m.ident.to_string());
        let file = self.modules[module].file;
        if let Some((_, items)) = &m.content {
            let inner = self.new_module(path, file, Some(module));
            let d = Dirs {
                own: dirs.children.join(m.ident.to_string()),
                children: dirs.children.join(m.ident.to_string()),
            };
            self.read_items(items, inner, &d, test);
            return;
        }
        let explicit = m.attrs.iter().find_map(|a| match &a.meta {
            syn::Meta::NameValue(nv) if nv.path.is_ident("path") => match &nv.value {
                syn::Expr::Lit(syn::ExprLit {
                    lit: syn::Lit::Str(s), ..
                }) => Some(s.value()),
                _ => None,
            },
            _ => None,
        });
        let candidates = match explicit {
            Some(p) => vec![dirs.own.join(p)],
            None => vec![
                dirs.children.join(format!("{}.rs", m.ident)),
                dirs.children.join(m.ident.to_string()).join("mod.rs"),
            ],
        };
        for candidate in candidates {
            let rel = candidate.to_string_lossy().replace('\\', "/");
            if let Some(text) = self.text(&rel) {
                self.read_file_text(&rel, &text, path, Some(module), test);
                return;
            }
        }
    }

    /// A path as written in `module`, read from the module it starts at.
    fn pointer(&self, module: usize, segments: &[String]) -> Option<Pointer> {
        let mut base = module;
        let mut rest = segments;
        let mut relative = true;
        while let Some(first) = rest.first() {
            match first.as_str() {
                "crate" => base = 0,
                "self" => {}
                "super" => base = self.modules[base].parent?,
                "Self" => return None,
                _ => break,
            }
            relative = false;
            rest = &rest[1..];
        }
        Some(Pointer {
            base,
            segments: rest.to_vec(),
            relative,
        })
    }

    fn add_use(&mut self, module: usize, segments: &[String], line: usize) {
        let Some(pointer) = self.pointer(module, segments) else {
            return;
        };
        let file = self.modules[module].file;
        self.files[file].uses.push(Use {
            pointer,
            text: segments.join("::"),
            line,
        });
    }

    /// The module whose file holds what a pointer names, or `None` when it
    /// names something outside the crate (another crate, a local name).
    pub fn resolve(&self, pointer: &Pointer) -> Option<usize> {
        self.walk(pointer.base, &pointer.segments, pointer.relative, 0)
    }

    fn walk(&self, module: usize, segments: &[String], first: bool, depth: usize) -> Option<usize> {
        let m = &self.modules[module];
        let Some(name) = segments.first() else {
            return Some(module);
        };
        if depth > 32 {
            return Some(module);
        }
        if let Some(&child) = m.children.get(name) {
            return self.walk(child, &segments[1..], false, depth + 1);
        }
        if m.items.contains(name) {
            return Some(module);
        }
        if let Some(p) = m.uses.get(name) {
            let mut through = p.segments.clone();
            through.extend_from_slice(&segments[1..]);
            return self.walk(p.base, &through, p.relative, depth + 1);
        }
        for glob in &m.globs {
            if let Some(g) = self.walk(glob.base, &glob.segments, glob.relative, depth + 1) {
                let gm = &self.modules[g];
                if gm.children.contains_key(name) || gm.items.contains(name) || gm.uses.contains_key(name) {
                    return self.walk(g, segments, false, depth + 1);
                }
            }
        }
        if first {
            None
        } else {
            Some(module)
        }
    }
}

thread_local! {
    static FIXTURES: std::cell::RefCell<Option<BTreeMap<String, String>>> = const { std::cell::RefCell::new(None) };
}

/// Where a file's `#[path]` modules and its other `mod foo;` files are.
struct Dirs {
    own: PathBuf,
    children: PathBuf,
}

/// The line of a span (1-based).
pub fn line_of(span: proc_macro2::Span) -> usize {
    span.start().line
}

/// The leaves of a `use` tree: (the name it binds, or `None` for a glob;
/// the full path).
fn use_tree(tree: &syn::UseTree, prefix: Vec<String>, out: &mut Vec<(Option<String>, Vec<String>)>) {
    match tree {
        syn::UseTree::Path(p) => {
            let mut prefix = prefix;
            prefix.push(p.ident.to_string());
            use_tree(&p.tree, prefix, out);
        }
        syn::UseTree::Name(n) if n.ident == "self" => {
            let name = prefix.last().cloned();
            out.push((name, prefix));
        }
        syn::UseTree::Name(n) => {
            let mut path = prefix;
            path.push(n.ident.to_string());
            out.push((Some(n.ident.to_string()), path));
        }
        syn::UseTree::Rename(r) => {
            let mut path = prefix;
            if r.ident != "self" {
                path.push(r.ident.to_string());
            }
            out.push((Some(r.rename.to_string()), path));
        }
        syn::UseTree::Glob(_) => out.push((None, prefix)),
        syn::UseTree::Group(g) => {
            for t in &g.items {
                use_tree(t, prefix.clone(), out);
            }
        }
    }
}

/// The paths an item's code names (its test items aside).
#[derive(Default)]
struct Paths {
    found: Vec<(Vec<String>, usize)>,
}

impl<'a> Visit<'a> for Paths {
    fn visit_path(&mut self, p: &'a syn::Path) {
        let segments: Vec<String> = p.segments.iter().map(|s| s.ident.to_string()).collect();
        self.found.push((segments, line_of(p.span())));
        syn::visit::visit_path(self, p);
    }
    fn visit_item_use(&mut self, u: &'a syn::ItemUse) {
        if is_test(&u.attrs) {
            return;
        }
        let mut found = Vec::new();
        use_tree(&u.tree, Vec::new(), &mut found);
        for (_, segments) in found {
            self.found.push((segments, line_of(u.span())));
        }
    }
    fn visit_item(&mut self, i: &'a syn::Item) {
        if !is_test_item(i) {
            syn::visit::visit_item(self, i);
        }
    }
    fn visit_impl_item_fn(&mut self, f: &'a syn::ImplItemFn) {
        if !is_test(&f.attrs) {
            syn::visit::visit_impl_item_fn(self, f);
        }
    }
    // `#[error(..)]`, `#[serde(..)]`: names of attributes, not of items.
    fn visit_attribute(&mut self, _: &'a syn::Attribute) {}
    fn visit_macro(&mut self, m: &'a syn::Macro) {
        syn::visit::visit_macro(self, m);
        macro_paths(m.tokens.clone(), &mut self.found);
    }
}

/// The paths of two or more segments in a macro's tokens
/// (`format!("{}", crate::x::y())`).
fn macro_paths(tokens: TokenStream, out: &mut Vec<(Vec<String>, usize)>) {
    let tokens: Vec<TokenTree> = tokens.into_iter().collect();
    let mut i = 0;
    while i < tokens.len() {
        match &tokens[i] {
            TokenTree::Group(g) => {
                macro_paths(g.stream(), out);
                i += 1;
            }
            TokenTree::Ident(id) => {
                let after_colons = i >= 1 && matches!(&tokens[i - 1], TokenTree::Punct(p) if p.as_char() == ':');
                let mut segments = vec![id.to_string()];
                let line = line_of(id.span());
                let mut j = i + 1;
                while j + 2 < tokens.len() + 1 {
                    let colons = matches!(tokens.get(j), Some(TokenTree::Punct(p)) if p.as_char() == ':')
                        && matches!(tokens.get(j + 1), Some(TokenTree::Punct(p)) if p.as_char() == ':');
                    match (colons, tokens.get(j + 2)) {
                        (true, Some(TokenTree::Ident(next))) => {
                            segments.push(next.to_string());
                            j += 3;
                        }
                        _ => break,
                    }
                }
                if segments.len() > 1 && !after_colons {
                    out.push((segments, line));
                }
                i = j;
            }
            _ => i += 1,
        }
    }
}

/// Where `unsafe` stands in a file's code (test code included), by line.
pub fn unsafe_lines(text: &str) -> Vec<usize> {
    #[derive(Default)]
    struct Unsafe {
        lines: Vec<usize>,
    }
    impl<'a> Visit<'a> for Unsafe {
        fn visit_expr_unsafe(&mut self, e: &'a syn::ExprUnsafe) {
            self.lines.push(line_of(e.unsafe_token.span));
            syn::visit::visit_expr_unsafe(self, e);
        }
        fn visit_signature(&mut self, s: &'a syn::Signature) {
            if let Some(u) = &s.unsafety {
                self.lines.push(line_of(u.span));
            }
            syn::visit::visit_signature(self, s);
        }
        fn visit_item_impl(&mut self, i: &'a syn::ItemImpl) {
            if let Some(u) = &i.unsafety {
                self.lines.push(line_of(u.span));
            }
            syn::visit::visit_item_impl(self, i);
        }
        fn visit_item_trait(&mut self, i: &'a syn::ItemTrait) {
            if let Some(u) = &i.unsafety {
                self.lines.push(line_of(u.span));
            }
            syn::visit::visit_item_trait(self, i);
        }
        fn visit_item_foreign_mod(&mut self, i: &'a syn::ItemForeignMod) {
            self.lines.push(line_of(i.abi.extern_token.span));
            syn::visit::visit_item_foreign_mod(self, i);
        }
        fn visit_type_bare_fn(&mut self, t: &'a syn::TypeBareFn) {
            if let Some(u) = &t.unsafety {
                self.lines.push(line_of(u.span));
            }
            syn::visit::visit_type_bare_fn(self, t);
        }
        fn visit_macro(&mut self, m: &'a syn::Macro) {
            fn scan(tokens: TokenStream, lines: &mut Vec<usize>) {
                for t in tokens {
                    match t {
                        TokenTree::Ident(i) if i == "unsafe" => lines.push(line_of(i.span())),
                        TokenTree::Group(g) => scan(g.stream(), lines),
                        _ => {}
                    }
                }
            }
            scan(m.tokens.clone(), &mut self.lines);
        }
    }
    let Ok(ast) = syn::parse_file(text) else {
        return Vec::new();
    };
    let mut u = Unsafe::default();
    u.visit_file(&ast);
    u.lines.sort();
    u.lines.dedup();
    u.lines
}

/// The lines of a Rust file that are test code (1-based, inclusive
/// ranges): its test items wherever they stand, and its test fns in impls.
pub fn test_ranges(text: &str) -> Vec<(usize, usize)> {
    fn walk_items(items: &[syn::Item], out: &mut Vec<(usize, usize)>) {
        for item in items {
            if is_test_item(item) {
                let span = item.span();
                // The item's attributes start it.
                let start = item_attrs(item)
                    .iter()
                    .map(|a| line_of(a.span()))
                    .min()
                    .unwrap_or(span.start().line);
                out.push((start.min(span.start().line), span.end().line));
                continue;
            }
            match item {
                syn::Item::Mod(m) => {
                    if let Some((_, inner)) = &m.content {
                        walk_items(inner, out);
                    }
                }
                syn::Item::Impl(i) => {
                    for ii in &i.items {
                        if let syn::ImplItem::Fn(f) = ii {
                            if is_test(&f.attrs) {
                                let start = f.attrs.iter().map(|a| line_of(a.span())).min().unwrap_or(0);
                                out.push((start, f.span().end().line));
                            }
                        }
                    }
                }
                _ => {}
            }
        }
    }
    let Ok(ast) = syn::parse_file(text) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    walk_items(&ast.items, &mut out);
    out
}

/// The lines of a Rust file's non-test code where a `Result` carries a
/// `String` as its error (`Result<T, String>`, `std::result::Result<..>`).
pub fn string_error_lines(text: &str) -> Vec<usize> {
    #[derive(Default)]
    struct Found {
        lines: Vec<usize>,
    }
    fn is_string(t: &syn::Type) -> bool {
        matches!(t, syn::Type::Path(p) if p.qself.is_none()
            && p.path.segments.last().is_some_and(|s| s.ident == "String" && s.arguments.is_none()))
    }
    impl<'a> Visit<'a> for Found {
        fn visit_type_path(&mut self, t: &'a syn::TypePath) {
            if let Some(last) = t.path.segments.last() {
                if let syn::PathArguments::AngleBracketed(args) = &last.arguments {
                    let types: Vec<&syn::Type> = args
                        .args
                        .iter()
                        .filter_map(|a| match a {
                            syn::GenericArgument::Type(t) => Some(t),
                            _ => None,
                        })
                        .collect();
                    if last.ident == "Result" && types.len() == 2 && is_string(types[1]) {
                        self.lines.push(line_of(last.ident.span()));
                    }
                }
            }
            syn::visit::visit_type_path(self, t);
        }
    }
    let Ok(ast) = syn::parse_file(text) else {
        return Vec::new();
    };
    let mut f = Found::default();
    f.visit_file(&ast);
    let tests = test_ranges(text);
    f.lines.retain(|l| !tests.iter().any(|(a, b)| (a..=b).contains(&l)));
    f.lines.sort();
    f.lines.dedup();
    f.lines
}
