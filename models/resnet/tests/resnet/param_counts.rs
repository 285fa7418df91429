//! Parameter counts equal torchvision's `sum(p.numel() for p in model.parameters())`.

use burn::backend::Flex;
use burn::module::Module;
use firemesh_resnet::{count_params, ResNetConfig, StemKind};

type B = Flex;

/// (depth, torchvision parameter count with 1000 classes).
const TORCHVISION: [(usize, usize); 5] = [
    (18, 11_689_512),
    (34, 21_797_672),
    (50, 25_557_032),
    (101, 44_549_160),
    (152, 60_192_808),
];

fn expected(depth: usize) -> usize {
    TORCHVISION.iter().find(|(d, _)| *d == depth).unwrap().1
}

/// BatchNorm channels summed over the network, counted by hand from the architecture.
fn batchnorm_channels(depth: usize) -> usize {
    let config = ResNetConfig::from_depth(depth, 1000).unwrap();
    let expansion = config.block.expansion();
    let mut total = 64; // stem
    let mut channels = 64;
    for (stage, &blocks) in config.blocks_per_stage.iter().enumerate() {
        let planes = 64 << stage;
        for block in 0..blocks {
            let out = planes * expansion;
            total += if expansion == 1 {
                2 * planes
            } else {
                2 * planes + out
            };
            if block == 0 && (stage > 0 || channels != out) {
                total += out; // projection shortcut
            }
            channels = out;
        }
    }
    total
}

#[test]
fn resnet18_and_resnet50_built_modules_match_torchvision_via_burn_num_params() {
    let device = Default::default();
    for depth in [18, 50] {
        let model = ResNetConfig::from_depth(depth, 1000)
            .unwrap()
            .init::<B>(&device)
            .unwrap();
        let running_stats = 2 * batchnorm_channels(depth);
        // Burn's count materializes every tensor and includes BatchNorm running statistics.
        assert_eq!(
            model.num_params(),
            expected(depth) + running_stats,
            "resnet{depth}"
        );
        let count = count_params(&model);
        assert_eq!(count.trainable, expected(depth), "resnet{depth}");
        assert_eq!(count.running_stats, running_stats, "resnet{depth}");
    }
}

#[test]
fn every_imagenet_depth_matches_torchvision_without_allocating_weights() {
    let device = Default::default();
    for (depth, torchvision) in TORCHVISION {
        let model = ResNetConfig::from_depth(depth, 1000)
            .unwrap()
            .init::<B>(&device)
            .unwrap();
        let count = count_params(&model);
        assert_eq!(count.trainable, torchvision, "resnet{depth}");
        assert_eq!(
            count.running_stats,
            2 * batchnorm_channels(depth),
            "resnet{depth}"
        );
    }
}

#[test]
fn cifar_resnet18_with_ten_classes_has_the_well_known_count() {
    // 3×3 stem (1,728 weights instead of 9,408) and a 10-way classifier.
    let config = ResNetConfig::resnet18(10).with_stem(StemKind::Cifar);
    let model = config.init::<B>(&Default::default()).unwrap();
    assert_eq!(count_params(&model).trainable, 11_173_962);
    assert_eq!(config.feature_channels(), 512);
    assert_eq!(ResNetConfig::resnet50(10).feature_channels(), 2048);
}
