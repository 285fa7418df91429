//! Burn tensors of a CubeCL backend are reduced on the devices by the kernels.

use crate::common;

use burn_cubecl::CubeBackend;
use burn_tensor::{Tensor, TensorData};
use cubecl::wgpu::WgpuRuntime;
use firemesh_collective::{Group, ReduceOp, TensorCollectives};
// Burn implements its device trait for `WgpuDevice` in burn-wgpu.
use burn_wgpu as _;

type B = CubeBackend<WgpuRuntime, f32, i32, u32>;

#[test]
fn burn_wgpu_tensors_all_reduce_in_device_memory() {
    let Some(devices) = common::wgpu_or_skip(3) else {
        return;
    };
    let group = Group::new(devices.clone()).unwrap();
    let inputs: Vec<Vec<f64>> = (0..3).map(|r| common::integer_input(r, 6 * 35)).collect();
    let tensors: Vec<Tensor<B, 2>> = inputs
        .iter()
        .zip(&devices)
        .map(|(v, d)| {
            Tensor::from_data(
                TensorData::new(v.iter().map(|&x| x as f32).collect(), [6, 35]),
                d,
            )
        })
        .collect();
    // A second reference to rank 0's memory: it must not see the reduction.
    let kept = tensors[0].clone();
    // A transposed (non-contiguous) input on rank 2 goes through a contiguous copy.
    let mut tensors = tensors;
    tensors[2] = tensors[2].clone().swap_dims(0, 1).swap_dims(0, 1);
    let out = group.all_reduce_tensors(tensors, ReduceOp::Sum).unwrap();
    let want: Vec<f32> = common::reference(ReduceOp::Sum, &inputs)
        .into_iter()
        .map(|x| x as f32)
        .collect();
    for (t, d) in out.into_iter().zip(&devices) {
        assert_eq!(&t.device(), d);
        assert_eq!(t.dims(), [6, 35]);
        assert_eq!(t.into_data().to_vec::<f32>().unwrap(), want);
    }
    let kept: Vec<f32> = kept.into_data().to_vec().unwrap();
    assert_eq!(
        kept,
        inputs[0].iter().map(|&x| x as f32).collect::<Vec<_>>()
    );
}

#[test]
fn every_tensor_collective_on_wgpu() {
    for n in [1, 3, 4] {
        let Some(devices) = common::wgpu_or_skip(n) else {
            return;
        };
        let group = Group::new(devices.clone()).unwrap();
        common::check_tensor_ops::<B, _>(&group, &devices);
    }
}
