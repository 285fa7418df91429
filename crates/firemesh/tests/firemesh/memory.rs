//! Each rank's bytes of parameters, gradients and optimizer state, counted from the mesh's
//! parts (exact), under ZeRO-0, 1 and 3 at N = 1, 2, 4, 8: the tiny GPT and the tiny ResNet.
//! Under ZeRO-3 the three together are within 10% of their total over N, plus the largest
//! parameter (which the op that reads it gathers whole).

use crate::spy::Spy;
use crate::step::{images, labels, same_model, step_loss, Ad};
use burn::module::{AutodiffModule, Module, ModuleVisitor, Param};
use burn::tensor::{Int, Tensor, TensorData};
use burn_flex::FlexDevice;
use firemesh::backend::{shard, shard_int, Mesh};
use firemesh::optim::{AnyOptimizer, OptimizerKind};
use firemesh::zero::{parameter_bytes_per_rank, state_bytes_per_rank};
use firemesh::Trainer;
use firemesh_gpt::GptConfig;
use firemesh_resnet::ResNetConfig;

/// Per rank: parameter, gradient and optimizer-state bytes after one step of `model`.
fn bytes_after_a_step<M: AutodiffModule<Ad>>(
    model: M,
    mesh: &Mesh<FlexDevice>,
    zero: u8,
    loss: impl Fn(&M) -> Tensor<Ad, 1>,
) -> [Vec<usize>; 3] {
    let spy = Spy::new(AnyOptimizer::new(OptimizerKind::Adamw, 0.9, 0.01));
    let mut t = Trainer::sharded(model, spy, mesh, 3000)
        .with_zero(zero)
        .unwrap();
    t.step(|m| Ok(loss(m))).unwrap();
    let state = state_bytes_per_rank(&t.optimizer().inner, t.model()).unwrap();
    let met = t.optimizer().met.last().unwrap();
    let mut gradients = vec![0; mesh.len()];
    for (_, bytes) in met.iter().filter_map(|m| m.gradient.as_ref()) {
        gradients.iter_mut().zip(bytes).for_each(|(t, b)| *t += b);
    }
    [parameter_bytes_per_rank(t.model()), gradients, state]
}

/// The largest parameter's bytes.
fn largest<M: Module<Ad>>(model: &M) -> usize {
    struct Most(usize);
    impl ModuleVisitor<Ad> for Most {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<Ad, D>>) {
            self.0 = self.0.max(4 * param.val().shape().num_elements());
        }
    }
    let mut most = Most(0);
    model.visit(&mut most);
    most.0
}

/// Runs `bytes` for every stage and rank count and checks what each rank holds.
fn check(what: &str, largest: usize, bytes: impl Fn(&Mesh<FlexDevice>, u8) -> [Vec<usize>; 3]) {
    let mut whole = [0usize; 3];
    for n in [1, 2, 4, 8] {
        let mesh = Mesh::replicate(FlexDevice, n).unwrap();
        for zero in [0, 1, 3] {
            let [p, g, s] = bytes(&mesh, zero);
            println!(
                "{what}, N = {n}, ZeRO-{zero}: parameters {p:?}, gradients {g:?}, state {s:?}"
            );
            assert!([&p, &g, &s].iter().all(|b| b.len() == n));
            if n == 1 && zero == 0 {
                whole = [p[0], g[0], s[0]];
            }
            // Every stage holds the same tensors over the ranks: 1/N each, or all on each.
            let all_on_each = |b: &[usize], total: usize| b.iter().all(|x| *x == total);
            let summed = |b: &[usize]| b.iter().sum::<usize>();
            match zero {
                0 => {
                    assert!(all_on_each(&p, whole[0]) && all_on_each(&g, whole[1]));
                    assert!(all_on_each(&s, whole[2]));
                }
                1 => {
                    assert!(all_on_each(&p, whole[0]));
                    assert_eq!((summed(&g), summed(&s)), (whole[1], whole[2]));
                }
                _ => {
                    let sizes = [summed(&p), summed(&g), summed(&s)];
                    assert_eq!(sizes, whole, "{what}, N = {n}: sharded, not copied");
                    let total: usize = whole.iter().sum();
                    for r in 0..n {
                        let held = p[r] + g[r] + s[r];
                        let bound = total / n + total / n / 10 + largest;
                        assert!(held <= bound, "{what}, N = {n}, rank {r}: {held} > {bound}");
                    }
                }
            }
        }
    }
}

#[test]
fn zero3_ranks_hold_a_share_of_parameters_gradients_and_state() {
    let config = GptConfig::tiny();
    let probe = Mesh::replicate(FlexDevice, 1).unwrap();
    let largest_gpt = largest(&config.init::<Ad>(&probe).unwrap());
    check("tiny GPT", largest_gpt, |mesh, zero| {
        let model = GptConfig::tiny().init::<Ad>(mesh).unwrap();
        bytes_after_a_step(model, mesh, zero, |m| {
            let values: Vec<i32> = (0..8 * 16).map(|k| k * 31 % 256).collect();
            let tokens = Tensor::<Ad, 2, Int>::from_data(TensorData::new(values, [8, 16]), mesh);
            m.next_token_loss(shard_int(tokens, 0).unwrap()).unwrap()
        })
    });
    let (_, resnet) = same_model(&ResNetConfig::tiny(10), &probe);
    check("tiny ResNet", largest(&resnet), |mesh, zero| {
        let (_, model) = same_model(&ResNetConfig::tiny(10), mesh);
        bytes_after_a_step(model, mesh, zero, |m| {
            let x = shard(images::<Ad>(8, 8, 0, mesh), 0).unwrap();
            let y = shard_int(labels::<Ad>(8, 0, mesh), 0).unwrap();
            step_loss(m, x, y)
        })
    });
}
