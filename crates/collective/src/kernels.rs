//! The reduction kernels, written in CubeCL: vectorized, generic over the runtime and the
//! float type; half types are widened to f32 for the arithmetic.

use crate::{op::Combine, DType};
use cubecl::prelude::*;
use cubecl::{calculate_cube_count_elemwise, server::Handle};

/// `dst[dst_at + i] = combine(dst[dst_at + i], src[i])` for every i of `src` (in vectors).
#[cube(launch_unchecked)]
fn combine_kernel<F: Float, N: Size>(
    dst: &mut Array<Vector<F, N>>,
    src: &Array<Vector<F, N>>,
    dst_at: u32,
    #[comptime] take_max: bool,
) {
    let i = ABSOLUTE_POS;
    if i < src.len() {
        let at = dst_at as usize + i;
        let a = Vector::<f32, N>::cast_from(dst[at]);
        let b = Vector::<f32, N>::cast_from(src[i]);
        if take_max {
            dst[at] = Vector::cast_from(max(a, b));
        } else {
            dst[at] = Vector::cast_from(a + b);
        }
    }
}

/// `dst[dst_at + i] = src[src_at + i]` for i < count (in vectors).
#[cube(launch_unchecked)]
fn copy_kernel<F: Float, N: Size>(
    dst: &mut Array<Vector<F, N>>,
    src: &Array<Vector<F, N>>,
    dst_at: u32,
    src_at: u32,
    count: u32,
) {
    let i = ABSOLUTE_POS;
    if i < count as usize {
        dst[dst_at as usize + i] = src[src_at as usize + i];
    }
}

/// `buf[at + i] /= divisor` for i < count (in vectors), computed in f32.
#[cube(launch_unchecked)]
fn divide_kernel<F: Float, N: Size>(
    buf: &mut Array<Vector<F, N>>,
    at: u32,
    count: u32,
    divisor: f32,
) {
    let i = ABSOLUTE_POS;
    if i < count as usize {
        let v = Vector::<f32, N>::cast_from(buf[at as usize + i]);
        buf[at as usize + i] = Vector::cast_from(v / Vector::new(divisor));
    }
}

/// Widest vector (4, 2 or 1 elements) that divides every offset and length given.
fn vector_width(values: &[usize]) -> usize {
    [4usize, 2, 1]
        .into_iter()
        .find(|w| values.iter().all(|v| v % w == 0))
        .unwrap_or(1)
}

/// Launch geometry for `count` elements whose offsets and lengths are `aligned`: the vector
/// width and the grid, or `None` when there is nothing to do.
fn plan<R: Runtime>(
    client: &ComputeClient<R>,
    count: usize,
    aligned: &[usize],
) -> Option<(usize, CubeCount, CubeDim)> {
    if count == 0 {
        return None;
    }
    let w = vector_width(aligned);
    let units = count / w;
    let dim = CubeDim::new(client, units);
    Some((w, calculate_cube_count_elemwise(client, units, dim), dim))
}

fn offset(v: usize) -> u32 {
    // `Group` rejects buffers of 2^32 elements or more before any kernel launch.
    u32::try_from(v).expect("collective buffers are limited to 2^32 elements")
}

/// Dispatch a kernel launch on the float type matching `dtype`.
macro_rules! launch_float {
    ($dtype:expr, $kernel:ident, $($args:expr),* $(,)?) => {
        // SAFETY: every launcher below passes array lengths that match the handles' sizes,
        // and the kernels guard each access with those lengths.
        unsafe {
            match $dtype {
                DType::F32 => $kernel::launch_unchecked::<f32, R>($($args),*),
                DType::F16 => $kernel::launch_unchecked::<half::f16, R>($($args),*),
                DType::BF16 => $kernel::launch_unchecked::<half::bf16, R>($($args),*),
            }
        }
    };
}

/// `dst[dst_at..dst_at + src_len] = combine(dst[...], src[..src_len])`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn combine<R: Runtime>(
    client: &ComputeClient<R>,
    dtype: DType,
    dst: &Handle,
    dst_len: usize,
    dst_at: usize,
    src: &Handle,
    src_len: usize,
    op: Combine,
) {
    let Some((w, count, dim)) = plan(client, src_len, &[dst_len, dst_at, src_len]) else {
        return;
    };
    launch_float!(
        dtype,
        combine_kernel,
        client,
        count,
        dim,
        w,
        ArrayArg::from_raw_parts(dst.clone(), dst_len),
        ArrayArg::from_raw_parts(src.clone(), src_len),
        offset(dst_at / w),
        op == Combine::Max,
    );
}

/// `dst[dst_at..dst_at + count] = src[src_at..src_at + count]`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn copy<R: Runtime>(
    client: &ComputeClient<R>,
    dtype: DType,
    dst: &Handle,
    dst_len: usize,
    dst_at: usize,
    src: &Handle,
    src_len: usize,
    src_at: usize,
    count: usize,
) {
    let Some((w, grid_count, dim)) =
        plan(client, count, &[dst_len, dst_at, src_len, src_at, count])
    else {
        return;
    };
    launch_float!(
        dtype,
        copy_kernel,
        client,
        grid_count,
        dim,
        w,
        ArrayArg::from_raw_parts(dst.clone(), dst_len),
        ArrayArg::from_raw_parts(src.clone(), src_len),
        offset(dst_at / w),
        offset(src_at / w),
        offset(count / w),
    );
}

/// `buf[at..at + count] /= divisor`.
pub(crate) fn divide<R: Runtime>(
    client: &ComputeClient<R>,
    dtype: DType,
    buf: &Handle,
    buf_len: usize,
    at: usize,
    count: usize,
    divisor: usize,
) {
    let Some((w, grid_count, dim)) = plan(client, count, &[buf_len, at, count]) else {
        return;
    };
    launch_float!(
        dtype,
        divide_kernel,
        client,
        grid_count,
        dim,
        w,
        ArrayArg::from_raw_parts(buf.clone(), buf_len),
        offset(at / w),
        offset(count / w),
        divisor as f32,
    );
}
