//! The collective suite on the portable path: plain Burn tensor ops on NdArray.

mod common;

use burn_ndarray::{NdArray, NdArrayDevice};
use burn_tensor::{Tensor, TensorData};
use common::Harness;
use firemesh_collective::{CollectiveConfig, Collectives, DType, PortableGroup};

type B = NdArray<f32>;

struct Portable;

fn burn_dtype(d: DType) -> burn_tensor::DType {
    match d {
        DType::F32 => burn_tensor::DType::F32,
        DType::F16 => burn_tensor::DType::F16,
        DType::BF16 => burn_tensor::DType::BF16,
    }
}

impl Harness for Portable {
    type G = PortableGroup<B>;

    fn group(&self, n: usize, config: CollectiveConfig) -> Option<Self::G> {
        Some(
            PortableGroup::new_shared(vec![NdArrayDevice::Cpu; n])
                .unwrap()
                .with_config(config),
        )
    }

    fn dtypes(&self, _g: &Self::G) -> Vec<DType> {
        DType::ALL.to_vec()
    }

    fn upload(&self, _g: &Self::G, _rank: usize, dtype: DType, values: &[f64]) -> Tensor<B, 1> {
        let data = TensorData::new(common::round_to(dtype, values), [values.len()]);
        Tensor::<B, 1>::from_data(data.convert_dtype(burn_dtype(dtype)), &NdArrayDevice::Cpu)
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
    common::run_matrix(&Portable, 8);
}

#[test]
fn rounding_stays_within_dtype_tolerance_and_ranks_agree() {
    common::run_rounding(&Portable, 3, 10_007);
}

#[test]
fn four_million_elements() {
    common::run_large(&Portable, 4, 4 * 1024 * 1024 + 3, DType::F32);
    common::run_large(&Portable, 3, 4 * 1024 * 1024 + 1, DType::BF16);
}

#[test]
fn every_tensor_collective_on_ndarray() {
    for n in [1, 3, 4] {
        let g = PortableGroup::<B>::new_shared(vec![NdArrayDevice::Cpu; n]).unwrap();
        common::check_tensor_ops::<B, _>(&g, &vec![NdArrayDevice::Cpu; n]);
    }
}

#[test]
fn one_device_sum_leaves_tensors_the_caller_kept_unchanged() {
    // Ranks on one device are summed into rank 0's buffer in place when it is uniquely owned;
    // a clone the caller kept must still read as the input (Burn tensors are values).
    let g = PortableGroup::<B>::new_shared(vec![NdArrayDevice::Cpu; 3]).unwrap();
    let inputs: Vec<Vec<f64>> = (0..3).map(|r| common::integer_input(r, 1000)).collect();
    let mut bufs: Vec<Tensor<B, 1>> = (0..3)
        .map(|r| Portable.upload(&g, r, DType::F32, &inputs[r]))
        .collect();
    let kept = bufs.clone();
    g.all_reduce(&mut bufs, firemesh_collective::ReduceOp::Sum)
        .unwrap();
    let want = common::reference(firemesh_collective::ReduceOp::Sum, &inputs);
    for (r, (b, k)) in bufs.iter().zip(&kept).enumerate() {
        assert_eq!(Portable.download(&g, b), want, "rank {r}");
        assert_eq!(
            Portable.download(&g, k),
            inputs[r],
            "kept input of rank {r}"
        );
    }
}
