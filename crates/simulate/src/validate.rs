//! The simulator against held-out published results: each 8-GPU prediction starts from the
//! published one-GPU throughput of the same run and nothing else measured on eight GPUs.

use crate::gpu::{Gpu, Published, RESNET50};
use crate::link::{Levels, Link, Topology};
use crate::predict::{predict, HostModel, Prediction, Scenario, Schedule};
use crate::profile::StepProfile;
use crate::workload::resnet;

/// PyTorch DDP's default bucket, `bucket_cap_mb = 25` (torch.nn.parallel.DistributedDataParallel).
pub const DDP_BUCKET_BYTES: u64 = 25 << 20;

/// One published 8-GPU result and the simulator's prediction of it.
#[derive(Debug, Clone)]
pub struct Check {
    pub run: Published,
    pub prediction: Prediction,
    /// predicted / published − 1.
    pub error: f64,
}

/// ResNet-50 at 224 px: a step of `batch` images at `images_per_s` on one GPU. Gradients are
/// f32 (4 bytes), also under mixed precision, whose master weights are f32.
pub fn resnet50_step(batch: u32, images_per_s: f64) -> StepProfile {
    let w = resnet(50, 224, 1000).expect("ResNet-50 is a known shape");
    StepProfile::from_workload(&w, batch as f64, batch as f64 / images_per_s, 4)
        .expect("positive batch and throughput")
}

/// One 8-GPU machine of `gpu`: its link preset in the node (a 200 Gb/s port per GPU beyond
/// it), DDP's 25 MiB buckets overlapped with the backward pass, no straggler spread, and no
/// host floor: each GPU has its own process, whose host time the one-GPU figure already holds.
pub fn machine(gpu: &Gpu) -> Scenario {
    Scenario {
        topology: Topology {
            intra: Link::preset(gpu.link).expect("the GPU presets name link presets"),
            inter: Link::preset("net200").expect("preset"),
            ranks_per_node: 8,
            ports_per_node: None,
            levels: Levels::Ring,
            host: None,
        },
        schedule: Schedule::Buckets {
            bytes: DDP_BUCKET_BYTES,
        },
        overlap: true,
        straggler_cv: 0.0,
        host: HostModel::default(),
        serial: false,
        sharding: Default::default(),
    }
}

/// Every published 8-GPU ResNet-50 result, predicted from its one-GPU figure.
pub fn eight_gpu_checks() -> Vec<Check> {
    RESNET50
        .iter()
        .map(|run| {
            let gpu = Gpu::preset(run.gpu).expect("published runs name GPU presets");
            check(run, &machine(gpu))
        })
        .collect()
}

/// One published run predicted on `scenario`.
pub fn check(run: &Published, scenario: &Scenario) -> Check {
    let prediction = predict(&resnet50_step(run.batch, run.one_gpu), scenario, 8);
    Check {
        run: *run,
        error: prediction.throughput / run.eight_gpus - 1.0,
        prediction,
    }
}

/// The cluster of the PyTorch DDP paper's experiments (Li et al., "PyTorch Distributed:
/// Experiences on Accelerating Data Parallel Training", VLDB 2020, §5): servers of eight V100
/// joined by NVLink, one 100 Gb/s network port per server (as read from the paper; not
/// re-checked against a stored copy here).
pub fn ddp_cluster() -> Topology {
    Topology {
        intra: Link::preset("nvlink2").expect("preset"),
        inter: Link::preset("net100").expect("preset"),
        ranks_per_node: 8,
        ports_per_node: Some(1),
        levels: Levels::Ring,
        host: None,
    }
}

/// A published multi-node ResNet-50 run: PyTorch DDP (NVIDIA DeepLearningExamples' ResNet-50
/// v1.5, AMP, 256 images per GPU, DALI on the CPU) on nodes of eight V100 16 GB joined by NVLink
/// and one 100 Gb/s InfiniBand EDR port per node: [`ddp_cluster`]'s topology. Measured by
/// OneFlow's DLPerf (github.com/Oneflow-Inc/DLPerf, NVIDIADeepLearningExamples/PyTorch/
/// resnet50v1.5/README.md at commit 2a4f7c2, September 2020): the median of 5 runs each.
pub const DLPERF_SOURCE: &str = "OneFlow DLPerf, NVIDIADeepLearningExamples/PyTorch/resnet50v1.5/README.md (commit 2a4f7c2): \
    PyTorch DDP, ResNet-50 v1.5, AMP, batch 256 per GPU, 8 V100 16 GB per node, one 100 Gb/s InfiniBand EDR port per node";
/// Its one-GPU throughput (images/s), the only input of the predictions.
pub const DLPERF_ONE_GPU: f64 = 802.9;
/// Its throughputs (images/s) on 1, 2 and 4 nodes, by rank count.
pub const DLPERF_NODES: &[(usize, f64)] = &[(8, 6_154.66), (16, 11_991.94), (32, 22_551.16)];

/// One published multi-node throughput and its prediction.
#[derive(Debug, Clone)]
pub struct NodesCheck {
    pub ranks: usize,
    pub published: f64,
    pub prediction: Prediction,
    /// predicted / published − 1.
    pub error: f64,
}

/// The DLPerf runs predicted from their one-GPU figure, every sum scheduled as `levels` says
/// (they ran `Levels::Ring`: NCCL under PyTorch DDP), with DDP's 25 MiB buckets overlapped.
pub fn multi_node_checks(levels: Levels) -> Vec<NodesCheck> {
    let profile = resnet50_step(256, DLPERF_ONE_GPU);
    let topology = Topology {
        levels,
        ..ddp_cluster()
    };
    let scenario = &bucket_scenario(topology, DDP_BUCKET_BYTES);
    DLPERF_NODES
        .iter()
        .map(|&(ranks, published)| {
            let prediction = predict(&profile, scenario, ranks);
            NodesCheck {
                ranks,
                published,
                error: prediction.throughput / published - 1.0,
                prediction,
            }
        })
        .collect()
}

fn bucket_scenario(topology: Topology, bytes: u64) -> Scenario {
    Scenario {
        topology,
        schedule: Schedule::Buckets { bytes },
        overlap: true,
        straggler_cv: 0.0,
        host: HostModel::default(),
        serial: false,
        sharding: Default::default(),
    }
}

/// Step predictions of `profile` on `ranks` ranks of `topology` for each bucket size,
/// overlapped with the backward pass.
pub fn bucket_sweep(
    profile: &StepProfile,
    topology: &Topology,
    ranks: usize,
    sizes: &[u64],
) -> Vec<(u64, Prediction)> {
    sizes
        .iter()
        .map(|&bytes| {
            let scenario = bucket_scenario(topology.clone(), bytes);
            (bytes, predict(profile, &scenario, ranks))
        })
        .collect()
}

/// Bucket sizes from 16 KiB to 256 MiB, doubling (the range `firemesh simulate` sweeps).
pub fn sweep_sizes() -> Vec<u64> {
    (0..15).map(|i| (16u64 << 10) << i).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_are_computed_from_the_cited_inputs() {
        let checks = eight_gpu_checks();
        assert_eq!(checks.len(), RESNET50.len());
        for c in &checks {
            let want = c.prediction.throughput / c.run.eight_gpus - 1.0;
            assert_eq!(c.error, want);
            // The prediction comes from the one-GPU figure: never above 8× of it.
            assert!(c.prediction.throughput <= 8.0 * c.run.one_gpu * (1.0 + 1e-12));
        }
        // The same run on a slower link is predicted slower: the link is an input, not a fit.
        let run = &RESNET50[0];
        let fast = check(run, &machine(Gpu::preset("a100").unwrap()));
        let mut slow = machine(Gpu::preset("a100").unwrap());
        slow.topology.intra = Link::preset("pcie4").unwrap();
        let slow = check(run, &slow);
        assert!(slow.prediction.throughput < fast.prediction.throughput);
        assert!(slow.prediction.exposed_comm_s > fast.prediction.exposed_comm_s);
    }
}
