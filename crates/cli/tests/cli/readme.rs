//! Every command the README and the guides in docs/ give still runs: each `firemesh` command
//! line parses (its options and values exist), the README's own `train` passes every check
//! of a run (`--dry-run`), and each `cargo` command names packages, features and examples
//! that exist.

use crate::common::{cli, scratch};
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The lines of the shell blocks of `file` (```bash, ```sh or unlabelled), without comments,
/// continued lines joined.
fn shell_lines(file: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(file).unwrap();
    let (mut lines, mut inside, mut shell, mut pending) = (Vec::new(), false, false, String::new());
    for line in text.lines() {
        if let Some(label) = line.trim_start().strip_prefix("```") {
            inside = !inside;
            shell = inside && matches!(label.trim(), "" | "bash" | "sh" | "console");
            continue;
        }
        if !shell {
            continue;
        }
        let code = line.split(" #").next().unwrap_or("").trim();
        match code.strip_suffix('\\') {
            Some(head) => pending.push_str(&format!("{head} ")),
            None => {
                pending.push_str(code);
                if !pending.trim().is_empty() {
                    lines.push(pending.trim().to_string());
                }
                pending.clear();
            }
        }
    }
    lines
}

/// The arguments of a `firemesh` command in `line` (`cargo run … -p firemesh-cli -- ARGS`, or
/// a launcher running `target/…/firemesh ARGS`), without `...` placeholders.
fn firemesh_args(line: &str) -> Option<Vec<String>> {
    let words: Vec<&str> = line.split_whitespace().collect();
    let start = match words.iter().position(|w| *w == "--") {
        Some(i) if line.contains("-p firemesh-cli") => i + 1,
        _ => words.iter().position(|w| w.ends_with("/firemesh"))? + 1,
    };
    Some(
        words[start..]
            .iter()
            .filter(|w| **w != "...")
            .map(|w| w.to_string())
            .collect(),
    )
}

/// Whether the package called `name` in the workspace has the feature `feature` (or exists,
/// for `None`).
fn package_has(name: &str, feature: Option<&str>) -> bool {
    let manifests = ["crates", "models"]
        .iter()
        .flat_map(|dir| std::fs::read_dir(root().join(dir)).unwrap())
        .map(|e| e.unwrap().path().join("Cargo.toml"))
        .chain(["examples", "benches", "datasets"].map(|d| root().join(d).join("Cargo.toml")));
    manifests
        .filter_map(|m| std::fs::read_to_string(m).ok())
        .filter_map(|text| text.parse::<toml::Table>().ok())
        .filter(|t| {
            let package = t.get("package").and_then(|p| p.get("name"));
            package.and_then(|n| n.as_str()) == Some(name)
        })
        .any(|t| match feature {
            None => true,
            Some(f) => t.get("features").is_some_and(|fs| fs.get(f).is_some()),
        })
}

fn check_cargo(line: &str) {
    let words: Vec<&str> = line.split_whitespace().collect();
    let package = words.windows(2).find(|p| p[0] == "-p").map(|p| p[1]);
    for pair in words.windows(2) {
        match pair[0] {
            "-p" => assert!(package_has(pair[1], None), "no package {}: {line}", pair[1]),
            "--features" => {
                for spec in pair[1].split(',') {
                    let (package, feature) = match spec.split_once('/') {
                        Some(named) => named,
                        None => (package.unwrap_or("firemesh"), spec),
                    };
                    assert!(
                        package_has(package, Some(feature)),
                        "no feature {spec}: {line}"
                    );
                }
            }
            "--example" => {
                let example = root().join("examples").join(format!("{}.rs", pair[1]));
                assert!(example.exists(), "no example {}: {line}", pair[1]);
            }
            _ => {}
        }
    }
}

#[test]
fn the_commands_of_the_readme_and_the_guides_run() {
    let cwd = scratch("readme");
    let mut files = vec![root().join("README.md")];
    let mut guides: Vec<PathBuf> = std::fs::read_dir(root().join("docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    guides.sort();
    files.extend(guides);
    let mut parsed = 0;
    for file in &files {
        for line in shell_lines(file) {
            if line.starts_with("cargo ") {
                check_cargo(&line);
            }
            let Some(mut args) = firemesh_args(&line) else {
                continue;
            };
            args.push("--help".into());
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            let out = cli(&cwd, &args);
            assert!(
                out.status.success(),
                "{}: `{line}` does not parse: {}",
                file.display(),
                String::from_utf8_lossy(&out.stderr)
            );
            parsed += 1;
        }
    }
    assert!(parsed >= 20, "only {parsed} firemesh commands found");
    // The README's main job, with every check a run makes, on this machine.
    let readme = shell_lines(&root().join("README.md"));
    let main_job = readme
        .iter()
        .find_map(|l| firemesh_args(l))
        .expect("the README's first command runs firemesh");
    assert_eq!(main_job.first().map(String::as_str), Some("train"));
    let mut args: Vec<&str> = main_job.iter().map(String::as_str).collect();
    args.push("--dry-run");
    let out = cli(&cwd, &args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("rank"),
        "{out:?}"
    );
    std::fs::remove_dir_all(&cwd).unwrap();
}
