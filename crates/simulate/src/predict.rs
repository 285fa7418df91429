//! A step on N ranks: compute timeline, bucket schedule, communication stream, stragglers and
//! the host.

use crate::link::{all_gather_seconds, all_reduce_seconds, Topology};
use crate::profile::StepProfile;
use crate::straggler;
use serde::{Deserialize, Serialize};

/// How gradients are grouped into collectives.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub enum Schedule {
    /// One collective per gradient tensor.
    PerTensor,
    /// The gradients in backward order as one stream cut every `bytes` (a tensor may span two
    /// buckets), one collective per bucket.
    Buckets { bytes: u64 },
}

/// The host's cost of issuing one op for every rank. Ranks in turn on one thread:
/// `op_s + (N - 1) * op_s_per_extra_rank`. On rank threads (`handoff_s` given), the calling
/// thread issues rank 0's share and hands one job to each other rank, whose threads issue
/// their shares beside it: `op_s + (N - 1) * handoff_s` (a core per rank assumed).
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct HostModel {
    pub op_s: f64,
    pub op_s_per_extra_rank: f64,
    #[serde(default)]
    pub handoff_s: Option<f64>,
}

impl HostModel {
    pub fn op_seconds(&self, ranks: usize) -> f64 {
        let per_extra = self.handoff_s.unwrap_or(self.op_s_per_extra_rank);
        self.op_s + ranks.saturating_sub(1) as f64 * per_extra
    }
}

/// How the model's state is split over the ranks: ZeRO's stages.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Sharding {
    /// 0: replicated (gradients all-reduced); 1: optimizer state sharded (gradients
    /// reduce-scattered in their buckets, the updated f32 parameters all-gathered after the
    /// optimizer, bucket by bucket); 3: parameters too (each layer's gathered before its
    /// forward and again before its backward, gradients reduce-scattered).
    pub stage: u8,
    /// ZeRO-3: gathers issued ahead of use, while the layers before them compute: the next
    /// layer's, and more until this many bytes are gathered ahead (as DeepSpeed's prefetch
    /// bucket, and firemesh's `--gather-ahead-mib`); `None`: each when its layer is reached.
    pub prefetch: Option<u64>,
    /// Bytes of a gradient element in the profile's `grad_bytes` (4 for f32).
    pub grad_element_bytes: u64,
    /// Bytes of a parameter element as ZeRO-3 gathers it: the compute dtype's (2 for bf16).
    pub gather_element_bytes: u64,
}

impl Default for Sharding {
    fn default() -> Self {
        Self {
            stage: 0,
            prefetch: None,
            grad_element_bytes: 4,
            gather_element_bytes: 4,
        }
    }
}

/// Everything but the profile and the rank count.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Scenario {
    pub topology: Topology,
    pub schedule: Schedule,
    /// Whether a bucket's collective starts as soon as it is full (else after the backward).
    pub overlap: bool,
    /// Coefficient of variation of one rank's compute time: 0 unless the user measured one
    /// (no published figure is built in).
    pub straggler_cv: f64,
    pub host: HostModel,
    /// The ranks share one thread and one compute device (a CPU mesh whose ranks run in
    /// turn): their compute, the sums and the host's issue time add up, nothing overlaps.
    #[serde(default)]
    pub serial: bool,
    #[serde(default)]
    pub sharding: Sharding,
}

/// The simulated step on N ranks.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Prediction {
    pub ranks: usize,
    /// The ZeRO stage simulated.
    #[serde(default)]
    pub stage: u8,
    pub step_s: f64,
    /// One device's forward, backward and optimizer (the profile).
    pub compute_s: f64,
    /// Added by waiting for the slowest rank.
    pub straggler_s: f64,
    /// Summed time of the gradient collectives.
    pub gradient_comm_s: f64,
    /// Summed time of the parameter gathers (ZeRO-1 after the update, ZeRO-3 before each
    /// layer's forward and backward).
    #[serde(default)]
    pub parameter_comm_s: f64,
    /// The time the device waits for communication (neither behind compute nor overlapped).
    pub exposed_comm_s: f64,
    /// Blocking sums (BatchNorm statistics): always on the critical path.
    pub blocking_s: f64,
    /// The host's time to issue the step's ops (the step takes at least this).
    pub host_s: f64,
    pub gradient_collectives: usize,
    #[serde(default)]
    pub parameter_collectives: usize,
    pub blocking_collectives: usize,
    /// Samples per second over all ranks.
    pub throughput: f64,
    /// throughput / (N * one device's throughput).
    pub efficiency: f64,
}

impl Prediction {
    /// The share of the communication hidden behind compute.
    pub fn hidden_fraction(&self) -> f64 {
        let comm = self.gradient_comm_s + self.parameter_comm_s;
        if comm > 0.0 {
            1.0 - self.exposed_comm_s / comm
        } else {
            1.0
        }
    }
}

/// One communication stream: collectives run one after another in the order they are issued.
#[derive(Default)]
struct CommStream {
    free: f64,
    gradient_s: f64,
    parameter_s: f64,
    gradient_ops: usize,
    parameter_ops: usize,
}

impl CommStream {
    /// Queues a collective of `seconds` issued at `at`; returns when it ends.
    fn queue(&mut self, at: f64, seconds: f64, parameters: bool) -> f64 {
        let start = self.free.max(at);
        self.free = start + seconds;
        match parameters {
            true => (self.parameter_s += seconds, self.parameter_ops += 1),
            false => (self.gradient_s += seconds, self.gradient_ops += 1),
        };
        self.free
    }
}

/// One layer of a pass: its compute seconds, and the seconds and bytes of the gather it waits
/// for (0: none).
#[derive(Clone, Copy)]
struct Step {
    compute_s: f64,
    gather_s: f64,
    gather_bytes: f64,
}

/// One pass over `layers` starting at `t`: gathers issued when their layer is reached or, with
/// `prefetch`, ahead (at the start of a layer: the next layer's, and the following ones' until
/// `prefetch` bytes are gathered ahead). `done` runs after each layer with its end. Returns the
/// pass's end.
fn pass(
    mut t: f64,
    layers: &[Step],
    prefetch: Option<u64>,
    comm: &mut CommStream,
    mut done: impl FnMut(usize, f64, &mut CommStream),
) -> f64 {
    let mut gathered = vec![None; layers.len()];
    let mut next = 0; // the first layer whose gather is not issued yet
    for i in 0..layers.len() {
        while next <= i {
            gathered[next] = issue(&layers[next], t, comm);
            next += 1;
        }
        let start = gathered[i].map_or(t, |end: f64| t.max(end));
        if let Some(cap) = prefetch {
            let ahead =
                |next: usize| -> f64 { layers[i + 1..next].iter().map(|l| l.gather_bytes).sum() };
            while next < layers.len() && (next == i + 1 || ahead(next) < cap as f64) {
                gathered[next] = issue(&layers[next], start, comm);
                next += 1;
            }
        }
        t = start + layers[i].compute_s;
        done(i, t, comm);
    }
    t
}

/// Queues a layer's gather (none for a layer without parameters) at `at`; when it ends.
fn issue(layer: &Step, at: f64, comm: &mut CommStream) -> Option<f64> {
    (layer.gather_bytes > 0.0).then(|| comm.queue(at, layer.gather_s, true))
}

/// Predicts one step on `ranks` ranks.
pub fn predict(profile: &StepProfile, scenario: &Scenario, ranks: usize) -> Prediction {
    let n = ranks.max(1);
    let topo = &scenario.topology;
    let z = scenario.sharding;
    let stage = if n > 1 { z.stage } else { 0 };
    let slow = straggler::slowest_of(n, 1.0, scenario.straggler_cv);
    let blocking_collectives = if n > 1 { profile.blocking_sums } else { 0 };
    let blocking_s =
        blocking_collectives as f64 * all_reduce_seconds(topo, n, profile.blocking_sum_bytes);
    let gradient_seconds = |bytes: f64| match stage {
        0 => all_reduce_seconds(topo, n, bytes),
        _ => all_gather_seconds(topo, n, bytes),
    };
    // A layer's parameters as gathered: its gradients' elements in the gather's dtype.
    let elements = |l: &crate::profile::Layer| {
        l.grad_bytes.iter().sum::<u64>() as f64 / z.grad_element_bytes.max(1) as f64
    };
    let step = |l: &crate::profile::Layer, compute_s: f64| {
        let gather_bytes = match stage {
            3 => elements(l) * z.gather_element_bytes as f64,
            _ => 0.0,
        };
        Step {
            compute_s,
            gather_s: all_gather_seconds(topo, n, gather_bytes),
            gather_bytes,
        }
    };
    let mut comm = CommStream::default();

    // The forward pass (layers in forward order, each its share of the forward time by its
    // backward time); the blocking sums delay everything after them (counted up front: they
    // sit in the forward and backward passes).
    let backward_total = profile.backward_s();
    let forward_share = |l: &crate::profile::Layer| match backward_total > 0.0 {
        true => profile.forward_s * l.backward_s / backward_total,
        false => profile.forward_s / profile.layers.len().max(1) as f64,
    };
    let forward: Vec<Step> = (profile.layers.iter().rev())
        .map(|l| step(l, forward_share(l) * slow))
        .collect();
    let forward_end = pass(blocking_s, &forward, z.prefetch, &mut comm, |_, _, _| {});

    // The backward pass: a bucket of gradients is ready when the layer that wrote its last
    // byte has finished its backward.
    let backward: Vec<Step> = (profile.layers.iter())
        .map(|l| step(l, l.backward_s * slow))
        .collect();
    let mut ready = Vec::new(); // (bytes, time the bucket is complete)
    let mut filled = 0u64;
    let mut queued = 0;
    let overlap = scenario.overlap && n > 1;
    let backward_end = pass(
        forward_end,
        &backward,
        z.prefetch,
        &mut comm,
        |i, t, comm| {
            for &bytes in &profile.layers[i].grad_bytes {
                match scenario.schedule {
                    Schedule::PerTensor => ready.push((bytes, t)),
                    Schedule::Buckets { bytes: cap } => {
                        let cap = cap.max(1);
                        filled += bytes;
                        while filled >= cap {
                            ready.push((cap, t));
                            filled -= cap;
                        }
                    }
                }
            }
            if overlap {
                for &(bytes, at) in &ready[queued..] {
                    comm.queue(at, gradient_seconds(bytes as f64), false);
                }
                queued = ready.len();
            }
        },
    );
    if filled > 0 {
        ready.push((filled, backward_end));
    }
    let mut comm_end = backward_end;
    if n > 1 {
        for &(bytes, at) in &ready[queued..] {
            comm.queue(at.max(backward_end), gradient_seconds(bytes as f64), false);
        }
        comm_end = comm.free.max(backward_end);
    }
    // The update: each rank updates its share under ZeRO-1 and 3; ZeRO-1 then gathers the
    // updated f32 parameters, one collective per gradient bucket.
    let optimizer_s = profile.optimizer_s * slow / if stage > 0 { n as f64 } else { 1.0 };
    let mut device_s = comm_end + optimizer_s;
    if stage == 1 {
        for &(bytes, _) in &ready {
            let f32_bytes = bytes as f64 / z.grad_element_bytes.max(1) as f64 * 4.0;
            device_s = comm.queue(device_s, all_gather_seconds(topo, n, f32_bytes), true);
        }
    }
    let host_s = profile.ops_per_step as f64 * scenario.host.op_seconds(n);
    let compute_s = profile.compute_s();
    let all_comm = comm.gradient_s + comm.parameter_s;
    let busy = (profile.forward_s + backward_total) * slow + blocking_s + optimizer_s;
    let (step_s, exposed) = match scenario.serial {
        true => (
            n as f64 * compute_s + blocking_s + all_comm + host_s,
            all_comm,
        ),
        false => (device_s.max(host_s), (device_s - busy).max(0.0)),
    };
    Prediction {
        ranks: n,
        stage,
        step_s,
        compute_s,
        straggler_s: compute_s * (slow - 1.0),
        gradient_comm_s: comm.gradient_s,
        parameter_comm_s: comm.parameter_s,
        exposed_comm_s: exposed,
        blocking_s,
        host_s,
        gradient_collectives: comm.gradient_ops,
        parameter_collectives: comm.parameter_ops,
        blocking_collectives,
        throughput: n as f64 * profile.samples_per_rank / step_s,
        efficiency: compute_s / step_s,
    }
}

/// [`predict`] for each rank count.
pub fn sweep(profile: &StepProfile, scenario: &Scenario, ranks: &[usize]) -> Vec<Prediction> {
    ranks
        .iter()
        .map(|&n| predict(profile, scenario, n))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::link::Link;
    use crate::profile::Layer;

    /// Two layers of 1 s backward, 100 bytes of gradient each; forward 1 s.
    fn toy() -> StepProfile {
        let layer = |name: &str| Layer {
            name: name.into(),
            backward_s: 1.0,
            grad_bytes: vec![100],
        };
        StepProfile {
            model: "toy".into(),
            unit: "images".into(),
            samples_per_rank: 10.0,
            forward_s: 1.0,
            layers: vec![layer("b"), layer("a")],
            optimizer_s: 0.0,
            blocking_sums: 0,
            blocking_sum_bytes: 0.0,
            ops_per_step: 0,
        }
    }

    fn scenario(schedule: Schedule, overlap: bool) -> Scenario {
        // α 0, 100 bytes/µs: an all-reduce of 100 bytes over 2 ranks takes 2 * 1/2 * 1 µs;
        // make it 0.5 s with a slow link instead: 100 bytes/s -> 2 * (1/2) * 100 / 100 = 1 s.
        Scenario {
            topology: Topology::flat(Link::custom("slow", 0.0, 1e-7).unwrap()),
            schedule,
            overlap,
            straggler_cv: 0.0,
            host: HostModel::default(),
            serial: false,
            sharding: Sharding::default(),
        }
    }

    #[test]
    fn timeline_by_hand() {
        let p = toy();
        // One rank: no communication, the profile's 3 s.
        let one = predict(&p, &scenario(Schedule::PerTensor, true), 1);
        assert_eq!(
            (one.step_s, one.efficiency, one.gradient_collectives),
            (3.0, 1.0, 0)
        );
        // Two ranks, each tensor 1 s of all-reduce (ring: 2 * 1/2 * 100 B / 100 B/s).
        // Overlapped: b ready at 2 s, done 3 s; a ready at 3 s, done 4 s: 1 s exposed.
        let over = predict(&p, &scenario(Schedule::PerTensor, true), 2);
        assert!((over.step_s - 4.0).abs() < 1e-9, "{over:?}");
        assert_eq!(over.gradient_collectives, 2);
        assert!((over.hidden_fraction() - 0.5).abs() < 1e-9);
        // Not overlapped: both after the backward.
        let after = predict(&p, &scenario(Schedule::PerTensor, false), 2);
        assert!((after.step_s - 5.0).abs() < 1e-9 && after.hidden_fraction() == 0.0);
        // One bucket of everything: 2 s of sums after the backward, whatever the overlap.
        let all = predict(&p, &scenario(Schedule::Buckets { bytes: 1000 }, true), 2);
        assert_eq!(all.gradient_collectives, 1);
        assert!((all.step_s - 5.0).abs() < 1e-9, "{all:?}");
        // Buckets of 150 bytes: 150 ready at 3 s (spans both tensors), 50 at 3 s.
        let cut = predict(&p, &scenario(Schedule::Buckets { bytes: 150 }, true), 2);
        assert_eq!(cut.gradient_collectives, 2);
        assert!((cut.step_s - 5.0).abs() < 1e-9, "{cut:?}");
        assert!((cut.throughput - 20.0 / 5.0).abs() < 1e-9);
    }

    #[test]
    fn zero_stages_by_hand() {
        let p = toy();
        // The slow link: an all-reduce of 100 bytes over 2 ranks takes 1 s, a reduce-scatter
        // or an all-gather 0.5 s. Forward: 0.5 s per layer (their backward times are equal).
        // Prefetch caps of 1 byte: the next layer only.
        let at = |stage: u8, prefetch: Option<u64>, gather_element_bytes: u64| {
            let mut s = scenario(Schedule::PerTensor, true);
            s.sharding = Sharding {
                stage,
                prefetch,
                grad_element_bytes: 4,
                gather_element_bytes,
            };
            predict(&p, &s, 2)
        };
        let close = |r: &Prediction, step: f64, exposed: f64| {
            (r.step_s - step).abs() < 1e-9 && (r.exposed_comm_s - exposed).abs() < 1e-9
        };
        // ZeRO-1: forward 0–1, b 1–2 (reduce-scatter 2–2.5), a 2–3 (3–3.5); then the two
        // buckets' f32 parameters gathered 3.5–4.5.
        let one = at(1, None, 4);
        assert!(close(&one, 4.5, 1.5), "{one:?}");
        assert_eq!(
            (one.gradient_collectives, one.parameter_collectives),
            (2, 2)
        );
        assert!((one.parameter_comm_s - 1.0).abs() < 1e-9);
        // ZeRO-3 gathering at use: forward gather a 0–0.5, a 0.5–1, gather b 1–1.5, b 1.5–2;
        // backward gather b 2–2.5, b 2.5–3.5 (reduce-scatter 3.5–4), gather a 4–4.5 (behind
        // it on the one stream), a 4.5–5.5, reduce-scatter 5.5–6.
        let three = at(3, None, 4);
        assert!(close(&three, 6.0, 3.0), "{three:?}");
        assert_eq!(three.parameter_collectives, 4);
        assert!((three.parameter_comm_s - 2.0).abs() < 1e-9);
        // Prefetched one layer ahead: forward a 0.5–1 (b gathered 0.5–1), b 1–1.5; backward
        // gather b 1.5–2, b 2–3 (a gathered 2–2.5), reduce-scatter 3–3.5, a 3–4, 4–4.5.
        let ahead = at(3, Some(1), 4);
        assert!(close(&ahead, 4.5, 1.5), "{ahead:?}");
        // Gathered in bf16 (half the bytes): forward 0.25–1.25, backward gather b 1.25–1.5,
        // b 1.5–2.5, a 2.5–3.5, reduce-scatters 2.5–3 and 3.5–4: ZeRO-0's 4 s.
        let narrow = at(3, Some(1), 2);
        assert!(close(&narrow, 4.0, 1.0), "{narrow:?}");
        assert!((at(0, None, 4).step_s - 4.0).abs() < 1e-9);
        // One rank: no stage costs anything.
        let mut s = scenario(Schedule::PerTensor, true);
        s.sharding.stage = 3;
        let single = predict(&p, &s, 1);
        assert_eq!(
            (single.step_s, single.stage, single.parameter_collectives),
            (3.0, 0, 0)
        );
    }

    /// A layer of no compute between two (a norm) ends a prefetch of one layer ahead; a prefetch
    /// of a bucket of bytes reaches past it.
    #[test]
    fn prefetch_reaches_past_layers_without_compute() {
        let layer = |name: &str, backward_s: f64, bytes: u64| Layer {
            name: name.into(),
            backward_s,
            grad_bytes: vec![bytes],
        };
        let p = StepProfile {
            layers: vec![
                layer("x", 1.0, 100),
                layer("norm", 0.0, 4),
                layer("y", 1.0, 100),
            ],
            forward_s: 2.0,
            ..toy()
        };
        let at = |cap: u64| {
            let mut s = scenario(Schedule::PerTensor, true);
            s.sharding.stage = 3;
            s.sharding.prefetch = Some(cap);
            predict(&p, &s, 2).step_s
        };
        // Gathers of 100 bytes take 0.5 s, of 4 bytes 0.02 s; reduce-scatters the same.
        // One ahead: forward y 0.5–1.5, norm 1.5, x waits for its gather (issued at 1.5) until
        // 2, 2–3; backward x 3.5–4.5, y's gather issued at the norm (4.5) behind x's
        // reduce-scatter (4.5–5): 5–5.5, y 5.5–6.5, reduced 6.5–7.
        assert!((at(1) - 7.0).abs() < 1e-9, "{}", at(1));
        // 200 bytes ahead: x's gather rides with the norm's (forward ends at 2.5), y's with
        // x's backward (ready at 3.52): x 3–4, y 4–5, reduced 5–5.5.
        assert!((at(200) - 5.5).abs() < 1e-9, "{}", at(200));
    }

    #[test]
    fn host_and_blocking_sums_and_stragglers() {
        let mut p = toy();
        p.ops_per_step = 1000;
        let mut s = scenario(Schedule::PerTensor, true);
        s.host = HostModel {
            op_s: 1e-3,
            op_s_per_extra_rank: 1e-3,
            handoff_s: None,
        };
        // Host: 1000 ops * 2 ms at N = 2 = 2 s < 4 s of device time; at N = 8, 8 s.
        assert!((predict(&p, &s, 2).step_s - 4.0).abs() < 1e-9);
        let host_bound = predict(&p, &s, 8);
        assert!((host_bound.step_s - 8.0).abs() < 1e-9 && host_bound.host_s == 8.0);
        // On rank threads each further rank costs the calling thread a handoff of 0.1 ms:
        // 1000 * (1 + 7 * 0.1) ms = 1.7 s at N = 8, under the device's time, which then sets
        // the step as with no host cost at all.
        s.host.handoff_s = Some(1e-4);
        let threads = predict(&p, &s, 8);
        assert!((threads.host_s - 1.7).abs() < 1e-9, "{threads:?}");
        s.host = HostModel::default();
        assert!((threads.step_s - predict(&p, &s, 8).step_s).abs() < 1e-9);
        assert!(threads.step_s < host_bound.step_s);
        p.blocking_sums = 3;
        p.blocking_sum_bytes = 100.0;
        let b = predict(&p, &s, 2);
        assert_eq!(b.blocking_collectives, 3);
        assert!(
            (b.blocking_s - 3.0).abs() < 1e-9 && (b.step_s - 7.0).abs() < 1e-9,
            "{b:?}"
        );
        // Serial ranks: 2 * 3 s of compute, 3 s of blocking sums, 2 s of gradient sums.
        s.serial = true;
        let serial = predict(&p, &s, 2);
        assert!((serial.step_s - 11.0).abs() < 1e-9, "{serial:?}");
        s.serial = false;
        p.blocking_sums = 0;
        s.straggler_cv = 0.1;
        let st = predict(&p, &s, 2);
        let slow = 1.0 + 0.1 / std::f64::consts::PI.sqrt();
        assert!((st.straggler_s - 3.0 * (slow - 1.0)).abs() < 1e-6, "{st:?}");
    }
}
