//! Flag words that order a raw device stream against CubeCL's streams without the host.
//!
//! A flag is a `u32` word in device memory holding a wrapping sequence number. On a CubeCL
//! stream, [`signal`] writes a number once every kernel queued before it has finished, and
//! [`FlagWait::enqueue`] holds back every kernel queued after it until the word reaches a
//! number. A raw CUDA stream waits for and writes the same words with the driver's stream
//! memory operations (`cuStreamWaitValue32`, `cuStreamWriteValue32`). Numbers compare as
//! those operations compare them: `seen` has reached `wanted` when `seen - wanted`, taken
//! modulo 2^32, is below 2^31, so a counter may wrap.

use crate::error::catch_runtime;
use crate::stream::DeviceStream;
use crate::Result;
use cubecl::prelude::*;
use cubecl::server::Handle;

/// Whether a flag holding `seen` has reached `wanted` (see the module docs); what the wait
/// kernel computes on the device.
#[cfg(all(test, feature = "wgpu"))]
fn reached(seen: u32, wanted: u32) -> bool {
    seen.wrapping_sub(wanted) < 1 << 31
}

/// `flags[slot] = value`, by one unit, after the kernels queued before it on its stream.
#[cube(launch_unchecked)]
fn signal_kernel(flags: &mut Array<Atomic<u32>>, slot: u32, value: u32) {
    if ABSOLUTE_POS == 0 {
        flags[slot as usize].store(value);
    }
}

/// Spins one unit until `flags[slot]` has reached `value`; the kernels queued after it on its
/// stream start once it returns.
#[cube(launch_unchecked)]
fn wait_kernel(flags: &mut Array<Atomic<u32>>, slot: u32, value: u32) {
    if ABSOLUTE_POS == 0 {
        loop {
            let seen = flags[slot as usize].load();
            // `reached`, written with the wrapping subtraction of the device's u32.
            if seen - value < 2147483648u32 {
                break;
            }
        }
    }
}

/// A flag buffer: `words` flags on one device.
pub(crate) fn new_flags<R: Runtime>(client: &ComputeClient<R>, words: usize) -> Handle {
    client.create_from_slice(&vec![0u8; 4 * words])
}

fn one_unit<R: Runtime>(client: &ComputeClient<R>) -> (CubeCount, CubeDim) {
    (CubeCount::Static(1, 1, 1), CubeDim::new(client, 1))
}

/// Queue `flags[slot] = value` on the device stream of `client`'s device.
pub(crate) fn signal<R: Runtime>(client: &ComputeClient<R>, flags: &Handle, slot: u32, value: u32) {
    let words = flags.size_in_used() as usize / 4;
    assert!((slot as usize) < words, "flag slot {slot} of {words}");
    let (count, dim) = one_unit(client);
    // SAFETY: `slot` is inside the buffer (checked above) and only unit 0 touches it.
    DeviceStream::run(|| unsafe {
        signal_kernel::launch_unchecked::<R>(
            client,
            count,
            dim,
            ArrayArg::from_raw_parts(flags.clone(), words),
            slot,
            value,
        )
    })
}

/// What a rank's stream must wait for before it reads bytes that a raw stream is still
/// moving: `flags[slot]` reaching `value`, queued on the device stream.
/// Dropped without [`FlagWait::enqueue`], it is queued anyway; and it holds the buffer the copy
/// writes ([`FlagWait::guarding`]) until it is queued, so that the memory is never handed to
/// another buffer first, whatever order its holder drops its fields in.
#[must_use = "the bytes are not there before the wait is queued"]
pub struct FlagWait<R: Runtime> {
    pub(crate) flags: Handle,
    pub(crate) slot: u32,
    pub(crate) value: u32,
    pub(crate) rank: usize,
    pub(crate) client: ComputeClient<R>,
    queued: bool,
    /// The memory the copy writes, held until the wait is queued.
    guarded: Option<Handle>,
}

impl<R: Runtime> std::fmt::Debug for FlagWait<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "FlagWait(rank {}: flag {} reaches {})",
            self.rank, self.slot, self.value
        )
    }
}

impl<R: Runtime> FlagWait<R> {
    /// The wait for `flags[slot]` (on rank `rank`, whose client is `client`) to reach
    /// `value`, to be queued on the device stream.
    pub(crate) fn new(
        flags: Handle,
        slot: u32,
        value: u32,
        rank: usize,
        client: ComputeClient<R>,
    ) -> Self {
        let words = flags.size_in_used() as usize / 4;
        assert!((slot as usize) < words, "flag slot {slot} of {words}");
        Self {
            flags,
            slot,
            value,
            rank,
            client,
            queued: false,
            guarded: None,
        }
    }

    /// The same wait, holding `buffer` (the memory the copy writes) until it is queued.
    pub(crate) fn guarding(mut self, buffer: Handle) -> Self {
        self.guarded = Some(buffer);
        self
    }

    /// Queue the wait on its stream of its rank's device: kernels queued on that stream
    /// afterwards see the copied bytes.
    pub fn enqueue(mut self) -> Result<()> {
        self.queue()
    }

    /// Queues the wait; the guarded buffer is let go once it is (when `self` drops).
    fn queue(&mut self) -> Result<()> {
        self.queued = true;
        let words = self.flags.size_in_used() as usize / 4;
        let (count, dim) = one_unit(&self.client);
        catch_runtime(self.rank, || {
            DeviceStream::run(|| {
                // SAFETY: `slot` is inside the buffer (checked in `new`) and only unit 0
                // reads it.
                unsafe {
                    wait_kernel::launch_unchecked::<R>(
                        &self.client,
                        count,
                        dim,
                        ArrayArg::from_raw_parts(self.flags.clone(), words),
                        self.slot,
                        self.value,
                    )
                }
            })
        })
    }
}

impl<R: Runtime> Drop for FlagWait<R> {
    fn drop(&mut self) {
        if !self.queued {
            if let Err(e) = self.queue() {
                tracing::error!(target: "firemesh::transport", "rank {}: a buffer dropped unread could not wait for its copy: {e}", self.rank);
            }
        }
    }
}

#[cfg(all(test, feature = "wgpu"))]
mod tests {
    use super::*;
    use crate::kernels;
    use cubecl::wgpu::WgpuRuntime;

    /// A wgpu client on the device stream, as a group's, or `None` (printed) where no adapter
    /// is present; `FIREMESH_REQUIRE_WGPU=1` (set by CI, which installs Mesa's driver) makes
    /// that a failure.
    fn wgpu_client() -> Option<ComputeClient<WgpuRuntime>> {
        match crate::wgpu_devices::wgpu_devices(1) {
            Ok(devices) => Some(DeviceStream::client::<WgpuRuntime>(&devices[0])),
            Err(reason) if std::env::var("FIREMESH_REQUIRE_WGPU").is_ok_and(|v| v == "1") => {
                panic!("FIREMESH_REQUIRE_WGPU=1 but {reason}")
            }
            Err(reason) => {
                eprintln!("SKIPPED: {reason}");
                None
            }
        }
    }

    fn words(client: &ComputeClient<WgpuRuntime>, handle: &Handle) -> Vec<u32> {
        let bytes = client.read_one(handle.clone()).expect("read back");
        bytes
            .chunks_exact(4)
            .map(|w| u32::from_le_bytes(w.try_into().unwrap()))
            .collect()
    }

    #[test]
    fn signals_set_flags_and_waits_for_reached_numbers_return() {
        let Some(client) = wgpu_client() else {
            return;
        };
        let flags = new_flags(&client, 3);
        assert_eq!(words(&client, &flags), [0, 0, 0]);
        signal(&client, &flags, 0, 7);
        signal(&client, &flags, 2, 3);
        // Reached: the number itself, an earlier one, and one from before a wrap of the counter.
        for (slot, value) in [(0, 7), (0, 6), (2, 3), (2, u32::MAX - 2), (1, 0)] {
            assert!(reached(
                if slot == 0 {
                    7
                } else if slot == 2 {
                    3
                } else {
                    0
                },
                value
            ));
            FlagWait::new(flags.clone(), slot, value, 0, client.clone())
                .enqueue()
                .expect("wait");
        }
        // Work queued after the waits runs (a wait that never returned would hang here).
        let src = client.create_from_slice(&[1u8, 0, 0, 0, 2, 0, 0, 0]);
        let dst = client.empty(8);
        kernels::copy_words(&client, &dst, &src, 2);
        assert_eq!(words(&client, &dst), [1, 2]);
        assert_eq!(words(&client, &flags), [7, 0, 3]);
    }

    /// A buffer that a raw copy may still write stays out of the memory pool's hands until the
    /// wait for the copy is queued, even after its own handle is dropped (as an `Arrival`
    /// drops its handle before its wait).
    #[test]
    fn memory_a_wait_guards_is_not_handed_out_before_the_wait_is_queued() {
        let Some(client) = wgpu_client() else {
            return;
        };
        let located = |h: &Handle| {
            let r = client.get_resource(h.clone()).expect("resource");
            (r.resource().buffer.clone(), r.resource().offset)
        };
        let flags = new_flags(&client, 1);
        let landing = client.empty(4096);
        let at = located(&landing);
        // A second handle to the memory, to see who else holds it: alone, it may be written in
        // place (the pool's own reference and this one).
        let witness = landing.clone();
        let wait = FlagWait::new(flags, 0, 0, 0, client.clone()).guarding(landing);
        assert!(
            !witness.can_mut(),
            "the wait let go of the memory its copy may still write"
        );
        let other = client.empty(4096);
        assert!(
            located(&other) != at,
            "memory a copy may still write was handed to another buffer"
        );
        drop(wait);
        assert!(witness.can_mut(), "the queued wait still holds the memory");
        assert_eq!(
            words(&client, &other).len(),
            1024,
            "work after the wait runs"
        );
    }

    #[test]
    fn word_copies_honour_the_offsets_of_both_handles() {
        let Some(client) = wgpu_client() else {
            return;
        };
        let values: Vec<u32> = (1..=12).collect();
        let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        let src = client.create_from_slice(&bytes);
        // Words 3..8 of the source (an offset that no 4-wide vector divides) ...
        for (from, count) in [(3usize, 5usize), (4, 8), (0, 12), (1, 1)] {
            let dst = client.create_from_slice(&[0u8; 64]);
            let src_slice = src
                .clone()
                .offset_start(4 * from as u64)
                .offset_end(4 * (12 - from - count) as u64);
            // ... into the destination from word 2 on.
            let dst_slice = dst.clone().offset_start(8);
            kernels::copy_words(&client, &dst_slice, &src_slice, count);
            let got = words(&client, &dst);
            let mut want = vec![0u32; 16];
            want[2..2 + count].copy_from_slice(&values[from..from + count]);
            assert_eq!(got, want, "words {from}..{}", from + count);
        }
    }

    #[test]
    fn a_flag_reaches_a_number_as_the_driver_compares_them() {
        assert!(reached(5, 5));
        assert!(reached(6, 5));
        assert!(!reached(4, 5));
        assert!(!reached(0, 1)); // a fresh flag has not reached the first number
                                 // Across the wrap: 2 comes after u32::MAX - 1.
        assert!(reached(2, u32::MAX - 1));
        assert!(!reached(u32::MAX - 1, 2));
        // Half the range apart is the limit.
        assert!(reached(1 << 31, 1));
        assert!(!reached(1 << 31, 0));
    }
}
