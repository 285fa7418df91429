//! A minimal reproduction, with CubeCL alone, of the wrong element that firemesh met when
//! collectives and Burn ops shared wgpu devices ([`firemesh_collective::stream`]). Run it with
//! `cargo run -p firemesh-collective --example cubecl_stream_reuse` (needs a wgpu adapter; Mesa's
//! lavapipe will do).
//!
//! CubeCL 0.10 keeps one stream per issuing thread (`StreamId::current`), and every stream has its
//! own memory pool and its own list of launches not yet handed to the device. A buffer made on
//! stream A and read by a kernel queued on stream B goes back to A's pool as soon as its last
//! handle is dropped, while B's kernel may still wait in B's list. The next allocation on A of
//! that size gets the same memory, and A's write reaches the device first; B's kernel then reads
//! the new bytes.
//!
//! Steps (two stream ids stand for two threads):
//! 1. on A: `x = [1.0; N]`;
//! 2. on B: `y = copy(x)`, queued, not yet run;
//! 3. drop `x`;
//! 4. on A: `z = [2.0; N]` (same size), and a flush of A;
//! 5. on B: read `y`. It should hold 1.0; it holds 2.0.

use cubecl::prelude::*;
use cubecl::stream_id::StreamId;
use cubecl::wgpu::{WgpuDevice, WgpuRuntime};

#[cube(launch)]
fn copy_kernel(input: &Array<f32>, output: &mut Array<f32>) {
    if ABSOLUTE_POS < input.len() {
        output[ABSOLUTE_POS] = input[ABSOLUTE_POS];
    }
}

const N: usize = 1 << 16;

fn bytes(value: f32) -> Vec<u8> {
    std::iter::repeat_n(value.to_le_bytes(), N)
        .flatten()
        .collect()
}

fn main() {
    let device = WgpuDevice::DefaultDevice;
    let client = WgpuRuntime::client(&device);
    let (a, b) = (StreamId { value: 1001 }, StreamId { value: 1002 });

    let x = a.executes(|| client.create_from_slice(&bytes(1.0)));
    let y = b.executes(|| {
        let y = client.empty(N * 4);
        let dim = CubeDim::new(&client, N);
        let count = cubecl::calculate_cube_count_elemwise(&client, N, dim);
        unsafe {
            copy_kernel::launch::<WgpuRuntime>(
                &client,
                count,
                dim,
                ArrayArg::from_raw_parts(x.clone(), N),
                ArrayArg::from_raw_parts(y.clone(), N),
            )
        };
        y
    });
    drop(x);
    let z = a.executes(|| {
        let z = client.create_from_slice(&bytes(2.0));
        client.flush().expect("flush stream A");
        z
    });
    let got = b.executes(|| client.read_one(y).expect("read y"));
    let got: Vec<f32> = got
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect();
    let wrong = got.iter().filter(|&&v| v != 1.0).count();
    drop(z);
    if wrong == 0 {
        println!("not reproduced: y holds x's values (1.0) on this runtime");
    } else {
        println!(
            "REPRODUCED: {wrong} of {N} elements of y are wrong (y[0] = {}, want 1.0): \
             x's memory was reused by stream A before stream B's queued copy read it",
            got[0]
        );
        std::process::exit(1);
    }
}
