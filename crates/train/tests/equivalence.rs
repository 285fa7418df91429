//! Data-parallel training over N ranks ends where single-device training on the whole batch does.

use burn::backend::{Autodiff, NdArray};
use burn::module::{Module, ModuleVisitor, Param};
use burn::nn::{Linear, LinearConfig};
use burn::optim::{GradientsParams, Optimizer, SgdConfig};
use burn::tensor::{activation::relu, backend::Backend, Tensor, TensorData};
use firemesh_collective::PortableGroup;
use firemesh_train::{DataParallel, GradientSync};

type B = Autodiff<NdArray>;

#[derive(Module, Debug)]
struct Mlp<B: Backend> {
    a: Linear<B>,
    b: Linear<B>,
}

impl<B: Backend> Mlp<B> {
    fn new(device: &B::Device) -> Self {
        Self {
            a: LinearConfig::new(4, 8).init(device),
            b: LinearConfig::new(8, 2).init(device),
        }
    }
    fn loss(&self, x: Tensor<B, 2>, y: Tensor<B, 2>) -> Tensor<B, 1> {
        let d = self.b.forward(relu(self.a.forward(x))) - y;
        (d.clone() * d).mean()
    }
}

fn params<M: Module<B>>(m: &M) -> Vec<f32> {
    struct Collect(Vec<f32>);
    impl ModuleVisitor<B> for Collect {
        fn visit_float<const D: usize>(&mut self, p: &Param<Tensor<B, D>>) {
            self.0.extend(p.val().into_data().to_vec::<f32>().unwrap());
        }
    }
    let mut c = Collect(Vec::new());
    m.visit(&mut c);
    c.0
}

fn batch(step: usize, rows: std::ops::Range<usize>) -> (Tensor<B, 2>, Tensor<B, 2>) {
    let dev = Default::default();
    let n = rows.len();
    let x: Vec<f32> = rows
        .clone()
        .flat_map(|i| (0..4).map(move |j| ((i * 4 + j + step) as f32 * 0.37).sin()))
        .collect();
    let y: Vec<f32> = rows
        .flat_map(|i| [((i + step) as f32).cos(), (i as f32 * 0.5).sin()])
        .collect();
    (
        Tensor::from_data(TensorData::new(x, [n, 4]), &dev),
        Tensor::from_data(TensorData::new(y, [n, 2]), &dev),
    )
}

#[test]
fn three_ranks_match_one_device_over_ten_sgd_steps() {
    check(3, 2);
}

#[test]
fn one_rank_matches_one_device() {
    check(1, 6);
}

fn check(ranks: usize, rows_per_rank: usize) {
    let device = Default::default();
    let model = Mlp::<B>::new(&device);
    let initial = params(&model); // also runs the lazy initializers, so clones share the values
    let lr = 0.05;

    let mut single = model.clone();
    let mut opt = SgdConfig::new().init();
    for step in 0..10 {
        let (x, y) = batch(step, 0..ranks * rows_per_rank);
        let loss = single.loss(x, y);
        let grads = GradientsParams::from_grads(loss.backward(), &single);
        single = opt.step(lr, single, grads);
    }

    let group = PortableGroup::new_shared(vec![device; ranks]).unwrap();
    let mut dp = DataParallel::new(
        model,
        vec![device; ranks],
        || SgdConfig::new().init(),
        GradientSync::new(group, 64),
    )
    .unwrap();
    for r in 0..ranks {
        assert_eq!(
            params(dp.replica(r)),
            initial,
            "replica {r} does not start from the model"
        );
    }
    let mut first_loss = None;
    for step in 0..10 {
        let loss = dp
            .step(lr, |r, m| {
                let (x, y) = batch(step, r * rows_per_rank..(r + 1) * rows_per_rank);
                m.loss(x, y)
            })
            .unwrap();
        first_loss.get_or_insert(loss);
    }

    assert_eq!(dp.replica_divergence(), 0.0);
    let want = params(&single);
    for r in 0..ranks {
        let got = params(dp.replica(r));
        assert_eq!(
            got,
            params(dp.replica(0)),
            "replica {r} drifted from replica 0"
        );
        let worst = got
            .iter()
            .zip(&want)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0f32, f32::max);
        assert!(
            worst < 1e-5,
            "replica {r} differs from single-device training by {worst}"
        );
    }
    assert!(first_loss.unwrap() > 0.0);
}
