//! ZeRO-1 (`Trainer::with_zero(1)`): the same training as the replicated optimizer, each rank
//! holding 1/N of AdamW's state; the parameters gathered in buckets after each update.

use crate::spy::{Met, Spy};
use crate::step::{images, labels, largest_difference, same_model, step_loss, Ad};
use burn_flex::FlexDevice;
use firemesh::backend::{shard, shard_int, Mesh, Placement};
use firemesh::optim::{AnyOptimizer, OptimizerKind};
use firemesh::zero::state_bytes_per_rank;
use firemesh::{Precision, StepReport, Trainer};
use firemesh_resnet::{ResNet, ResNetConfig};

const STEPS: usize = 20;
const BUCKET: usize = 3000;

type Adam = AnyOptimizer<ResNet<Ad>, Ad>;

fn trainer(
    model: ResNet<Ad>,
    mesh: &Mesh<FlexDevice>,
    zero: u8,
    precision: Precision,
) -> Trainer<Ad, ResNet<Ad>, Adam> {
    Trainer::sharded(
        model,
        Adam::new(OptimizerKind::Adamw, 0.9, 0.01),
        mesh,
        BUCKET,
    )
    .with_lr(|_| 1e-3)
    .with_precision(precision)
    .unwrap()
    .with_zero(zero)
    .unwrap()
}

fn step(t: &mut Trainer<Ad, ResNet<Ad>, Adam>, mesh: &Mesh<FlexDevice>, i: usize) -> StepReport {
    t.step(|m| {
        let x = shard(images::<Ad>(12, 8, i % 4, mesh), 0).unwrap();
        let y = shard_int(labels::<Ad>(12, i % 4, mesh), 0).unwrap();
        Ok(step_loss(m, x, y))
    })
    .unwrap()
}

/// Over 20 AdamW steps on 3 ranks, in f32 and in bf16, ZeRO-1 gives the losses and the final
/// parameters of the replicated optimizer (within 1e-6), with no fallback; each rank holds at
/// most a third of AdamW's state plus one bucket, and the parameters are gathered in fewer
/// collectives than there are parameters. Most gradient buckets are reduce-scattered during the
/// backward pass (early), as the replicated optimizer's are summed; the test is run again
/// without early buckets, where all are reduce-scattered at the step.
#[test]
fn zero1_trains_as_the_replicated_optimizer_with_a_third_of_the_state() {
    let mesh = Mesh::replicate(FlexDevice, 3).unwrap();
    let (_, model) = same_model(&ResNetConfig::tiny(10), &mesh);
    let tensors = burn::module::list_param_ids(&model).len();
    let runs = [
        (Precision::F32, true),
        (Precision::Bf16, true),
        (Precision::F32, false),
    ];
    for (precision, early) in runs {
        let mut full = trainer(model.clone(), &mesh, 0, precision);
        let mut sharded = trainer(model.clone(), &mesh, 1, precision);
        if !early {
            sharded = sharded.without_early_buckets();
        }
        for i in 0..STEPS {
            let (want, got) = (step(&mut full, &mesh, i), step(&mut sharded, &mesh, i));
            let early_ones = got.early_gradient_collectives;
            match early {
                true => assert!(
                    early_ones > 0 && early_ones == want.early_gradient_collectives,
                    "{precision} step {i}: {early_ones} early reduce-scatters, {} early sums",
                    want.early_gradient_collectives
                ),
                false => assert_eq!(early_ones, 0),
            }
            assert!(
                (got.loss - want.loss).abs() <= 1e-6 * want.loss,
                "{precision} step {i}: {} vs {}",
                got.loss,
                want.loss
            );
            assert_eq!(got.counts.total_fallbacks(), 0, "{precision} step {i}");
            assert_eq!(want.parameter_collectives, 0);
            assert!(
                0 < got.parameter_collectives && got.parameter_collectives < tensors,
                "{precision} step {i}: {} gathers for {tensors} tensors",
                got.parameter_collectives
            );
        }
        let worst = largest_difference(
            &crate::step::params(sharded.model()),
            &crate::step::params(full.model()),
        );
        assert!(
            worst <= 1e-6,
            "{precision} (early {early}): parameters {worst} apart"
        );
        let whole = state_bytes_per_rank(full.optimizer(), full.model()).unwrap();
        let per_rank = state_bytes_per_rank(sharded.optimizer(), sharded.model()).unwrap();
        println!(
            "{precision}: AdamW state per rank {per_rank:?} bytes with ZeRO-1, {whole:?} without"
        );
        assert!(whole.iter().all(|&b| b == whole[0] && b > 0), "{whole:?}");
        for b in &per_rank {
            assert!(
                *b <= whole[0] / 3 + BUCKET,
                "{per_rank:?} against {}",
                whole[0]
            );
        }
        assert_eq!(
            per_rank.iter().sum::<usize>(),
            whole[0],
            "the blocks make up the whole"
        );
    }
}

/// Under ZeRO-1 the optimizer's update (weight decay included: AdamW decays, and SGD adds to
/// the gradient, the whole parameter it is given) meets each parameter as its rank's
/// `Shard(0)` block, the block of its gradient: a third of the parameters' bytes per rank on 3
/// ranks, where the replicated optimizer meets all of them on every rank. Both optimizers, with
/// weight decay, train as they do without ZeRO (losses and final parameters within 1e-6).
#[test]
fn zero1_updates_and_decays_only_each_ranks_block() {
    let mesh = Mesh::replicate(FlexDevice, 3).unwrap();
    let (_, model) = same_model(&ResNetConfig::tiny(10), &mesh);
    for kind in [OptimizerKind::Adamw, OptimizerKind::Sgd] {
        let spy = |zero| {
            let spy = Spy::new(Adam::new(kind, 0.9, 0.05));
            Trainer::sharded(model.clone(), spy, &mesh, BUCKET)
                .with_lr(|_| 1e-2)
                .with_zero(zero)
                .unwrap()
        };
        let (mut full, mut sharded) = (spy(0), spy(1));
        for i in 0..3 {
            let mut losses = [0.0; 2];
            for (t, loss) in [&mut full, &mut sharded].into_iter().zip(&mut losses) {
                *loss = t
                    .step(|m| {
                        let x = shard(images::<Ad>(12, 8, i, &mesh), 0).unwrap();
                        let y = shard_int(labels::<Ad>(12, i, &mesh), 0).unwrap();
                        Ok(step_loss(m, x, y))
                    })
                    .unwrap()
                    .loss;
            }
            assert!(
                (losses[1] - losses[0]).abs() <= 1e-6 * losses[0],
                "{kind:?} step {i}: {losses:?}"
            );
        }
        let worst = largest_difference(
            &crate::step::params(sharded.model()),
            &crate::step::params(full.model()),
        );
        assert!(worst <= 1e-6, "{kind:?}: parameters {worst} apart");
        // The parameters the update changes: those with a gradient (BatchNorm's running
        // statistics have none).
        let per_rank = |met: &[Met]| {
            let trained = met.iter().filter(|m| m.gradient.is_some());
            (0..3)
                .map(|r| trained.clone().map(|m| m.bytes[r]).sum::<usize>())
                .collect::<Vec<_>>()
        };
        for (step, (whole, sliced)) in full
            .optimizer()
            .met
            .iter()
            .zip(&sharded.optimizer().met)
            .enumerate()
        {
            assert!(whole.iter().all(|m| m.placement == Placement::Replicated));
            assert_eq!(whole.len(), sliced.len());
            let trained = sliced.iter().filter(|m| m.gradient.is_some());
            assert!(trained.clone().count() > 0);
            for m in trained {
                let grad = m.gradient.as_ref().map(|(p, _)| *p);
                assert_eq!(grad, Some(Placement::Shard(0)), "{kind:?} step {step}");
                assert_eq!(m.placement, Placement::Shard(0), "{kind:?} step {step}");
            }
            let (whole, sliced) = (per_rank(whole), per_rank(sliced));
            println!("{kind:?} step {step}: the update met {sliced:?} bytes per rank, {whole:?} without ZeRO");
            assert_eq!(sliced.iter().sum::<usize>(), whole[0]);
            assert!(
                sliced.iter().all(|&b| b <= whole[0] / 3 + BUCKET / 2),
                "{sliced:?} against {whole:?}"
            );
        }
        assert_eq!(sharded.optimizer().met.len(), 3);
    }
}
