//! The files of a crate and the files whose items each uses; the layers
//! ARCHITECTURE.md gives them; the circles among them.

use std::collections::BTreeMap;

use super::source::Crate;

/// One file's use of another's items: the names it uses, with a line each.
pub type Edges = BTreeMap<(usize, usize), Vec<(String, usize)>>;

/// Every use of one file's items by another (test code aside).
pub fn edges(krate: &Crate) -> Edges {
    let mut out = Edges::new();
    for (from, file) in krate.files.iter().enumerate() {
        if file.test {
            continue;
        }
        for u in &file.uses {
            let Some(module) = krate.resolve(&u.pointer) else {
                continue;
            };
            let to = krate.modules[module].file;
            if to == from || krate.files[to].test {
                continue;
            }
            out.entry((from, to)).or_default().push((u.text.clone(), u.line));
        }
    }
    out
}

/// The layers of a table of ARCHITECTURE.md: each row `| N | \`a\`, \`b/c\` | .. |`
/// gives a layer to the modules (or files, `b/c`) it names. `None` when
/// the section is not there.
pub fn layers(architecture: &str, section: &str) -> Option<BTreeMap<String, u32>> {
    let heading = format!("## {section}\n");
    let text = architecture.split(&heading).nth(1)?;
    let text = text.split("\n## ").next().unwrap_or(text);
    let mut map = BTreeMap::new();
    for line in text.lines() {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        if cells.len() < 4 {
            continue;
        }
        let Ok(layer) = cells[1].parse::<u32>() else { continue };
        for module in cells[2].split(',') {
            let module = module.trim().trim_matches('`').trim_end_matches(".rs");
            assert!(
                map.insert(module.to_string(), layer).is_none(),
                "{module} is listed twice in ARCHITECTURE.md's {section}"
            );
        }
    }
    Some(map)
}

/// The entry of the layer table a module belongs to: the longest one that
/// is its path or a prefix of it (`unwind/vdso` before `unwind`). `None`
/// for the crate root.
pub fn layer_of<'a>(layers: &'a BTreeMap<String, u32>, path: &[String]) -> Option<Result<(&'a str, u32), String>> {
    if path.is_empty() {
        return None;
    }
    for n in (1..=path.len()).rev() {
        let key = path[..n].join("/");
        if let Some((k, &l)) = layers.get_key_value(&key) {
            return Some(Ok((k.as_str(), l)));
        }
    }
    Some(Err(path[0].clone()))
}

/// Every use against the layers: a file uses only the items of its own
/// entry of the table or of a lower layer's (the crate root's files sit
/// above every layer; nothing may use the crate root's own items).
pub fn against_layers(krate: &Crate, layers: &BTreeMap<String, u32>) -> Vec<String> {
    let path_of = |file: usize| {
        let m = krate
            .modules
            .iter()
            .find(|m| m.file == file)
            .expect("a file has a module");
        m.path.clone()
    };
    let mut wrong = Vec::new();
    for ((from, to), names) in edges(krate) {
        let rel = &krate.files[from].rel;
        let Some(mine) = layer_of(layers, &path_of(from)) else {
            continue;
        };
        let (module, mine) = match mine {
            Ok(m) => m,
            Err(m) => {
                wrong.push(format!("{rel}: module `{m}` is not in ARCHITECTURE.md's layers"));
                continue;
            }
        };
        for (name, line) in names {
            match layer_of(layers, &path_of(to)) {
                Some(Ok((theirs, _))) if theirs == module => {}
                Some(Ok((_, l))) if l < mine => {}
                Some(Ok((theirs, l))) => wrong.push(format!(
                    "{rel}:{line}: `{module}` (layer {mine}) uses `{name}` of `{theirs}` (layer {l})"
                )),
                Some(Err(theirs)) => wrong.push(format!(
                    "{rel}:{line}: `{module}` uses `{name}` of `{theirs}`, which is not in ARCHITECTURE.md's layers"
                )),
                None => wrong.push(format!(
                    "{rel}:{line}: `{module}` uses `{name}` of the crate root, which is above every layer"
                )),
            }
        }
    }
    wrong
}

/// The circles between files: each set of two or more files that reach
/// each other through their uses, with the uses that tie them.
pub fn circles(krate: &Crate) -> Vec<String> {
    let mut edges = edges(krate);
    // A part's use of its whole's items (`super::Error` in `dll/load.rs`,
    // of `dll/mod.rs`) is no circle: the whole is the parts' shared face.
    edges.retain(|&(from, to), _| !ancestor(krate, to, from));
    let n = krate.files.len();
    let mut next: Vec<Vec<usize>> = vec![Vec::new(); n];
    for &(from, to) in edges.keys() {
        next[from].push(to);
    }
    let mut out = Vec::new();
    for component in strongly_connected(&next) {
        if component.len() < 2 {
            continue;
        }
        let mut files: Vec<&str> = component.iter().map(|&f| krate.files[f].rel.as_str()).collect();
        files.sort();
        let mut ties = Vec::new();
        for (&(from, to), names) in &edges {
            if component.contains(&from) && component.contains(&to) {
                let mut names: Vec<&str> = names.iter().map(|(n, _)| n.as_str()).collect();
                names.sort();
                names.dedup();
                ties.push(format!(
                    "  {} -> {}: {}",
                    krate.files[from].rel,
                    krate.files[to].rel,
                    names.join(", ")
                ));
            }
        }
        out.push(format!("{}\n{}", files.join(" <-> "), ties.join("\n")));
    }
    out.sort();
    out
}

/// Whether file `whole` is the file of a module above the module of
/// file `part`.
fn ancestor(krate: &Crate, whole: usize, part: usize) -> bool {
    let Some(mut m) = krate.modules.iter().position(|m| m.file == part) else {
        return false;
    };
    while let Some(p) = krate.modules[m].parent {
        if krate.modules[p].file == whole {
            return true;
        }
        m = p;
    }
    false
}

/// Tarjan's strongly connected components.
fn strongly_connected(next: &[Vec<usize>]) -> Vec<Vec<usize>> {
    struct State<'a> {
        next: &'a [Vec<usize>],
        index: Vec<Option<usize>>,
        low: Vec<usize>,
        on_stack: Vec<bool>,
        stack: Vec<usize>,
        count: usize,
        out: Vec<Vec<usize>>,
    }
    fn visit(s: &mut State<'_>, v: usize) {
        s.index[v] = Some(s.count);
        s.low[v] = s.count;
        s.count += 1;
        s.stack.push(v);
        s.on_stack[v] = true;
        for &w in &s.next[v] {
            match s.index[w] {
                None => {
                    visit(s, w);
                    s.low[v] = s.low[v].min(s.low[w]);
                }
                Some(i) if s.on_stack[w] => s.low[v] = s.low[v].min(i),
                Some(_) => {}
            }
        }
        if Some(s.low[v]) == s.index[v] {
            let mut component = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on_stack[w] = false;
                component.push(w);
                if w == v {
                    break;
                }
            }
            s.out.push(component);
        }
    }
    let n = next.len();
    let mut s = State {
        next,
        index: vec![None; n],
        low: vec![0; n],
        on_stack: vec![false; n],
        stack: Vec::new(),
        count: 0,
        out: Vec::new(),
    };
    for v in 0..n {
        if s.index[v].is_none() {
            visit(&mut s, v);
        }
    }
    s.out
}
