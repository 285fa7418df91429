//! The collective suite on the portable path: plain Burn tensor ops on Flex (every rank on
//! one device) and on burn-wgpu over separate lavapipe clients (every move between ranks goes
//! through host memory).

use crate::common;

use burn_flex::{Flex, FlexDevice};
use burn_tensor::{backend::Backend, Tensor, TensorData};
use common::Harness;
use firemesh_collective::{CollectiveConfig, Collectives, DType, PortableGroup};

type B = Flex;

/// [`PortableGroup`] over the devices that `devices(n)` gives (`None`: skip).
struct Portable<B: Backend> {
    devices: fn(usize) -> Option<Vec<B::Device>>,
}

const FLEX: Portable<B> = Portable {
    devices: |n| Some(vec![FlexDevice; n]),
};

impl<B: Backend> Harness for Portable<B> {
    type G = PortableGroup<B>;

    fn group(&self, n: usize, config: CollectiveConfig) -> Option<Self::G> {
        let devices = (self.devices)(n)?;
        Some(
            PortableGroup::new_shared(devices)
                .unwrap()
                .with_config(config),
        )
    }

    fn dtypes(&self, g: &Self::G) -> Vec<DType> {
        DType::ALL
            .into_iter()
            .filter(|&d| B::supports_dtype(&g.devices()[0], d.to_burn()))
            .collect()
    }

    fn upload(&self, g: &Self::G, rank: usize, dtype: DType, values: &[f64]) -> Tensor<B, 1> {
        let data = TensorData::new(common::round_to(dtype, values), [values.len()]);
        // The dtype must be named: from a device alone, Burn makes its default float (f32).
        Tensor::<B, 1>::from_data(data, (&g.devices()[rank], dtype.to_burn()))
    }

    fn download(&self, _g: &Self::G, buf: &Tensor<B, 1>) -> Vec<f64> {
        buf.clone()
            .into_data()
            .convert::<f64>()
            .to_vec::<f64>()
            .unwrap()
    }
}

#[test]
fn every_op_dtype_and_length_for_1_to_8_ranks() {
    common::run_matrix(&FLEX, 8);
}

#[test]
fn many_blocks_gathered_in_place_in_pieces_on_threads() {
    common::run_placed_in_pieces(&FLEX);
}

#[test]
fn rounding_stays_within_dtype_tolerance_and_ranks_agree() {
    common::run_rounding(&FLEX, 3, 10_007);
}

#[test]
fn four_million_elements() {
    common::run_large(&FLEX, 4, 4 * 1024 * 1024 + 3, DType::F32);
    // f16 across wgpu devices too (WGSL has no bf16; the matrix above runs both on Flex).
    common::run_large(&WGPU, 3, 4 * 1024 * 1024 + 1, DType::F16);
}

#[test]
fn every_tensor_collective_on_flex() {
    for n in [1, 3, 4] {
        let g = PortableGroup::<B>::new_shared(vec![FlexDevice; n]).unwrap();
        common::check_tensor_ops::<B, _>(&g, &vec![FlexDevice; n]);
    }
}

#[test]
fn one_device_sum_leaves_tensors_the_caller_kept_unchanged() {
    // Ranks on one device are summed into rank 0's buffer in place when it is uniquely owned;
    // a clone the caller kept must still read as the input (Burn tensors are values).
    let g = PortableGroup::<B>::new_shared(vec![FlexDevice; 3]).unwrap();
    let inputs: Vec<Vec<f64>> = (0..3).map(|r| common::integer_input(r, 1000)).collect();
    let mut bufs: Vec<Tensor<B, 1>> = (0..3)
        .map(|r| FLEX.upload(&g, r, DType::F32, &inputs[r]))
        .collect();
    let kept = bufs.clone();
    g.all_reduce(&mut bufs, firemesh_collective::ReduceOp::Sum)
        .unwrap();
    let want = common::reference(firemesh_collective::ReduceOp::Sum, &inputs);
    for (r, (b, k)) in bufs.iter().zip(&kept).enumerate() {
        assert_eq!(FLEX.download(&g, b), want, "rank {r}");
        assert_eq!(FLEX.download(&g, k), inputs[r], "kept input of rank {r}");
    }
}

/// Separate wgpu devices: every send is a host round trip, which must keep the dtype.
const WGPU: Portable<burn_wgpu::Wgpu> = Portable {
    devices: common::wgpu_or_skip,
};

#[test]
fn every_op_dtype_and_length_across_separate_wgpu_devices() {
    common::run_matrix(&WGPU, 3);
}

#[test]
fn half_types_keep_their_dtype_across_separate_wgpu_devices() {
    let Some(g) = WGPU.group(2, CollectiveConfig::default()) else {
        return;
    };
    for dtype in WGPU.dtypes(&g) {
        let inputs: Vec<Vec<f64>> = (0..2).map(|r| common::integer_input(r, 1001)).collect();
        let mut bufs: Vec<_> = (0..2)
            .map(|r| WGPU.upload(&g, r, dtype, &inputs[r]))
            .collect();
        g.all_reduce(&mut bufs, firemesh_collective::ReduceOp::Sum)
            .unwrap();
        let want = common::reference(firemesh_collective::ReduceOp::Sum, &inputs);
        for b in &bufs {
            assert_eq!(
                b.dtype(),
                dtype.to_burn(),
                "the result keeps the inputs' dtype"
            );
            assert_eq!(WGPU.download(&g, b), want, "{dtype:?}");
        }
    }
}
