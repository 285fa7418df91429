//! Every example runs to completion at a tiny size (cargo builds the examples before it runs
//! this test).

use std::path::PathBuf;
use std::process::Command;
use std::time::Instant;

/// target/<profile>/examples/<name>, beside this test's target/<profile>/deps/.
fn example(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary's path");
    let profile_dir = exe
        .parent()
        .and_then(|deps| deps.parent())
        .expect("target/<profile>/deps");
    let path = profile_dir.join("examples").join(name);
    assert!(
        path.exists(),
        "{} is missing: `cargo test -p firemesh-examples` builds it",
        path.display()
    );
    path
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("firemesh-examples-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

/// Runs an example with `args` (split at spaces); returns its standard output after checking
/// it succeeded.
fn run(name: &str, args: &str) -> String {
    let args: Vec<&str> = args.split_whitespace().collect();
    let start = Instant::now();
    let out = Command::new(example(name))
        .args(&args)
        .output()
        .expect("the example starts");
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let stderr = String::from_utf8_lossy(&out.stderr);
    println!(
        "example {name} {}: {:.1} s\n{stdout}",
        args.join(" "),
        start.elapsed().as_secs_f64()
    );
    assert!(out.status.success(), "{name} failed:\n{stdout}\n{stderr}");
    stdout
}

/// The number that follows `label` on a line of `out` (a trailing `%` dropped).
fn number_after(out: &str, label: &str) -> f64 {
    out.lines()
        .find_map(|l| l.split(label).nth(1))
        .and_then(|v| v.trim().trim_end_matches('%').parse().ok())
        .unwrap_or_else(|| panic!("no {label:?} line in:\n{out}"))
}

#[test]
fn data_parallel() {
    let out = run("data_parallel", "--ranks 3 --steps 150 --batch 48");
    let accuracy = number_after(&out, "accuracy on 3 ranks: ");
    assert!(accuracy > 60.0, "3 spiral arms, chance is 33%: {accuracy}%");
}

#[test]
fn trainer_on_a_mesh_follows_one_device() {
    let out = run("trainer", "--ranks 3 --steps 60 --batch 48");
    let worst = number_after(&out, "largest loss difference over 60 steps: ");
    assert!(worst < 1e-5, "the mesh's losses left one device's: {worst}");
    assert!(out.contains("during the backward pass"), "{out}");
}

#[test]
fn train_resnet() {
    let out = run(
        "train_resnet",
        "--depth 0 --mesh cpu --ranks 2 --samples 96 --batch 16 --steps 4 --image-size 8",
    );
    assert!(out.contains("top-1 accuracy"), "{out}");
}

/// The same steps on 1 rank and on 2 give the same losses (up to the order of sums; printed
/// to 4 decimals): the batch is sharded, the model and its BatchNorm statistics are not.
#[test]
fn train_resnet_on_two_ranks_as_on_one() {
    let losses = |ranks: usize| -> Vec<f64> {
        let args = format!(
            "--depth 0 --mesh cpu --ranks {ranks} --samples 96 --batch 16 --steps 10 --image-size 8"
        );
        let out = run("train_resnet", &args);
        out.lines()
            .filter_map(|l| l.split("loss ").nth(1)?.split_whitespace().next())
            .map(|v| v.parse().unwrap())
            .collect()
    };
    let (one, two) = (losses(1), losses(2));
    assert_eq!(one.len(), 1, "one progress line at step 10: {one:?}");
    assert_eq!(one.len(), two.len());
    for (a, b) in one.iter().zip(&two) {
        assert!((a - b).abs() <= 2e-4 + 1e-3 * a.abs(), "{one:?} vs {two:?}");
    }
}

/// The image-folder source (PNG and JPEG in class folders) through the same example.
#[test]
fn train_resnet_on_an_image_folder() {
    let dir = scratch("folder");
    for (class, rgb) in [("cat", [200u8, 40, 40]), ("dog", [40u8, 40, 200])] {
        std::fs::create_dir_all(dir.join(class)).unwrap();
        for i in 0..10u8 {
            let image = image::RgbImage::from_pixel(10 + u32::from(i), 7, image::Rgb(rgb));
            let ext = if i % 2 == 0 { "png" } else { "jpg" };
            image
                .save(dir.join(class).join(format!("{i}.{ext}")))
                .unwrap();
        }
    }
    let out = run(
        "train_resnet",
        &format!(
            "--depth 0 --images {} --mesh cpu --ranks 2 --batch 4 --steps 4 --image-size 8",
            dir.display()
        ),
    );
    assert!(out.contains("2 classes"), "{out}");
    assert!(out.contains("top-1 accuracy"), "{out}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn train_gpt() {
    let out = run("train_gpt", "--mesh cpu --ranks 2 --steps 6 --batch 8");
    assert!(out.contains("perplexity"), "{out}");
    assert!(out.contains("sampled continuation"), "{out}");
}

#[test]
fn learner() {
    let dir = scratch("learner");
    let out = run(
        "learner",
        &format!("--ranks 2 --epochs 2 --dir {}", dir.display()),
    );
    assert!(out.contains("validation accuracy"), "{out}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// On wgpu devices when an adapter is found, and on the CPU.
#[test]
fn collectives() {
    for args in ["--ranks 3", "--ranks 3 --cpu"] {
        let out = run("collectives", args);
        for op in ["all-reduce", "all-gather", "broadcast"] {
            assert!(out.contains(op), "{out}");
        }
    }
}
