//! The method table of `Sharded<B>`, derived from where each method is declared: every method of
//! the backend traits it implements (read from Burn's own trait sources, found through `cargo
//! metadata`) is defined in this crate's `src/ops/` or `src/backend.rs`, and each runs under the
//! placement rule of one op family, the rule module its code names (a `by_rule!` group's rule,
//! or the rule a method's body calls). Nothing lists the methods a second time: the only list
//! here is of the few methods that need no rule.

use std::collections::BTreeMap;
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

/// Methods of `src/ops/` that run no placement rule: they read a tensor's metadata, which every
/// placement keeps whole, or say what the backend can do (the methods of `src/backend.rs`, the
/// backend's own, need none either).
const NO_RULE: &[&str] = &[
    "has_ctc_loss_backward",
    "float_device",
    "int_device",
    "bool_device",
    "q_device",
    "float_is_require_grad",
    "q_is_require_grad",
];

/// An op family, named by the module of its rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
enum Family {
    /// Reading, moving and describing tensors: `data.rs`.
    Data,
    /// Tensors from a shape: `rules/creation.rs`.
    Creation,
    /// Random draws: `draw.rs`.
    Random,
    Elementwise,
    Along,
    Reduce,
    Matmul,
    Layout,
    Indexing,
    Conv,
    Pool,
    Linear,
    Embedding,
    /// Run replicated (counted as a fallback): `rules/no_rule.rs`.
    NoRule,
}

impl Family {
    /// The source file of the family's rule, relative to `src`.
    fn file(self) -> &'static str {
        match self {
            Family::Data => "data.rs",
            Family::Creation => "rules/creation.rs",
            Family::Random => "draw.rs",
            Family::Elementwise => "rules/elementwise.rs",
            Family::Along => "rules/along.rs",
            Family::Reduce => "rules/reduce.rs",
            Family::Matmul => "rules/matmul.rs",
            Family::Layout => "rules/layout.rs",
            Family::Indexing => "rules/indexing.rs",
            Family::Conv => "rules/conv.rs",
            Family::Pool => "rules/pool.rs",
            Family::Linear => "rules/linear.rs",
            Family::Embedding => "rules/embedding.rs",
            Family::NoRule => "rules/no_rule.rs",
        }
    }
}

/// The files that define the methods, and whether a method there may name no rule.
const SOURCES: &[(&str, bool)] = &[
    ("ops/float.rs", false),
    ("ops/int.rs", false),
    ("ops/bool.rs", false),
    ("ops/qtensor.rs", false),
    ("ops/module.rs", false),
    ("ops/activation.rs", false),
    ("backend.rs", true),
];

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

/// Every method the sources define: its family (`None`: it names no rule) and whether its file
/// may leave it without one.
fn defined() -> BTreeMap<String, (Option<Family>, bool)> {
    let mut all = BTreeMap::new();
    for (file, may_have_none) in SOURCES {
        for (method, family) in implemented(file) {
            all.insert(method, (family, *may_have_none));
        }
    }
    all
}

#[test]
fn every_trait_method_is_forwarded() {
    let methods = trait_methods();
    assert!(methods.len() > 400, "found {} methods", methods.len());
    let defined = defined();
    let missing: Vec<_> = methods
        .iter()
        .filter(|(m, _)| !defined.contains_key(*m) && !INHERITED.contains(&m.as_str()))
        .map(|(m, t)| format!("{t}::{m}"))
        .collect();
    assert!(missing.is_empty(), "not forwarded: {missing:?}");
}

#[test]
fn every_method_runs_under_the_rule_of_one_family() {
    let methods = trait_methods();
    // The sources' own helpers (`fmt`, `sharded_mean`…) are no methods of the traits.
    let defined: BTreeMap<String, (Option<Family>, bool)> = defined()
        .into_iter()
        .filter(|(m, _)| methods.contains_key(m))
        .collect();
    let mut wrong = Vec::new();
    let mut table: BTreeMap<Family, usize> = BTreeMap::new();
    for (method, (family, may_have_none)) in &defined {
        let exempt = NO_RULE.contains(&method.as_str());
        match family {
            Some(f) if exempt => wrong.push(format!("{method} runs {f:?}: take it off NO_RULE")),
            Some(f) => *table.entry(*f).or_default() += 1,
            None if exempt || *may_have_none => {}
            None => wrong.push(format!("{method} names no rule")),
        }
    }
    for name in NO_RULE {
        if !defined.contains_key(*name) {
            wrong.push(format!("{name} (NO_RULE) is not defined"));
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
    // The table, as derived: methods per family.
    println!("{table:?}");
    assert_eq!(defined["float_matmul"].0, Some(Family::Matmul));
    assert_eq!(defined["float_add"].0, Some(Family::Elementwise));
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    for family in table.keys() {
        assert!(
            dir.join(family.file()).exists(),
            "{family:?}: {}",
            family.file()
        );
    }
}
