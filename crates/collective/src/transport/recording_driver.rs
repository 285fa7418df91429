//! A [`StreamDriver`] on wgpu devices that counts every call by kind, for the tests: the
//! stream-ordered transport's protocol runs here with no GPU, and its cost per collective is
//! counted, not guessed. It also refuses a raw wait on a device whose flag kernels have not
//! all been handed to the driver by a blocking call since they were launched.
//!
//! Launches go to the wgpu clients as they would on CUDA. The raw streams are simulated in
//! the order the calls come: a raw wait reads its flag word back (the kernels queued before it
//! have run) and fails where the word has not reached the number, which on a device would be a
//! wait on work never queued before it; a raw write or copy lands through the wgpu queue at
//! once. Polled events run behind the host as a device would: an event is reported done once
//! [`LAG`] more raw copies have been queued or polls made after it (or once the host waited
//! for it).

use super::stream_driver::{Raw, StreamDriver};
use super::{flags, Rank};
use crate::{kernels, wgpu_devices, Result};
use cubecl::client::ComputeClient;
use cubecl::server::Handle;
use cubecl::wgpu::{WgpuDevice, WgpuRuntime};
use std::collections::BTreeMap;
use std::sync::Mutex;

/// The calls made, by name, each of one kind.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Tally {
    pub launches: u64,
    pub queued: u64,
    pub blocking: u64,
    pub by_call: BTreeMap<&'static str, u64>,
}

impl Tally {
    /// The calls made since `before`.
    pub fn since(&self, before: &Tally) -> Tally {
        let by_call = (self.by_call.iter())
            .map(|(&k, &v)| (k, v - before.by_call.get(k).copied().unwrap_or(0)))
            .filter(|&(_, v)| v > 0)
            .collect();
        Tally {
            launches: self.launches - before.launches,
            queued: self.queued - before.queued,
            blocking: self.blocking - before.blocking,
            by_call,
        }
    }

    pub fn calls(&self, name: &str) -> u64 {
        self.by_call.get(name).copied().unwrap_or(0)
    }
}

#[derive(Clone, Copy)]
enum Kind {
    Launch,
    Queued,
    Blocking,
}

/// A device: its rank.
pub(crate) struct FakeDevice {
    rank: usize,
}

/// The recording driver (see the module docs).
#[derive(Default)]
pub(crate) struct RecordingDriver {
    tally: Mutex<Tally>,
    /// What each address names: a rank's client and device, the buffer, and the byte at which
    /// the address starts (addresses are the index here, shifted, plus an offset).
    memory: Mutex<Vec<(ComputeClient<WgpuRuntime>, WgpuDevice, Handle)>>,
    next_object: Mutex<u64>,
    /// Each event, with the number of raw copies queued when it was last recorded (0 once
    /// the host waited for it).
    events: Mutex<BTreeMap<u64, u64>>,
    /// The ranks with a flag kernel launched and not yet handed to the driver (no blocking
    /// call on their client since): a raw wait on such a rank's device could be on a kernel
    /// the driver does not have yet, and fails.
    unhanded: Mutex<std::collections::BTreeSet<usize>>,
}

const SHIFT: u32 = 32;

/// How many raw copies the simulated device runs behind the host.
const LAG: u64 = 16;

impl RecordingDriver {
    pub fn tally(&self) -> Tally {
        self.tally.lock().unwrap().clone()
    }

    fn count(&self, name: &'static str, kind: Kind) {
        let mut t = self.tally.lock().unwrap();
        *t.by_call.entry(name).or_default() += 1;
        match kind {
            Kind::Launch => t.launches += 1,
            Kind::Queued => t.queued += 1,
            Kind::Blocking => t.blocking += 1,
        }
    }

    fn object(&self) -> u64 {
        let mut next = self.next_object.lock().unwrap();
        *next += 1;
        *next
    }

    /// The `bytes` at `address`, as a handle of the buffer that holds them.
    fn slice(
        &self,
        address: u64,
        bytes: usize,
    ) -> (ComputeClient<WgpuRuntime>, WgpuDevice, Handle) {
        let memory = self.memory.lock().unwrap();
        let (client, device, base) = &memory[(address >> SHIFT) as usize];
        let at = address & ((1 << SHIFT) - 1);
        let end = base.size() - at - bytes as u64;
        let slice = base.clone().offset_start(at).offset_end(end);
        (client.clone(), device.clone(), slice)
    }

    /// The bytes at `address`, once every kernel queued before on its device has run.
    fn read(&self, address: u64, bytes: usize) -> Raw<Vec<u8>> {
        let (client, _, slice) = self.slice(address, bytes);
        let data = client.read_one(slice).map_err(|e| format!("{e:?}"))?;
        Ok(data.to_vec())
    }

    /// `data` written at `address` now, through the device's wgpu queue.
    fn write(&self, address: u64, data: &[u8]) -> Raw {
        let (client, device, slice) = self.slice(address, data.len());
        let setup = wgpu_devices::setup_of(&device).ok_or("a device outside the pool")?;
        let resource = client.get_resource(slice).map_err(|e| format!("{e:?}"))?;
        let resource = resource.resource();
        setup
            .queue
            .write_buffer(&resource.buffer, resource.offset, data);
        setup.queue.submit(std::iter::empty());
        Ok(())
    }
}

impl StreamDriver<WgpuRuntime> for RecordingDriver {
    type Device = FakeDevice;
    type Stream = u64;
    type Event = u64;

    fn device(&self, rank: &Rank<WgpuRuntime>) -> Result<FakeDevice> {
        Ok(FakeDevice { rank: rank.index })
    }

    fn pair(&self, _from: &FakeDevice, _to: &FakeDevice) -> bool {
        true
    }

    fn new_stream(&self, _device: &FakeDevice) -> Raw<u64> {
        self.count("new stream", Kind::Queued);
        Ok(self.object())
    }

    fn new_event(&self, _device: &FakeDevice) -> Raw<u64> {
        self.count("new event", Kind::Queued);
        Ok(self.object())
    }

    fn destroy_stream(&self, _device: &FakeDevice, _stream: u64) {}

    fn destroy_event(&self, _device: &FakeDevice, _event: u64) {}

    fn signal(
        &self,
        rank: &Rank<WgpuRuntime>,
        flags: &Handle,
        slot: u32,
        value: u32,
    ) -> Result<()> {
        self.count("signal", Kind::Launch);
        self.unhanded.lock().unwrap().insert(rank.index);
        flags::signal(&rank.client, flags, slot, value);
        Ok(())
    }

    fn wait(&self, rank: &Rank<WgpuRuntime>, flags: &Handle, slot: u32, value: u32) -> Result<()> {
        self.count("wait", Kind::Launch);
        let client = rank.client.clone();
        flags::FlagWait::new(flags.clone(), slot, value, rank.index, client).enqueue()
    }

    fn flush(&self, rank: &Rank<WgpuRuntime>) -> Result<()> {
        self.count("flush", Kind::Blocking);
        self.unhanded.lock().unwrap().remove(&rank.index);
        crate::error::try_runtime(rank.index, || rank.client.flush())
    }

    fn copy_words(
        &self,
        rank: &Rank<WgpuRuntime>,
        dst: &Handle,
        src: &Handle,
        words: usize,
    ) -> Result<()> {
        self.count("copy words", Kind::Launch);
        kernels::copy_words(&rank.client, dst, src, words);
        Ok(())
    }

    fn address(&self, rank: &Rank<WgpuRuntime>, handle: &Handle) -> Result<u64> {
        self.count("address", Kind::Blocking);
        self.unhanded.lock().unwrap().remove(&rank.index);
        let at = handle.offset_start.unwrap_or(0);
        let mut base = handle.clone();
        (base.offset_start, base.offset_end) = (None, None);
        let mut memory = self.memory.lock().unwrap();
        memory.push((rank.client.clone(), rank.device.clone(), base));
        Ok(((memory.len() as u64 - 1) << SHIFT) + at)
    }

    fn wait_value(&self, device: &FakeDevice, _stream: u64, address: u64, value: u32) -> Raw {
        self.count("wait value", Kind::Queued);
        if self.unhanded.lock().unwrap().contains(&device.rank) {
            return Err(format!(
                "rank {}: a raw wait queued while a flag kernel of its device may not have \
                 reached the driver",
                device.rank
            ));
        }
        let word = self.read(address, 4)?;
        let seen = u32::from_le_bytes(word[..4].try_into().expect("4 bytes"));
        if seen.wrapping_sub(value) < 1 << 31 {
            Ok(())
        } else {
            Err(format!(
                "rank {}: a raw wait for {value} on a word holding {seen}: nothing queued before \
                 it would ever write the number",
                device.rank
            ))
        }
    }

    fn write_value(&self, _device: &FakeDevice, _stream: u64, address: u64, value: u32) -> Raw {
        self.count("write value", Kind::Queued);
        self.write(address, &value.to_le_bytes())
    }

    fn record(&self, _device: &FakeDevice, event: u64, _stream: u64) -> Raw {
        self.count("record", Kind::Queued);
        let copies = self.tally().calls("copy") + LAG;
        self.events.lock().unwrap().insert(event, copies);
        Ok(())
    }

    fn wait_event(&self, _device: &FakeDevice, _stream: u64, _event: u64) -> Raw {
        self.count("wait event", Kind::Queued);
        Ok(())
    }

    fn copy(
        &self,
        _to: &FakeDevice,
        _from: &FakeDevice,
        _peers: bool,
        dst: u64,
        src: u64,
        bytes: usize,
        _stream: u64,
    ) -> Raw {
        self.count("copy", Kind::Queued);
        let data = self.read(src, bytes)?;
        self.write(dst, &data)
    }

    fn landed(&self, event: u64) -> Raw<bool> {
        self.count("landed", Kind::Queued);
        let copies = self.tally().calls("copy");
        let mut events = self.events.lock().unwrap();
        let done_at = events.entry(event).or_insert(0);
        // Time passes with each poll too, so that a drain ends.
        *done_at = done_at.saturating_sub(1);
        Ok(copies >= *done_at)
    }

    fn synchronize_event(&self, _device: &FakeDevice, event: u64) -> Raw {
        self.count("synchronize event", Kind::Blocking);
        self.events.lock().unwrap().insert(event, 0);
        Ok(())
    }

    fn synchronize_stream(&self, _device: &FakeDevice, _stream: u64) -> Raw {
        self.count("synchronize stream", Kind::Blocking);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transport::{StreamOrderedCopy, Transport, WgpuStagedCopy};
    use crate::{Algorithm, CollectiveConfig, Collectives, DType, Group, ReduceOp, Transfer};
    use std::sync::Arc;

    type Recording = StreamOrderedCopy<WgpuRuntime, RecordingDriver>;

    /// `n` wgpu ranks joined by the stream-ordered transport over the recording driver, with
    /// every ring chunk cut into 4 sub-chunks.
    fn group(n: usize) -> Option<(Group<WgpuRuntime>, Arc<Recording>)> {
        let devices = match wgpu_devices::wgpu_devices(n) {
            Ok(d) => d,
            Err(e) => {
                eprintln!("skipped: {e}");
                return None;
            }
        };
        let transport = Arc::new(StreamOrderedCopy::with_driver(
            "recording",
            RecordingDriver::default(),
            Arc::new(WgpuStagedCopy::default()),
        ));
        let config = CollectiveConfig {
            algorithm: Algorithm::Ring,
            pipeline_depth: 4,
            min_subchunk_bytes: 1024,
            ..CollectiveConfig::with_transfer(Transfer::StreamOrdered)
        };
        let group = Group::new(devices)
            .expect("wgpu group")
            .with_config(config)
            .with_transport(transport.clone() as Arc<dyn Transport<WgpuRuntime>>);
        Some((group, transport))
    }

    /// Sums `len` values over the group's ranks and checks every rank's result; the calls
    /// it made.
    fn all_reduce(
        group: &Group<WgpuRuntime>,
        driver: &RecordingDriver,
        len: usize,
        seed: usize,
    ) -> Tally {
        let n = group.ranks().len();
        let value = |r: usize, i: usize| ((r * 7 + i * 3 + seed) % 23) as f64 - 11.0;
        let mut bufs: Vec<_> = (0..n)
            .map(|r| {
                let values: Vec<f64> = (0..len).map(|i| value(r, i)).collect();
                group.upload(r, DType::F32, &values).expect("upload")
            })
            .collect();
        let before = driver.tally();
        group
            .all_reduce(&mut bufs, ReduceOp::Sum)
            .expect("all-reduce");
        let calls = driver.tally().since(&before);
        let want: Vec<f64> = (0..len)
            .map(|i| (0..n).map(|r| value(r, i)).sum())
            .collect();
        for buf in &bufs {
            assert_eq!(
                group.download(buf).expect("download"),
                want,
                "N = {n}, {len} values"
            );
        }
        calls
    }

    #[test]
    fn a_ring_all_reduce_over_the_stream_ordered_protocol_sums_and_costs_what_its_design_says() {
        for n in [2, 4, 8] {
            let Some((group, transport)) = group(n) else {
                return;
            };
            let driver = transport.driver();
            // The first all-reduce also opens the lanes (2 per rank).
            all_reduce(&group, driver, 4096 * n, 0);
            for len in [4096 * n, 65536 * n] {
                let calls = all_reduce(&group, driver, len, len);
                // 2(N-1) steps of N links, each chunk in 4 sub-chunks.
                let copies = (2 * (n - 1) * n * 4) as u64;
                eprintln!("N = {n}, {len} values: {copies} copies, {calls:?}");
                assert_eq!(calls.calls("copy"), copies, "N = {n}: {calls:?}");
                // Read in place: no staging kernel. Per copy, a flag on each side; the
                // all-gather half lands in place, its reader's wait queued here (the
                // reduce-scatter half's are queued by the kernels that combine); per rank, at
                // most one wait at the end for its last copy out.
                let half = copies / 2;
                assert_eq!(calls.calls("copy words"), 0);
                assert_eq!(calls.calls("signal"), 2 * copies);
                let settled = calls.calls("wait") - half;
                assert!(settled <= n as u64, "{calls:?}");
                // Blocking: the reduce-scatter's new landing buffer's address per copy (it
                // hands the flags of its device to the driver), one flush per rank per round
                // of the all-gather (its buffers' addresses are known), each rank's buffer
                // resolved once; the host never waits for a device.
                assert_eq!(calls.calls("address"), half + n as u64, "{calls:?}");
                assert_eq!(calls.calls("flush"), half, "{calls:?}");
                assert_eq!(calls.blocking, copies + n as u64, "{calls:?}");
                assert_eq!(calls.calls("synchronize event"), 0, "{calls:?}");
                // Queued on the raw streams: 7 per copy, 2 per settled lane.
                let polls = calls.calls("landed") + calls.calls("new event");
                assert_eq!(calls.queued - polls, 7 * copies + 2 * settled, "{calls:?}");
            }
        }
    }

    #[test]
    fn every_collective_over_the_stream_ordered_protocol_matches_the_host() {
        let n = 4;
        let Some((group, transport)) = group(n) else {
            return;
        };
        let driver = transport.driver();
        let len = 5000; // not a multiple of the ring's alignment
        let value = |r: usize, i: usize| ((r * 5 + i * 7) % 19) as f64 - 9.0;
        let upload = |r: usize| {
            let values: Vec<f64> = (0..len).map(|i| value(r, i)).collect();
            group.upload(r, DType::F32, &values).expect("upload")
        };
        let sum: Vec<f64> = (0..len)
            .map(|i| (0..n).map(|r| value(r, i)).sum())
            .collect();
        // The one-shot all-reduce writes the buffers it sent: its sources are staged.
        let devices = group.ranks().iter().map(|r| r.device.clone()).collect();
        let one_shot = Group::new(devices)
            .expect("wgpu group")
            .with_config(CollectiveConfig {
                algorithm: Algorithm::OneShot,
                ..group.config().clone()
            })
            .with_transport(transport.clone() as Arc<dyn Transport<WgpuRuntime>>);
        let mut bufs: Vec<_> = (0..n).map(upload).collect();
        let before = driver.tally();
        one_shot
            .all_reduce(&mut bufs, ReduceOp::Sum)
            .expect("one-shot");
        let calls = driver.tally().since(&before);
        for buf in &bufs {
            assert_eq!(group.download(buf).expect("download"), sum);
        }
        assert_eq!(
            calls.calls("copy words"),
            n as u64,
            "one staging copy per source: {calls:?}"
        );
        // The ring's reduce-scatter, all-gather and broadcast read their sources in place.
        let mut bufs: Vec<_> = (0..n).map(upload).collect();
        let before = driver.tally();
        let parts = group
            .reduce_scatter(&mut bufs, ReduceOp::Sum)
            .expect("reduce-scatter");
        let gathered = group.all_gather(&parts).expect("all-gather");
        for buf in &gathered {
            assert_eq!(group.download(buf).expect("download"), sum);
        }
        let mut bufs: Vec<_> = (0..n).map(upload).collect();
        group.broadcast(&mut bufs, 2).expect("broadcast");
        let root: Vec<f64> = (0..len).map(|i| value(2, i)).collect();
        for buf in &bufs {
            assert_eq!(group.download(buf).expect("download"), root);
        }
        let calls = driver.tally().since(&before);
        assert!(calls.calls("copy") > 0, "{calls:?}");
        assert_eq!(calls.calls("copy words"), 0, "{calls:?}");
    }

    #[test]
    fn a_raw_wait_before_its_flag_kernel_reached_the_driver_is_refused() {
        let Some((group, _)) = group(2) else {
            return;
        };
        let driver = RecordingDriver::default();
        let rank = &group.ranks()[0];
        let flag = flags::new_flags(&rank.client, 1);
        let address = driver.address(rank, &flag).unwrap();
        let device = driver.device(rank).unwrap();
        driver.signal(rank, &flag, 0, 1).unwrap();
        let early = driver.wait_value(&device, 0, address, 1).unwrap_err();
        assert!(early.contains("may not have reached the driver"), "{early}");
        driver.flush(rank).unwrap();
        driver.wait_value(&device, 0, address, 1).unwrap();
        // A wait for a number no kernel writes would wait for ever.
        let never = driver.wait_value(&device, 0, address, 2).unwrap_err();
        assert!(
            never.contains("nothing queued before it would ever write"),
            "{never}"
        );
    }
}
