//! The reduction kernels, written in CubeCL: vectorized, generic over the runtime and the
//! float type; half types are widened to f32 for the arithmetic.

use crate::{op::Combine, DType, DeviceBuffer};
use cubecl::calculate_cube_count_elemwise;
use cubecl::prelude::*;
use cubecl::server::Handle;
use std::ops::Range;

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

/// `dst[dst_at + i] = src[src_at + i]` for i < count (in vectors): floats of a dtype, or
/// 32-bit words (the bytes, whatever the dtype).
#[cube(launch_unchecked)]
fn copy_kernel<T: Numeric, N: Size>(
    dst: &mut Array<Vector<T, N>>,
    src: &Array<Vector<T, N>>,
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

/// Launch `$kernel` over `$count` elements, vectorized by the widest width `$w` that divides
/// every value of `$aligned`, on the float type of `$dtype`; `$args` follow the launch geometry
/// and may use `$w`. Returns from the enclosing function when there is nothing to do.
macro_rules! launch {
    ($client:expr, $dtype:expr, $kernel:ident, $count:expr, $aligned:expr,
     |$w:ident| ($($args:expr),* $(,)?)) => {{
        let Some(($w, cubes, dim)) = plan($client, $count, $aligned) else {
            return;
        };
        // SAFETY: every launcher below passes array lengths that match the buffers' sizes, and
        // the kernels guard each access with those lengths.
        unsafe {
            match $dtype {
                DType::F32 => {
                    $kernel::launch_unchecked::<f32, R>($client, cubes, dim, $w, $($args),*)
                }
                DType::F16 => {
                    $kernel::launch_unchecked::<half::f16, R>($client, cubes, dim, $w, $($args),*)
                }
                DType::BF16 => {
                    $kernel::launch_unchecked::<half::bf16, R>($client, cubes, dim, $w, $($args),*)
                }
            }
        }
    }};
}

/// `dst[at..at + src.len] = combine(dst[at..at + src.len], src)`.
pub(crate) fn combine<R: Runtime>(
    client: &ComputeClient<R>,
    dst: &DeviceBuffer<R>,
    at: usize,
    src: &DeviceBuffer<R>,
    op: Combine,
) {
    let aligned = [dst.len, at, src.len];
    launch!(client, dst.dtype, combine_kernel, src.len, &aligned, |w| (
        ArrayArg::from_raw_parts(dst.handle.clone(), dst.len),
        ArrayArg::from_raw_parts(src.handle.clone(), src.len),
        offset(at / w),
        op == Combine::Max,
    ));
}

/// `dst[at..at + from.len()] = src[from]`.
pub(crate) fn copy<R: Runtime>(
    client: &ComputeClient<R>,
    dst: &DeviceBuffer<R>,
    at: usize,
    src: &DeviceBuffer<R>,
    from: Range<usize>,
) {
    let count = from.len();
    let aligned = [dst.len, at, src.len, from.start, count];
    launch!(client, dst.dtype, copy_kernel, count, &aligned, |w| (
        ArrayArg::from_raw_parts(dst.handle.clone(), dst.len),
        ArrayArg::from_raw_parts(src.handle.clone(), src.len),
        offset(at / w),
        offset(from.start / w),
        offset(count / w),
    ));
}

/// `buf[range] /= divisor`.
pub(crate) fn divide<R: Runtime>(
    client: &ComputeClient<R>,
    buf: &DeviceBuffer<R>,
    range: Range<usize>,
    divisor: usize,
) {
    let count = range.len();
    let aligned = [buf.len, range.start, count];
    launch!(client, buf.dtype, divide_kernel, count, &aligned, |w| (
        ArrayArg::from_raw_parts(buf.handle.clone(), buf.len),
        offset(range.start / w),
        offset(count / w),
        divisor as f32,
    ));
}

/// The first `words` 32-bit words of `src` into `dst` (both may be slices of a buffer, at
/// offsets that are whole words, spanning at least `words` words).
pub(crate) fn copy_words<R: Runtime>(
    client: &ComputeClient<R>,
    dst: &Handle,
    src: &Handle,
    words: usize,
) {
    // The kernel binds whole buffers (runtimes restrict the offsets a binding may start at)
    // and is given the slices' first words.
    let whole = |h: &Handle| {
        let start = h.offset_start.unwrap_or(0) as usize;
        assert!(
            start.is_multiple_of(4) && h.size_in_used() as usize >= 4 * words,
            "copy_words: {words} words at byte {start} of a {}-byte slice",
            h.size_in_used()
        );
        let mut base = h.clone();
        (base.offset_start, base.offset_end) = (None, None);
        let len = base.size() as usize / 4;
        (base, start / 4, len)
    };
    let (dst, dst_at, dst_len) = whole(dst);
    let (src, src_at, src_len) = whole(src);
    let Some((w, cubes, dim)) = plan(client, words, &[words, dst_at, src_at, dst_len, src_len])
    else {
        return;
    };
    // SAFETY: both slices lie inside their buffers (checked above) and the kernel guards each
    // access with `count`.
    unsafe {
        copy_kernel::launch_unchecked::<u32, R>(
            client,
            cubes,
            dim,
            w,
            ArrayArg::from_raw_parts(dst, dst_len),
            ArrayArg::from_raw_parts(src, src_len),
            offset(dst_at / w),
            offset(src_at / w),
            offset(words / w),
        )
    }
}
