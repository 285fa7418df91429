//! The simulator against held-out published results, and the bucket-size effect where the
//! PyTorch DDP paper measured it. The tests check how the predictions behave; the errors
//! themselves are printed (and tabled by `simulate_check`), whatever they are.

use firemesh_simulate::validate::{
    bucket_sweep, check, ddp_cluster, eight_gpu_checks, machine, resnet50_step, sweep_sizes,
};
use firemesh_simulate::{predict, Gpu, Link, Topology, RESNET50};

#[test]
fn eight_gpu_predictions_come_from_the_one_gpu_figures() {
    let checks = eight_gpu_checks();
    let mut misses = 0;
    for c in &checks {
        let p = &c.prediction;
        println!(
            "{} {} {}: one GPU {:.0}, predicted 8 {:.0} ({:.2}x), published {:.0} ({:.2}x): {:+.1}%",
            c.run.framework,
            c.run.gpu,
            c.run.precision,
            c.run.one_gpu,
            p.throughput,
            p.throughput / c.run.one_gpu,
            c.run.eight_gpus,
            c.run.eight_gpus / c.run.one_gpu,
            100.0 * c.error
        );
        misses += usize::from(c.error.abs() > 0.10);
        // Nothing is fitted: the prediction is the simulator's step of the one-GPU profile.
        let gpu = Gpu::preset(c.run.gpu).unwrap();
        let again = predict(&resnet50_step(c.run.batch, c.run.one_gpu), &machine(gpu), 8);
        assert_eq!(&again, p);
        assert_eq!(p.straggler_s, 0.0);
        assert!(p.efficiency <= 1.0 && p.step_s >= p.compute_s);
    }
    println!(
        "{misses} of {} 8-GPU results missed by more than 10%",
        checks.len()
    );
}

#[test]
fn predictions_respond_to_the_link() {
    // The published A100 mixed-precision run on ever slower links: never faster, and much
    // slower once the gradient sums cannot hide behind the backward pass.
    let run = &RESNET50[0];
    let base = machine(Gpu::preset(run.gpu).unwrap());
    let at = |gb_s: f64| {
        let mut s = base.clone();
        s.topology.intra = s.topology.intra.with_bandwidth(gb_s).unwrap();
        check(run, &s).prediction.throughput
    };
    let speeds: Vec<f64> = [1000.0, 235.0, 50.0, 10.0, 2.0]
        .iter()
        .map(|&b| at(b))
        .collect();
    assert!(speeds.windows(2).all(|w| w[1] <= w[0]), "{speeds:?}");
    assert!(speeds[4] < speeds[0], "{speeds:?}");
    // NVLink 4 (H100, H200) sums faster than NVLink 3.
    let step = resnet50_step(256, 2470.0);
    let on = |gpu: &str| predict(&step, &machine(Gpu::preset(gpu).unwrap()), 8);
    assert!(on("h100").gradient_comm_s < on("a100").gradient_comm_s);
}

#[test]
fn buckets_too_small_and_too_large_both_cost_in_the_ddp_setting() {
    // The DDP paper's setting: ResNet-50 on V100s (NVIDIA's mixed-precision figure), 32 GPUs
    // in 4 servers.
    let v100 = Gpu::preset("v100").unwrap().resnet50("amp").unwrap();
    let step = resnet50_step(v100.batch, v100.one_gpu);
    let sizes = sweep_sizes();
    let times = |topology: &Topology| -> Vec<f64> {
        bucket_sweep(&step, topology, 32, &sizes)
            .iter()
            .map(|(_, p)| p.step_s)
            .collect()
    };
    let cluster = ddp_cluster();
    let t = times(&cluster);
    println!(
        "bucket MiB -> step ms: {:?}",
        sizes
            .iter()
            .map(|&b| b as f64 / (1u64 << 20) as f64)
            .zip(t.iter().map(|s| s * 1e3))
            .collect::<Vec<_>>()
    );
    let best = t.iter().cloned().fold(f64::INFINITY, f64::min);
    let at = t.iter().position(|&x| x == best).unwrap();
    assert!(at > 0 && at < t.len() - 1, "no interior optimum: {t:?}");
    assert!(t[0] > 1.01 * best && t[t.len() - 1] > 1.01 * best, "{t:?}");
    // Without NCCL's latencies (the same bandwidths, α = 0), small buckets cost nothing: the
    // left side of the U is the per-collective latency.
    let free = Topology {
        intra: Link::custom("nvlink2, no latency", 0.0, cluster.intra.bytes_per_s / 1e9).unwrap(),
        inter: Link::custom("net100, no latency", 0.0, cluster.inter.bytes_per_s / 1e9).unwrap(),
        ..cluster.clone()
    };
    let f = times(&free);
    assert!(f.windows(2).all(|w| w[0] <= w[1] + 1e-12), "{f:?}");
}
