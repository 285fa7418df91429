//! A step on N ranks: compute timeline, bucket schedule, communication stream, stragglers and
//! the host.

use crate::link::{all_reduce_seconds, Topology};
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
}

/// The simulated step on N ranks.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Prediction {
    pub ranks: usize,
    pub step_s: f64,
    /// One device's forward, backward and optimizer (the profile).
    pub compute_s: f64,
    /// Added by waiting for the slowest rank.
    pub straggler_s: f64,
    /// Summed time of the gradient collectives.
    pub gradient_comm_s: f64,
    /// The part of it the step waits for (not behind the backward pass).
    pub exposed_comm_s: f64,
    /// Blocking sums (BatchNorm statistics): always on the critical path.
    pub blocking_s: f64,
    /// The host's time to issue the step's ops (the step takes at least this).
    pub host_s: f64,
    pub gradient_collectives: usize,
    pub blocking_collectives: usize,
    /// Samples per second over all ranks.
    pub throughput: f64,
    /// throughput / (N * one device's throughput).
    pub efficiency: f64,
}

impl Prediction {
    /// The share of the gradient communication hidden behind compute.
    pub fn hidden_fraction(&self) -> f64 {
        if self.gradient_comm_s > 0.0 {
            1.0 - self.exposed_comm_s / self.gradient_comm_s
        } else {
            1.0
        }
    }
}

/// Predicts one step on `ranks` ranks.
pub fn predict(profile: &StepProfile, scenario: &Scenario, ranks: usize) -> Prediction {
    let n = ranks.max(1);
    let topo = &scenario.topology;
    let slow = straggler::slowest_of(n, 1.0, scenario.straggler_cv);
    let blocking_collectives = if n > 1 { profile.blocking_sums } else { 0 };
    let blocking_s =
        blocking_collectives as f64 * all_reduce_seconds(topo, n, profile.blocking_sum_bytes);

    // Compute timeline of the slowest rank; the blocking sums delay everything after them
    // (counted up front: they sit in the forward and backward passes).
    let mut t = profile.forward_s * slow + blocking_s;
    let mut ready = Vec::new(); // (bytes, time the bucket is complete)
    let mut filled = 0u64;
    for layer in &profile.layers {
        t += layer.backward_s * slow;
        for &bytes in &layer.grad_bytes {
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
    }
    let backward_end = t;
    if filled > 0 {
        ready.push((filled, backward_end));
    }
    let (mut comm_end, mut comm_s) = (backward_end, 0.0);
    if n > 1 {
        let mut stream = if scenario.overlap { 0.0 } else { backward_end };
        for &(bytes, at) in &ready {
            let d = all_reduce_seconds(topo, n, bytes as f64);
            let start = if scenario.overlap {
                stream.max(at)
            } else {
                stream
            };
            stream = start + d;
            comm_s += d;
        }
        comm_end = stream.max(backward_end);
    }
    let host_s = profile.ops_per_step as f64 * scenario.host.op_seconds(n);
    let compute_s = profile.compute_s();
    let (step_s, exposed) = if scenario.serial {
        (n as f64 * compute_s + blocking_s + comm_s + host_s, comm_s)
    } else {
        let device_s = comm_end + profile.optimizer_s * slow;
        (device_s.max(host_s), comm_end - backward_end)
    };
    Prediction {
        ranks: n,
        step_s,
        compute_s,
        straggler_s: compute_s * (slow - 1.0),
        gradient_comm_s: comm_s,
        exposed_comm_s: exposed,
        blocking_s,
        host_s,
        gradient_collectives: if n > 1 { ready.len() } else { 0 },
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
