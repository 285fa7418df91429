//! Seeding, alone in its own test binary: it reseeds Burn's CPU generator, which every test of
//! a process shares, and compares the values drawn after it; a test drawing beside it in the
//! same process (the tests of `tests/firemesh` run in parallel) would take draws in between.

use burn::backend::Autodiff;
use burn::module::{ModuleVisitor, Param};
use burn::optim::SgdConfig;
use burn::prelude::*;
use burn_flex::{Flex, FlexDevice};
use firemesh::backend::{Mesh, Sharded};
use firemesh::Trainer;
use firemesh_resnet::{ResNet, ResNetConfig, StemKind};

type Ad = Autodiff<Sharded<Flex>>;

/// Burn draws a parameter at its first use. A trainer draws every parameter when it is built,
/// so the model it steps from is the one made under its maker's seed, not one drawn after a
/// step reseeded the generator (`with_step_seeds`): here a reseed after the trainer is built
/// leaves its parameters as the seed they were made under gave them.
#[test]
fn a_trainer_steps_from_the_parameters_its_maker_seeded() {
    let mesh = Mesh::replicate(FlexDevice, 2).expect("mesh");
    let config = ResNetConfig::tiny(10).with_stem(StemKind::Cifar);
    let values = |model: &ResNet<Ad>| -> Vec<Vec<f32>> {
        struct Read(Vec<Vec<f32>>);
        impl ModuleVisitor<Ad> for Read {
            fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<Ad, D>>) {
                self.0.push(param.val().into_data().to_vec().unwrap());
            }
        }
        let mut read = Read(Vec::new());
        model.visit(&mut read);
        read.0
    };
    Ad::seed(&mesh, 11);
    let made = values(&config.init::<Ad>(&mesh).unwrap());
    Ad::seed(&mesh, 11);
    let model = config.init::<Ad>(&mesh).unwrap();
    let trainer =
        Trainer::sharded(model, SgdConfig::new().init(), &mesh, 1 << 20).with_step_seeds(12);
    Ad::seed(&mesh, 13); // what a step's reseed does
    assert_eq!(values(trainer.model()), made);
}
