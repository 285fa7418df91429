//! The simulator against held-out published results, and the bucket-size effect where the
//! PyTorch DDP paper measured it. The tests check how the predictions behave; the errors
//! themselves are printed (and tabled by `simulate_check`), whatever they are.

use firemesh_simulate::validate::{
    bucket_sweep, check, ddp_cluster, eight_gpu_checks, machine, multi_node_checks, resnet50_step,
    sweep_sizes, DLPERF_NODES, DLPERF_ONE_GPU,
};
use firemesh_simulate::{all_reduce_seconds, predict, Gpu, Levels, Link, Topology, RESNET50};

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

/// The published multi-node DDP runs (DLPerf: 1, 2 and 4 nodes of 8 V100, one 100 Gb/s port
/// per node) predicted from their one-GPU figure with NCCL's ring, which they ran, and with
/// firemesh's two-level schedules. Printed whatever the errors are; what must hold is how the
/// schedules compare.
#[test]
fn multi_node_predictions_against_published_ddp_runs() {
    let [ring, buffer, blocks] =
        [Levels::Ring, Levels::NodeBuffer, Levels::NodeBlocks].map(multi_node_checks);
    for (i, &(ranks, published)) in DLPERF_NODES.iter().enumerate() {
        let (r, nb, bl) = (&ring[i], &buffer[i], &blocks[i]);
        println!(
            "{ranks} V100 ({} node(s)): published {published:.0} ({:.2}x one GPU); ring {:.0} \
             ({:+.1}%), node-buffer {:.0} ({:+.1}%), node-blocks {:.0} ({:+.1}%)",
            ranks / 8,
            published / DLPERF_ONE_GPU,
            r.prediction.throughput,
            100.0 * r.error,
            nb.prediction.throughput,
            100.0 * nb.error,
            bl.prediction.throughput,
            100.0 * bl.error,
        );
        assert_eq!(r.published, published);
        assert_eq!(r.error, r.prediction.throughput / published - 1.0);
        assert!(r.prediction.throughput <= ranks as f64 * DLPERF_ONE_GPU * (1.0 + 1e-12));
        if ranks == 8 {
            // One node: every schedule is the same ring.
            assert_eq!(r.prediction, nb.prediction);
            assert_eq!(r.prediction, bl.prediction);
        }
    }
}

/// Across nodes with a port per GPU, one buffer per node uses one port of eight: slower than
/// NCCL's ring, which crosses on all of them; blocks per rank use them all again. With one
/// port per node every schedule has that one port.
#[test]
fn two_level_schedules_against_the_ring() {
    let nvl = Link::preset("nvlink4").unwrap();
    let ndr = Link::preset("net400").unwrap();
    let topology = |levels, ports| Topology {
        intra: nvl.clone(),
        inter: ndr.clone(),
        ranks_per_node: 8,
        ports_per_node: ports,
        levels,
        host: None,
    };
    let bytes = 100e6;
    for nodes in [2, 4, 8] {
        let n = 8 * nodes;
        let t = |levels, ports| all_reduce_seconds(&topology(levels, ports), n, bytes);
        let (ring, buffer, blocks) = (
            t(Levels::Ring, None),
            t(Levels::NodeBuffer, None),
            t(Levels::NodeBlocks, None),
        );
        println!("{nodes} nodes of 8, 100 MB: ring {ring:.4} s, node-buffer {buffer:.4} s, node-blocks {blocks:.4} s");
        assert!(buffer > 3.0 * ring, "{nodes} nodes: {buffer} vs {ring}");
        assert!(blocks < buffer / 3.0, "{nodes} nodes: {blocks} vs {buffer}");
        // node-buffer by hand: an in-node all-reduce, a ring over the nodes (one rank and one
        // port each, NCCL's multi-node ring), and a broadcast (8/14 of the in-node all-reduce).
        let in_node = all_reduce_seconds(&Topology::flat(nvl.clone()), 8, bytes);
        let one_per_node = Topology {
            intra: ndr.clone(),
            inter: ndr.clone(),
            ranks_per_node: 1,
            ports_per_node: Some(1),
            levels: Levels::Ring,
            host: None,
        };
        let across = all_reduce_seconds(&one_per_node, nodes, bytes);
        let want = in_node + across + in_node * 8.0 / 14.0;
        assert!((buffer - want).abs() < 1e-12, "{buffer} vs {want}");
        let one_port = t(Levels::Ring, Some(1));
        assert!(one_port > 3.0 * ring);
        // host-staged by hand: node-buffer's in-node all-reduce and ring over the nodes, and
        // through PCIe 5.0 (49 GB/s) one after the other: each rank's eighth read, the first
        // GPU's 3 buffers for NCCL, each rank's eighth of the sum uploaded. Not costed without
        // a host link.
        let pcie5 = Link::preset("pcie5").unwrap();
        let staged = |host: Option<Link>| {
            let t = Topology {
                host,
                ..topology(Levels::HostStaged, None)
            };
            all_reduce_seconds(&t, n, bytes)
        };
        let through_host = bytes * (3.0 + 2.0 / 8.0) / pcie5.bytes_per_s;
        let want = in_node + through_host + across;
        let got = staged(Some(pcie5.clone()));
        assert!((got - want).abs() < 1e-12, "{got} vs {want}");
        assert!((staged(None) - (in_node + across)).abs() < 1e-12);
        println!(
            "{nodes} nodes: host-staged {got:.4} s, of which {through_host:.4} s through the host"
        );
        assert!(got > buffer, "{nodes} nodes: {got} vs {buffer}");
    }
    // One rank per node: nothing to sum in the node, and a finite time.
    for levels in [Levels::NodeBuffer, Levels::NodeBlocks, Levels::HostStaged] {
        let t = Topology {
            ranks_per_node: 1,
            ..topology(levels, None)
        };
        let one = Topology {
            ranks_per_node: 1,
            ..topology(Levels::Ring, None)
        };
        let (got, ring) = (
            all_reduce_seconds(&t, 4, bytes),
            all_reduce_seconds(&one, 4, bytes),
        );
        assert!(
            got.is_finite() && (got - ring).abs() < 1e-12,
            "{levels:?}: {got} vs {ring}"
        );
    }
}
