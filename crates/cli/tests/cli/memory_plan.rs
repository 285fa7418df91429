//! The memory plan: `--dry-run` estimates what a rank holds under each ZeRO stage.

use crate::common::{cli, scratch, write_text};

/// `--dry-run` gives the memory a rank would need under the run's ZeRO stage: less with each
/// stage, the parameters' share smaller under ZeRO-3 only.
#[test]
fn the_dry_run_gives_the_memory_per_rank_of_each_zero_stage() {
    let dir = scratch("dry-run-memory");
    write_text(&dir.join("text.txt"), 40);
    let estimate = |zero: u8| -> Vec<f64> {
        let args = format!(
            "train --model gpt2-small --data text:text.txt --mesh cpu --ranks 4 --batch 8 \
             --seq-len 64 --optimizer adamw --zero {zero} --dry-run"
        );
        let out = cli(&dir, &args.split_whitespace().collect::<Vec<_>>());
        let stdout = String::from_utf8_lossy(&out.stdout).to_string();
        assert!(
            out.status.success(),
            "{stdout}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let line = stdout
            .lines()
            .find(|l| l.contains("memory (estimate)"))
            .unwrap_or_else(|| panic!("{stdout}"));
        assert!(line.contains(&format!("under ZeRO-{zero}")), "{line}");
        // total, parameters, gradients, optimizer state, activations, in MiB.
        line.split(['(', ',', ')'])
            .filter_map(|part| {
                let words: Vec<&str> = part.split_whitespace().collect();
                let at = words.iter().position(|w| *w == "GiB" || *w == "MiB")?;
                let value: f64 = words[at - 1].parse().ok()?;
                Some(if words[at] == "GiB" {
                    value * 1024.0
                } else {
                    value
                })
            })
            .collect()
    };
    let (zero0, zero1, zero3) = (estimate(0), estimate(1), estimate(3));
    println!("MiB per rank (total, parameters, gradients, state, activations): {zero0:?} {zero1:?} {zero3:?}");
    assert_eq!(zero0.len(), 5, "{zero0:?}");
    assert!(zero3[0] < zero1[0] && zero1[0] < zero0[0]);
    assert_eq!(zero1[1], zero0[1], "ZeRO-1 keeps every parameter");
    assert!(zero3[1] < zero0[1] / 2.0, "{zero3:?} against {zero0:?}");
    assert!(
        zero1[3] <= zero0[3] / 4.0 + 1.0,
        "a quarter of the state on 4 ranks"
    );
    assert_eq!(zero3[4], zero0[4], "the same activations");
    std::fs::remove_dir_all(&dir).unwrap();
}
