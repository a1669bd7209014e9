//! The modules of every crate of the workspace use each other one way: no module reaches
//! itself through the `crate::` paths of its code (tests and comments aside), so each can be
//! read knowing only those below it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// The top-level module of a source file (`tables/timing.rs` -> `tables`), `None` for the
/// crate root and the binary.
fn module_of(relative: &Path) -> Option<String> {
    let first = relative.components().next()?.as_os_str().to_str()?;
    let name = first.strip_suffix(".rs").unwrap_or(first);
    (!matches!(name, "lib" | "main")).then(|| name.to_string())
}

/// The modules named as `crate::<module>` in `source`, before its tests, outside comments.
fn uses(source: &str) -> BTreeSet<String> {
    let code = source.split("#[cfg(test)]").next().unwrap_or_default();
    let mut out = BTreeSet::new();
    for line in code.lines().filter(|l| !l.trim_start().starts_with("//")) {
        for (i, _) in line.match_indices("crate::") {
            let name: String = line[i + "crate::".len()..]
                .chars()
                .take_while(|c| c.is_ascii_lowercase() || *c == '_')
                .collect();
            if !name.is_empty() {
                out.insert(name);
            }
        }
    }
    out
}

fn collect(dir: &Path, root: &Path, graph: &mut BTreeMap<String, BTreeSet<String>>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            collect(&path, root, graph);
        } else if path.extension().is_some_and(|e| e == "rs")
            && let Some(module) = module_of(path.strip_prefix(root).unwrap())
        {
            let mut deps = uses(&std::fs::read_to_string(&path).unwrap());
            deps.remove(&module);
            graph.entry(module).or_default().extend(deps);
        }
    }
}

/// A path `from -> ... -> from` in `graph`, if there is one.
fn cycle_through(graph: &BTreeMap<String, BTreeSet<String>>, from: &str) -> Option<Vec<String>> {
    let mut stack = vec![vec![from.to_string()]];
    let mut seen = BTreeSet::new();
    while let Some(path) = stack.pop() {
        let last = path.last().unwrap();
        for next in graph.get(last).into_iter().flatten() {
            if next == from {
                let mut cycle = path.clone();
                cycle.push(next.clone());
                return Some(cycle);
            }
            if seen.insert(next.clone()) {
                let mut longer = path.clone();
                longer.push(next.clone());
                stack.push(longer);
            }
        }
    }
    None
}

/// The module graph of one crate's `src`.
fn graph_of(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let mut graph = BTreeMap::new();
    collect(src, src, &mut graph);
    graph
}

#[test]
fn no_module_depends_on_itself() {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let root = crates.join("..");
    let mut srcs: Vec<_> = std::fs::read_dir(&crates)
        .unwrap()
        .map(|e| e.unwrap().path().join("src"))
        .chain(["python", "xtask", "benches"].map(|d| root.join(d).join("src")))
        .filter(|s| s.is_dir())
        .collect();
    srcs.sort();
    assert!(srcs.len() >= 14, "the workspace's crates: {srcs:?}");
    // The modules the run directory's reorganisation separated are all there.
    let harness = graph_of(&crates.join("swbnn-harness").join("src"));
    for m in [
        "store",
        "experiment",
        "results",
        "setup",
        "tables",
        "run_dir",
    ] {
        assert!(harness.contains_key(m), "no module {m}: {harness:?}");
    }
    let mut cycles = Vec::new();
    for src in &srcs {
        let graph = graph_of(src);
        cycles.extend(
            graph
                .keys()
                .filter_map(|m| cycle_through(&graph, m))
                .map(|c| format!("{}: {}", src.display(), c.join(" -> "))),
        );
    }
    assert!(cycles.is_empty(), "import cycles: {cycles:#?}");
}

#[test]
fn a_cycle_is_found() {
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    graph.entry("a".into()).or_default().insert("b".into());
    graph.entry("b".into()).or_default().insert("c".into());
    assert!(cycle_through(&graph, "a").is_none());
    graph.entry("c".into()).or_default().insert("a".into());
    assert_eq!(cycle_through(&graph, "a").unwrap(), ["a", "b", "c", "a"]);
    assert_eq!(
        uses("use crate::store::{self, StageDir};\n// crate::tables\n#[cfg(test)]\ncrate::x"),
        BTreeSet::from(["store".to_string()])
    );
}
