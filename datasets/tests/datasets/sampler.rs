//! The distributed sampler: disjoint, complete shards; same order everywhere for a seed;
//! a new order every epoch; exact resumption.

use std::collections::HashSet;

use firemesh_datasets::{
    rank_slice, DatasetError, DistributedSampler, SamplerPosition, TailPolicy,
};

const LENGTHS: [usize; 7] = [1, 7, 10, 13, 31, 64, 101];

fn shards(sampler: &DistributedSampler, epoch: u64) -> Vec<Vec<usize>> {
    (0..sampler.world_size())
        .map(|rank| sampler.rank_indices(epoch, rank).unwrap())
        .collect()
}

#[test]
fn drop_last_shards_are_disjoint_equal_and_cover_all_but_the_tail() {
    for world in 1..=8 {
        for len in LENGTHS.into_iter().filter(|&len| len >= world) {
            for per_rank in [1, 3] {
                let sampler =
                    DistributedSampler::new(len, world, world * per_rank, 11, TailPolicy::DropLast)
                        .unwrap();
                let shards = shards(&sampler, 2);
                let kept = len / world * world;
                let all: Vec<usize> = shards.concat();
                let unique: HashSet<usize> = all.iter().copied().collect();
                assert_eq!(all.len(), kept, "world {world} len {len}");
                assert_eq!(unique.len(), kept, "ranks overlap: world {world} len {len}");
                assert!(unique.iter().all(|&i| i < len));
                assert!(shards.iter().all(|s| s.len() == len / world));
            }
        }
    }
}

#[test]
fn padded_shards_cover_everything_and_repeat_only_the_padding() {
    for world in 1..=8 {
        for len in LENGTHS {
            let sampler =
                DistributedSampler::new(len, world, world * 2, 5, TailPolicy::Pad).unwrap();
            let shards = shards(&sampler, 0);
            let all: Vec<usize> = shards.concat();
            let unique: HashSet<usize> = all.iter().copied().collect();
            assert_eq!(unique, (0..len).collect(), "world {world} len {len}");
            assert_eq!(all.len(), len.div_ceil(world) * world);
            assert!(shards.iter().all(|s| s.len() == len.div_ceil(world)));
        }
    }
}

#[test]
fn same_seed_same_order_new_epoch_or_seed_new_order() {
    let a = DistributedSampler::new(100, 4, 8, 42, TailPolicy::DropLast).unwrap();
    let b = DistributedSampler::new(100, 4, 8, 42, TailPolicy::DropLast).unwrap();
    assert_eq!(a.epoch_order(3), b.epoch_order(3));
    assert_eq!(shards(&a, 3), shards(&b, 3));
    assert_ne!(a.epoch_order(0), a.epoch_order(1));
    let other_seed = DistributedSampler::new(100, 4, 8, 43, TailPolicy::DropLast).unwrap();
    assert_ne!(a.epoch_order(0), other_seed.epoch_order(0));
    let mut sorted = a.epoch_order(0);
    sorted.sort_unstable();
    assert_eq!(sorted, (0..100).collect::<Vec<_>>());
}

#[test]
fn without_shuffle_epochs_run_in_index_order() {
    let sampler = DistributedSampler::new(10, 2, 4, 0, TailPolicy::DropLast)
        .unwrap()
        .with_shuffle(false);
    let batches: Vec<Vec<usize>> = sampler
        .batches_from(SamplerPosition::default())
        .map(|b| b.indices)
        .collect();
    assert_eq!(batches, [vec![0, 1, 2, 3], vec![4, 5, 6, 7], vec![8, 9]]);
    assert_eq!(sampler.rank_indices(0, 1).unwrap(), [2, 3, 6, 7, 9]);
}

#[test]
fn global_batches_split_into_per_rank_slices() {
    assert_eq!(rank_slice(10, 3, 0), 0..4);
    assert_eq!(rank_slice(10, 3, 1), 4..7);
    assert_eq!(rank_slice(10, 3, 2), 7..10);
    assert_eq!(rank_slice(4, 4, 3), 3..4);
    let sampler = DistributedSampler::new(23, 3, 6, 1, TailPolicy::DropLast).unwrap();
    assert_eq!(sampler.samples_per_epoch(), 21);
    assert_eq!(sampler.steps_per_epoch(), 4);
    let sizes: Vec<usize> = sampler
        .batches_from(SamplerPosition::default())
        .map(|b| b.indices.len())
        .collect();
    assert_eq!(sizes, [6, 6, 6, 3]);
}

#[test]
fn resuming_from_a_saved_position_continues_the_same_sequence() {
    let sampler = DistributedSampler::new(50, 2, 8, 9, TailPolicy::DropLast).unwrap();
    let epoch = 4;
    let uninterrupted: Vec<_> = sampler
        .batches_from(SamplerPosition { epoch, step: 0 })
        .collect();

    let mut run = sampler.batches_from(SamplerPosition { epoch, step: 0 });
    let done: Vec<_> = run.by_ref().take(3).collect();
    let saved = serde_json::to_string(&run.next_position()).unwrap();

    let position: SamplerPosition = serde_json::from_str(&saved).unwrap();
    assert_eq!(position, SamplerPosition { epoch, step: 3 });
    let restored = DistributedSampler::new(50, 2, 8, 9, TailPolicy::DropLast).unwrap();
    let rest: Vec<_> = restored.batches_from(position).collect();
    assert_eq!([done, rest].concat(), uninterrupted);

    let mut finished = sampler.batches_from(SamplerPosition { epoch, step: 0 });
    finished.by_ref().for_each(drop);
    assert_eq!(
        finished.next_position(),
        SamplerPosition {
            epoch: epoch + 1,
            step: 0
        }
    );
}

#[test]
fn bad_arguments_are_errors_naming_the_parameter() {
    let message = |r: Result<DistributedSampler, DatasetError>| r.unwrap_err().to_string();
    assert!(
        message(DistributedSampler::new(10, 0, 4, 0, TailPolicy::DropLast)).contains("world_size")
    );
    assert!(
        message(DistributedSampler::new(10, 4, 6, 0, TailPolicy::DropLast))
            .contains("global_batch_size")
    );
    assert!(
        message(DistributedSampler::new(10, 4, 0, 0, TailPolicy::DropLast))
            .contains("global_batch_size")
    );
    assert!(
        message(DistributedSampler::new(3, 4, 4, 0, TailPolicy::DropLast)).contains("dataset_len")
    );
    let empty = DistributedSampler::new(0, 1, 1, 0, TailPolicy::DropLast);
    assert!(message(empty).contains("dataset_len"));
    let sampler = DistributedSampler::new(10, 2, 2, 0, TailPolicy::DropLast).unwrap();
    assert!(sampler
        .rank_indices(0, 2)
        .unwrap_err()
        .to_string()
        .contains("rank"));
}
