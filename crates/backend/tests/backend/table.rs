//! `firemesh_backend::table` lists every method of the backend traits `Sharded<B>` implements,
//! each under the family whose rule its code runs: checked against Burn's own trait sources (found
//! through `cargo metadata`) and against this crate's `src/ops/` and `src/backend.rs`.

use firemesh_backend::table::{self, Family};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The traits `Sharded<B>` implements, by the file of burn-backend that declares them.
const TRAITS: &[(&str, &str)] = &[
    ("src/backend/base.rs", "Backend"),
    ("src/backend/ops/tensor.rs", "FloatTensorOps"),
    ("src/backend/ops/int_tensor.rs", "IntTensorOps"),
    ("src/backend/ops/bool_tensor.rs", "BoolTensorOps"),
    ("src/backend/ops/qtensor.rs", "QTensorOps"),
    ("src/backend/ops/modules/base.rs", "ModuleOps"),
    ("src/backend/ops/activation.rs", "ActivationOps"),
    ("src/backend/ops/transaction.rs", "TransactionOps"),
];

/// Trait defaults kept on purpose: a transaction reads each tensor through `Sharded`'s own
/// `*_into_data`, which is what the default does.
const INHERITED: &[&str] = &["tr_execute"];

/// Source without `//` comments (doc comments hold braces and the word `fn`).
fn code(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
    text.lines()
        .map(|l| l.split("//").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The text between the brace at `open` and its match.
fn block(src: &str, open: usize) -> &str {
    let mut depth = 0;
    for (i, c) in src[open..].char_indices() {
        match c {
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    return &src[open + 1..open + i];
                }
            }
            _ => {}
        }
    }
    panic!("unbalanced braces")
}

/// The names of the functions declared at the top level of a block.
fn top_level_fns(body: &str) -> Vec<String> {
    let (mut depth, mut names) = (0, Vec::new());
    let bytes = body.as_bytes();
    for (i, c) in body.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            'f' if depth == 0
                && body[i..].starts_with("fn ")
                && (i == 0 || !(bytes[i - 1].is_ascii_alphanumeric() || bytes[i - 1] == b'_')) =>
            {
                let name: String = body[i + 3..]
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                names.push(name);
            }
            _ => {}
        }
    }
    names
}

/// The host's target triple, from `rustc -vV`.
fn host_triple() -> String {
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let out = std::process::Command::new(rustc)
        .arg("-vV")
        .output()
        .expect("rustc -vV runs");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.lines()
        .find_map(|l| l.strip_prefix("host: "))
        .expect("rustc -vV names the host")
        .trim()
        .to_string()
}

fn burn_backend_dir() -> PathBuf {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let manifest = concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml");
    // Offline and for this platform only: a fresh machine has downloaded only the packages
    // its build needed, not those of other platforms' dependencies.
    let out = std::process::Command::new(cargo)
        .args([
            "metadata",
            "--format-version",
            "1",
            "--offline",
            "--filter-platform",
            &host_triple(),
            "--manifest-path",
            manifest,
        ])
        .output()
        .expect("cargo metadata runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let meta: serde_json::Value = serde_json::from_slice(&out.stdout).expect("metadata JSON");
    let package = meta["packages"]
        .as_array()
        .expect("packages")
        .iter()
        .find(|p| p["name"] == "burn-backend")
        .expect("burn-backend is a dependency");
    let manifest = package["manifest_path"].as_str().expect("manifest path");
    Path::new(manifest)
        .parent()
        .expect("package dir")
        .to_path_buf()
}

/// Every method of every trait, from Burn's sources.
fn trait_methods() -> BTreeMap<String, &'static str> {
    let dir = burn_backend_dir();
    let mut all = BTreeMap::new();
    for (file, name) in TRAITS {
        let src = code(&dir.join(file));
        let start = src
            .match_indices(&format!("pub trait {name}"))
            .map(|(i, m)| (i, i + m.len()))
            .find(|(_, end)| !src[*end..].starts_with(|c: char| c.is_alphanumeric() || c == '_'))
            .unwrap_or_else(|| panic!("{name} in {file}"))
            .0;
        let open = start + src[start..].find('{').expect("trait body");
        for m in top_level_fns(block(&src, open)) {
            all.insert(m, *name);
        }
    }
    all
}

fn src(file: &str) -> String {
    code(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src").join(file))
}

/// The rule modules, by the family they belong to.
fn family_of_module(module: &str) -> Option<Family> {
    Some(match module {
        "elementwise" => Family::Elementwise,
        "along" => Family::Along,
        "reduce" | "arg_extreme" | "extreme_with_indices" | "reduce_twice" => Family::Reduce,
        "matmul" => Family::Matmul,
        "layout" => Family::Layout,
        "indexing" => Family::Indexing,
        "conv" => Family::Conv,
        "pool" => Family::Pool,
        "linear" => Family::Linear,
        "embedding" => Family::Embedding,
        "no_rule" => Family::NoRule,
        "creation" => Family::Creation,
        "data" => Family::Data,
        "draw" => Family::Random,
        _ => return None,
    })
}

/// The first rule module a piece of code names (`layout::`, `reduce_twice!`, `arg_extreme`…).
fn family_in(code: &str) -> Option<Family> {
    let ident = |c: char| c.is_alphanumeric() || c == '_';
    let mut i = 0;
    while i < code.len() {
        let rest = &code[i..];
        let len = rest.find(|c: char| !ident(c)).unwrap_or(rest.len());
        if len > 0 {
            let word = &rest[..len];
            let after = &rest[len..];
            if after.starts_with("::") || after.starts_with('!') || word == "arg_extreme" {
                if let Some(f) = family_of_module(word) {
                    return Some(f);
                }
            }
            i += len;
        } else {
            i += rest.chars().next().map_or(1, char::len_utf8);
        }
    }
    None
}

/// Each method defined in a source file, with the family its code runs under (`None`: it
/// names no rule).
fn implemented(file: &str) -> BTreeMap<String, Option<Family>> {
    let src = src(file);
    let mut out = BTreeMap::new();
    let mut from = 0;
    while let Some(at) = src[from..].find("fn ") {
        let at = from + at;
        from = at + 3;
        let name: String = src[at + 3..]
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        // A method declared in a group (`by_rule! { B, RULE; fn …; }`) runs under the group's
        // rule; a method with a body runs under the rule its body names.
        let group = src[..at]
            .rfind("! {")
            .filter(|g| !src[*g..at].contains('}'));
        let family = match group {
            Some(g) => {
                let head_start = src[..g].rfind(|c: char| c.is_whitespace()).unwrap_or(0);
                let head_end = g + src[g..].find(';').expect("group rule");
                family_in(&src[head_start..head_end])
            }
            None => {
                let open = at + src[at..].find('{').expect("method body");
                family_in(block(&src, open))
            }
        };
        out.insert(name, family);
    }
    out
}

#[test]
fn every_trait_method_is_in_the_table_once() {
    let methods = trait_methods();
    assert!(methods.len() > 400, "found {} methods", methods.len());
    let mut listed = BTreeMap::new();
    for (family, names) in table::METHODS {
        for name in names.iter() {
            assert!(
                listed.insert(name.to_string(), *family).is_none(),
                "{name} is listed twice"
            );
        }
    }
    let missing: Vec<_> = methods
        .iter()
        .filter(|(m, _)| !listed.contains_key(*m))
        .map(|(m, t)| format!("{t}::{m}"))
        .collect();
    assert!(missing.is_empty(), "not in the table: {missing:?}");
    let unknown: BTreeSet<_> = listed
        .keys()
        .filter(|m| !methods.contains_key(*m))
        .collect();
    assert!(unknown.is_empty(), "not a trait method: {unknown:?}");
    assert_eq!(table::family("float_matmul"), Some(Family::Matmul));
    assert_eq!(table::family("no_such_method"), None);
}

#[test]
fn every_method_runs_under_the_rule_of_its_family() {
    let methods = trait_methods();
    let mut defined = BTreeMap::new();
    for file in [
        "ops/float.rs",
        "ops/int.rs",
        "ops/bool.rs",
        "ops/qtensor.rs",
        "ops/module.rs",
        "ops/activation.rs",
        "backend.rs",
    ] {
        defined.extend(implemented(file));
    }
    let mut wrong = Vec::new();
    for (method, trait_name) in &methods {
        let family = table::family(method).expect("listed (checked above)");
        match defined.get(method) {
            None if INHERITED.contains(&method.as_str()) => {}
            None => wrong.push(format!("{trait_name}::{method} is not forwarded")),
            Some(None) if matches!(family, Family::Data | Family::Backend) => {}
            Some(found) if *found == Some(family) => {}
            Some(found) => wrong.push(format!(
                "{method}: table says {family:?}, code runs {found:?}"
            )),
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
}

#[test]
fn every_family_file_exists() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    for (family, _) in table::METHODS {
        assert!(
            dir.join(family.file()).exists(),
            "{family:?}: {}",
            family.file()
        );
    }
}
