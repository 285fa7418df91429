//! Autocast's casts per step, counted in the step's report, for the tiny ResNet and the tiny
//! GPT: none in f32; in bf16 each parameter a product reads is cast down once per step (its
//! other readers, the backward pass's products, reuse that cast), a gradient read by both
//! products of a layer's backward pass is cast once for both, every `Partial` weight
//! gradient is cast back up for its bucket, and the counts are the same every step (the casts
//! depend on the model, not the data).

use crate::precision::{model as resnet, step as resnet_step, trainer as resnet_trainer};
use crate::step::Ad;
use burn::module::{Module, ModuleVisitor, Param};
use burn::optim::SgdConfig;
use burn::tensor::{Int, Tensor, TensorData};
use burn_flex::FlexDevice;
use firemesh::backend::stats::Counts;
use firemesh::backend::{shard_int, Mesh};
use firemesh::{Precision, Trainer};
use firemesh_gpt::{Gpt, GptConfig};

/// The parameters of `module` with `D` dims among `dims`, counted.
fn parameters_with_dims<M: Module<Ad>>(module: &M, dims: &[usize]) -> u64 {
    struct Count<'a>(&'a [usize], u64);
    impl ModuleVisitor<Ad> for Count<'_> {
        fn visit_float<const D: usize>(&mut self, _: &Param<Tensor<Ad, D>>) {
            self.1 += u64::from(self.0.contains(&D));
        }
    }
    let mut count = Count(dims, 0);
    module.visit(&mut count);
    count.1
}

/// Prints a step's casts, for the closing notes and the README.
fn show(what: &str, c: &Counts) {
    println!(
        "{what}: per step {} casts down ({} of parameters, {} reused; {} activation casts \
         reused), {} up ({} reused), {} bytes; {} ops kept narrow",
        c.casts_down,
        c.parameter_casts,
        c.casts_reused,
        c.activation_casts_reused,
        c.casts_up,
        c.casts_up_reused,
        c.cast_bytes,
        c.ops_kept_narrow
    );
}

/// The cast counts of 3 steps, which must be the same every step; the first is returned.
fn same_every_step(reports: Vec<Counts>) -> Counts {
    let key = |c: &Counts| {
        let moved = (c.casts_down, c.casts_up, c.cast_bytes);
        let reused = (c.casts_reused, c.casts_up_reused);
        (moved, c.parameter_casts, reused, c.ops_kept_narrow)
    };
    for later in &reports[1..] {
        assert_eq!(key(later), key(&reports[0]));
    }
    reports[0].clone()
}

#[test]
fn the_tiny_resnet_casts_each_parameter_once_per_step() {
    let mesh = Mesh::replicate(FlexDevice, 2).unwrap();
    let model = resnet(&mesh);
    // The convolutions' weights (4 dims; no biases) and the classifier's weight (2) and bias:
    // the parameters products read. (BatchNorm's, 1 dim, are read by no product.)
    let products = parameters_with_dims(&model, &[4, 2]);
    let read_by_products = products + 1;
    let mut wide = resnet_trainer(model.clone(), &mesh);
    let r = resnet_step(&mut wide, &mesh, 0, 1.0).counts;
    assert_eq!((r.casts_down, r.casts_up, r.cast_bytes), (0, 0, 0));
    assert_eq!((r.parameter_casts, r.casts_reused), (0, 0));
    let mut narrow = resnet_trainer(model, &mesh)
        .with_precision(Precision::Bf16)
        .unwrap();
    let reports = (0..3)
        .map(|i| resnet_step(&mut narrow, &mesh, i, 1.0).counts)
        .collect();
    let c = same_every_step(reports);
    show(
        &format!("tiny ResNet, bf16, 2 ranks, 16 images of 8×8, {products} products"),
        &c,
    );
    assert_eq!(c.parameter_casts, read_by_products, "{c:?}");
    // The backward pass reads every weight again, but the first convolution's (whose input
    // needs no gradient), and the classifier's (its input's gradient).
    assert!(c.casts_reused >= products - 1, "{c:?}");
    // Each product casts its input in the forward pass and again for its weight's gradient.
    assert!(c.casts_down >= read_by_products + 2 * products, "{c:?}");
    // Each product's backward pass reads its output's gradient twice (for its input's
    // gradient and its weight's), but the first convolution's: cast once for both.
    assert!(c.activation_casts_reused >= products - 1, "{c:?}");
    assert!(c.casts_up >= products, "{c:?}");
    // A BatchNorm follows each convolution and reads its narrow output three times in f32
    // (a transposed view for the mean, the output itself to centre it for the variance and
    // for its own output): widened once for all three.
    assert!(c.casts_up_reused >= 2 * (products - 1), "{c:?}");
    assert!(c.cast_bytes > 0);
}

/// Batch `i` of 8 sequences of 16 tokens, split by rows.
fn tokens(i: usize, mesh: &Mesh<FlexDevice>) -> Tensor<Ad, 2, Int> {
    let values: Vec<i32> = (0..8 * 16)
        .map(|k| ((k * 31 + i * 7) % 256) as i32)
        .collect();
    let t = Tensor::from_data(TensorData::new(values, [8, 16]), mesh);
    shard_int(t, 0).unwrap()
}

fn gpt_casts(precision: Precision, zero: u8, mesh: &Mesh<FlexDevice>) -> Counts {
    let model: Gpt<Ad> = GptConfig::tiny().init(mesh).unwrap();
    let mut t = Trainer::sharded(model, SgdConfig::new().init(), mesh, 4000)
        .with_precision(precision)
        .unwrap()
        .with_zero(zero)
        .unwrap();
    let reports = (0..3)
        .map(|i| {
            let loss = |m: &Gpt<Ad>| Ok(m.next_token_loss(tokens(i, mesh)).unwrap());
            t.step(loss).unwrap().counts
        })
        .collect();
    same_every_step(reports)
}

#[test]
fn the_tiny_gpt_casts_each_parameter_once_per_step() {
    let mesh = Mesh::replicate(FlexDevice, 2).unwrap();
    let f32_run = gpt_casts(Precision::F32, 0, &mesh);
    assert_eq!((f32_run.casts_down, f32_run.casts_up), (0, 0));
    let c = gpt_casts(Precision::Bf16, 0, &mesh);
    show("tiny GPT, bf16, 2 ranks, 8 sequences of 16 tokens", &c);
    // Each block's four linear layers (attention's QKV and output, the MLP's two), weights and
    // biases, and the output head (the token embedding's transpose): each cast once.
    let linears = 4 * GptConfig::tiny().n_layers as u64;
    assert_eq!(c.parameter_casts, 2 * linears + 1, "{c:?}");
    // The backward pass reads every weight again for its input's gradient (the head's as the
    // transpose of its transpose): from the forward pass's casts.
    assert_eq!(c.casts_reused, linears + 1, "{c:?}");
    // Each block's forward pass runs its GELU (8 elementwise ops in Burn's tanh form) and
    // attention's scale and causal mask on the narrow products they follow, casting nothing.
    let layers = GptConfig::tiny().n_layers as u64;
    assert!(c.ops_kept_narrow >= 10 * layers, "{c:?}");
    // Each linear layer's and the head's backward pass read their output's gradient twice
    // (for the input's gradient and the weight's): cast once for both.
    assert!(c.activation_casts_reused > linears, "{c:?}");
    // Every weight's gradient is `Partial`, cast up for its bucket.
    assert!(c.casts_up > linears, "{c:?}");
    // Each LayerNorm's backward pass reads its output's gradient (the narrow input gradient
    // of the linear layer or head after it) in several f32 ops: widened once for all.
    assert!(c.casts_up_reused > 2 * layers, "{c:?}");
}

#[test]
fn under_zero_3_a_sharded_parameter_is_cast_once_per_step_too() {
    let mesh = Mesh::replicate(FlexDevice, 2).unwrap();
    let replicated = gpt_casts(Precision::Bf16, 0, &mesh);
    let sharded = gpt_casts(Precision::Bf16, 3, &mesh);
    show("tiny GPT, bf16, ZeRO-3, 2 ranks", &sharded);
    // Each parameter's blocks are cast once and the cast shared by its clones and views, as a
    // replicated parameter's whole tensor is; the op reading it gathers the cast blocks.
    let casts = |c: &Counts| (c.parameter_casts, c.casts_reused);
    assert_eq!(casts(&sharded), casts(&replicated), "{sharded:?}");
    assert!(sharded.parameter_gathers > 0, "{sharded:?}");
}
