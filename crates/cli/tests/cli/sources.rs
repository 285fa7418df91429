//! Every data source and model family trains through `firemesh train`, and a TOML file takes
//! the same options as the command line.

use crate::common::{config, on_ranks, scratch, tiny, write_cifar, write_image_folder, write_text};
use firemesh_cli::train::{self, DataSpec, ModelName, Record, TrainOptions};

#[test]
fn the_gpt_learns_a_text_file_and_samples_from_it() {
    let dir = scratch("gpt");
    let text = dir.join("corpus.txt");
    write_text(&text, 100);
    let summary = train::run(&config(TrainOptions {
        model: Some(ModelName::GptTiny),
        data: Some(DataSpec::Text(text)),
        batch: Some(16),
        steps: Some(40),
        run_dir: Some(dir.join("run")),
        ..on_ranks(3, tiny(&dir))
    }))
    .unwrap();
    // Forward, backward and optimizer steps on uneven blocks (16 sequences over 3 ranks) had a
    // placement rule for every op.
    assert_eq!(summary.fallbacks, 0);
    assert_eq!(summary.throughput_unit, "tokens/s");
    assert!(
        summary.last_loss < 0.6 * summary.first_loss,
        "loss {} -> {}",
        summary.first_loss,
        summary.last_loss
    );
    match summary.last_eval {
        Some(Record::Eval {
            perplexity: Some(p),
            loss,
            ..
        }) => assert!((p - loss.exp()).abs() < 1e-9 && p < 40.0, "perplexity {p}"),
        other => panic!("{other:?}"),
    }
    // 8 prompt tokens and 32 sampled ones, mostly letters of the corpus after training.
    let sample = summary.sample.expect("a sampled continuation");
    let known = sample
        .chars()
        .filter(|c| "the quick brown fox jumps over the lazy dog. ".contains(*c))
        .count();
    assert!(
        sample.len() >= 40 && known * 10 >= sample.chars().count() * 8,
        "{sample:?}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn cifar10_and_image_folders_train_with_held_out_accuracy() {
    let dir = scratch("images");
    write_cifar(&dir.join("cifar"), 20);
    write_image_folder(&dir.join("folder"), 10);
    for (data, size, steps) in [
        (DataSpec::Cifar10(dir.join("cifar")), 32, 3),
        (DataSpec::Images(dir.join("folder")), 8, 6),
    ] {
        let name = data.to_string().replace([':', '/'], "_");
        let summary = train::run(&config(TrainOptions {
            data: Some(data),
            image_size: Some(size),
            batch: Some(8),
            steps: Some(steps),
            run_dir: Some(dir.join(name)),
            ..tiny(&dir)
        }))
        .unwrap();
        assert_eq!(summary.fallbacks, 0, "{}", summary.data);
        assert!(
            matches!(summary.last_eval, Some(Record::Eval { accuracy: Some(a), .. }) if (0.0..=1.0).contains(&a)),
            "{:?}",
            summary.last_eval
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_config_file_takes_the_same_keys_and_the_command_line_wins() {
    let dir = scratch("config");
    let file = dir.join("run.toml");
    std::fs::write(
        &file,
        "model = \"resnet18\"\nbatch = 64\nlr = 0.2\ncheckpoint-every = 7\nresume = true\n",
    )
    .unwrap();
    let cli = TrainOptions {
        config: Some(file.clone()),
        batch: Some(8),
        ..TrainOptions::default()
    };
    let c = config(cli.with_config_file().unwrap());
    assert_eq!(c.model, ModelName::Resnet18);
    assert_eq!(
        (c.batch, c.lr, c.checkpoint_every, c.resume),
        (8, 0.2, 7, true)
    );

    std::fs::write(&file, "modle = \"resnet18\"\n").unwrap();
    let err = TrainOptions {
        config: Some(file.clone()),
        ..TrainOptions::default()
    }
    .with_config_file()
    .unwrap_err();
    assert!(err.to_string().contains("unknown field `modle`"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}
