//! Links between ranks, and the time of an all-reduce over them.
//!
//! Two cost models. A preset link is timed as NCCL times its own ring all-reduce (the
//! latencies below are NCCL's published cost model, not fitted here). A custom link
//! ([`Link::custom`], or `--alpha-us`) is a plain α–β link: α per ring step, or one α for a
//! one-shot sum, whichever is shorter (firemesh's own collectives pick by size).

use crate::{Result, SimulateError};
use serde::{Deserialize, Serialize};

/// The kind of hardware a step of NCCL's ring crosses: it selects NCCL's per-step latency.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Hw {
    NvLink,
    Pci,
    Net,
}

/// A link between ranks: `bytes_per_s` is the bus bandwidth one rank reaches in a ring while
/// every rank sends (what nccl-tests reports as busbw); `alpha_s` the fixed cost of one ring
/// step on a custom link. A preset link has `nccl` set and takes its latencies from NCCL's
/// model instead of `alpha_s`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Link {
    pub name: String,
    pub alpha_s: f64,
    pub bytes_per_s: f64,
    #[serde(default)]
    pub nccl: Option<Hw>,
}

/// A preset: name, what it is, the hardware kind, and the peak bandwidth per direction of one
/// GPU (or one network port) in GB/s.
#[derive(Debug)]
pub struct LinkPreset {
    pub name: &'static str,
    pub about: &'static str,
    pub hw: Hw,
    pub peak_gb_s: f64,
}

/// The share of the peak a ring all-reduce reaches. NCCL's own cost model caps the A100's
/// NVLink 3 ring at 235 GB/s of bus bandwidth (`if (compCap80) busBw = std::min(busBw,
/// 235.0f)`, src/graph/tuning.cc, github.com/NVIDIA/nccl at 01afd20, 2020), 235/300 of the
/// peak. No such figure was found for the other links: the same share is assumed for them (an
/// assumption, not a measurement; `--bandwidth-gbs` overrides it).
pub const BUS_SHARE: f64 = 235.0 / 300.0;

/// Peak figures per direction, from the vendors' specifications: NVLink 2 (V100 SXM2) 6 links
/// of 25 GB/s, NVLink 3 (A100 SXM4) 12, NVLink 4 (H100/H200 SXM) 18 (NVIDIA's V100, A100 and
/// H100 datasheets: 300, 600 and 900 GB/s both directions together); PCIe 3.0 x16 8 GT/s,
/// PCIe 4.0 x16 16 GT/s and
/// PCIe 5.0 x16 32 GT/s per lane with 128b/130b coding (PCI-SIG); InfiniBand EDR 100 Gb/s,
/// HDR 200 Gb/s, NDR 400 Gb/s per port.
pub const LINK_PRESETS: &[LinkPreset] = &[
    LinkPreset {
        name: "nvlink2",
        about: "NVLink 2 (V100 SXM2, DGX-1): 6 links, 150 GB/s per direction",
        hw: Hw::NvLink,
        peak_gb_s: 150.0,
    },
    LinkPreset {
        name: "nvlink3",
        about: "NVLink 3 (A100 SXM4): 12 links, 300 GB/s per direction",
        hw: Hw::NvLink,
        peak_gb_s: 300.0,
    },
    LinkPreset {
        name: "nvlink4",
        about: "NVLink 4 (H100/H200 SXM): 18 links, 450 GB/s per direction",
        hw: Hw::NvLink,
        peak_gb_s: 450.0,
    },
    LinkPreset {
        name: "pcie3",
        about: "PCIe 3.0 x16: 15.75 GB/s per direction",
        hw: Hw::Pci,
        peak_gb_s: 15.75,
    },
    LinkPreset {
        name: "pcie4",
        about: "PCIe 4.0 x16: 31.5 GB/s per direction",
        hw: Hw::Pci,
        peak_gb_s: 31.5,
    },
    LinkPreset {
        name: "pcie5",
        about: "PCIe 5.0 x16: 63 GB/s per direction",
        hw: Hw::Pci,
        peak_gb_s: 63.0,
    },
    LinkPreset {
        name: "net100",
        about: "100 Gb/s network port (InfiniBand EDR, RDMA)",
        hw: Hw::Net,
        peak_gb_s: 12.5,
    },
    LinkPreset {
        name: "net200",
        about: "200 Gb/s network port (InfiniBand HDR, RDMA)",
        hw: Hw::Net,
        peak_gb_s: 25.0,
    },
    LinkPreset {
        name: "net400",
        about: "400 Gb/s network port (InfiniBand NDR, RDMA)",
        hw: Hw::Net,
        peak_gb_s: 50.0,
    },
];

/// NCCL's ring all-reduce cost model, protocols LL, LL128 and Simple (src/graph/tuning.cc,
/// github.com/NVIDIA/nccl at commit 01afd20, NCCL 2.8, 2020): a base latency per collective
/// (`baseLat`, µs), a latency per ring step by hardware (`hwLat`, µs; rows NVLink, PCI,
/// network), and the share of the bus bandwidth each protocol carries (LL sends 4 bytes of
/// flag with every 4 of data and NCCL counts it at 1/4 for an all-reduce; LL128 120 of 128
/// bytes, `0.92`).
const BASE_US: [f64; 3] = [3.6, 10.0, 8.4];
const STEP_US: [[f64; 3]; 3] = [[0.47, 1.9, 3.4], [1.0, 2.5, 5.7], [2.7, 4.0, 9.6]];
const BW_SHARE: [f64; 3] = [0.25, 0.92, 1.0];
const LL: usize = 0;
const LL128: usize = 1;
const SIMPLE: usize = 2;

impl Link {
    /// A plain α–β link: α in µs per ring step, bus bandwidth in GB/s (10^9 bytes per second).
    pub fn custom(name: &str, alpha_us: f64, gb_s: f64) -> Result<Link> {
        if !(alpha_us.is_finite() && alpha_us >= 0.0) {
            return Err(SimulateError::Invalid(format!(
                "link {name}: α must be a finite number of µs >= 0, not {alpha_us}"
            )));
        }
        if !(gb_s.is_finite() && gb_s > 0.0) {
            return Err(SimulateError::Invalid(format!(
                "link {name}: the bandwidth must be a finite number of GB/s > 0, not {gb_s}"
            )));
        }
        Ok(Link {
            name: name.to_string(),
            alpha_s: alpha_us * 1e-6,
            bytes_per_s: gb_s * 1e9,
            nccl: None,
        })
    }

    /// The preset named `name` (see [`LINK_PRESETS`]): NCCL's latencies, [`BUS_SHARE`] of the
    /// peak.
    pub fn preset(name: &str) -> Result<Link> {
        let p = LINK_PRESETS
            .iter()
            .find(|p| p.name.eq_ignore_ascii_case(name))
            .ok_or_else(|| {
                let names: Vec<&str> = LINK_PRESETS.iter().map(|p| p.name).collect();
                SimulateError::Invalid(format!(
                    "unknown link {name:?}; the presets are {}, or give --alpha-us and --bandwidth-gbs",
                    names.join(", ")
                ))
            })?;
        let mut link = Link::custom(p.name, 0.0, p.peak_gb_s * BUS_SHARE)?;
        link.nccl = Some(p.hw);
        Ok(link)
    }

    /// The same link with another bus bandwidth (GB/s); a preset keeps NCCL's latencies.
    pub fn with_bandwidth(&self, gb_s: f64) -> Result<Link> {
        let mut link = Link::custom(&format!("{} (custom)", self.name), 0.0, gb_s)?;
        link.alpha_s = self.alpha_s;
        link.nccl = self.nccl;
        Ok(link)
    }
}

/// Ranks in nodes: `intra` joins the ranks of a node, `inter` the nodes through
/// `ports_per_node` network ports per node (one per rank when `None`); `levels` is how a sum
/// crosses the nodes; `host` joins each GPU to its host's memory, for levels that stage the
/// sum through the host ([`Levels::HostStaged`]; not costed when `None`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Topology {
    pub intra: Link,
    pub inter: Link,
    pub ranks_per_node: usize,
    #[serde(default)]
    pub ports_per_node: Option<usize>,
    #[serde(default)]
    pub levels: Levels,
    #[serde(default)]
    pub host: Option<Link>,
}

/// How an all-reduce over several nodes is scheduled.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Levels {
    /// NCCL's one ring through every rank of every node (PyTorch DDP's, on one NCCL
    /// communicator): 2 (nodes - 1) of its steps cross the network, on every port at once.
    #[default]
    Ring,
    /// firemesh across processes, one per node: the node's ranks sum the buffer (an in-node
    /// all-reduce), one buffer per node is summed across the nodes (NCCL or MPI, through one
    /// network port), and the node's ranks get it back (a broadcast in the node).
    NodeBuffer,
    /// The same with the node's sum split in one block per rank: an in-node reduce-scatter,
    /// each rank's block summed across the nodes through its own port (ranks sharing the
    /// node's ports when there are fewer), and an in-node all-gather.
    NodeBlocks,
    /// firemesh across processes as built: the node's ranks reduce-scatter the sum,
    /// each rank reads its block to the host over its own host link, the node's buffer goes
    /// through the node's first GPU to NCCL (copied up, exchanged, copied back: 3 buffers
    /// through that GPU's host link) and across the nodes with a ring's bytes through one port,
    /// each rank uploads its block of the sum, and the node's ranks all-gather it.
    HostStaged,
}

impl std::str::FromStr for Levels {
    type Err = SimulateError;
    fn from_str(s: &str) -> Result<Levels> {
        match s {
            "ring" => Ok(Levels::Ring),
            "node-buffer" => Ok(Levels::NodeBuffer),
            "node-blocks" => Ok(Levels::NodeBlocks),
            "host-staged" => Ok(Levels::HostStaged),
            _ => Err(SimulateError::Invalid(format!(
                "levels {s:?}: ring, node-buffer, node-blocks or host-staged"
            ))),
        }
    }
}

impl Topology {
    /// One kind of link between every pair of ranks, however many.
    pub fn flat(link: Link) -> Topology {
        Topology {
            inter: link.clone(),
            intra: link,
            ranks_per_node: usize::MAX,
            ports_per_node: None,
            levels: Levels::Ring,
            host: None,
        }
    }
}

/// Seconds of one all-reduce of `bytes` per rank over `n` ranks, scheduled as
/// `topology.levels` says (the same on one node: one ring).
pub fn all_reduce_seconds(topology: &Topology, n: usize, bytes: f64) -> f64 {
    if n <= 1 {
        return 0.0;
    }
    let g = topology.ranks_per_node.clamp(1, n);
    let nodes = n.div_ceil(g);
    if nodes == 1 || topology.levels == Levels::Ring {
        return ring_seconds(topology, n, bytes);
    }
    let node = Topology::flat(topology.intra.clone());
    let in_node = all_reduce_seconds(&node, g, bytes);
    let ports = topology.ports_per_node.unwrap_or(g).max(1) as f64;
    // The ring across the nodes: one rank per node, through one port each, timed with NCCL's
    // multi-node terms (`share` of a port's bandwidth).
    let across = |bytes: f64, share: f64| {
        let mut port = topology.inter.clone();
        port.bytes_per_s *= share;
        let net = Topology {
            intra: port.clone(),
            inter: port,
            ranks_per_node: 1,
            ports_per_node: Some(1),
            levels: Levels::Ring,
            host: None,
        };
        ring_seconds(&net, nodes, bytes)
    };
    match topology.levels {
        Levels::Ring => unreachable!("timed above"),
        // A ring all-reduce moves 2 (g - 1) / g of the buffer through each link, a pipelined
        // broadcast the whole buffer once: g / (2 (g - 1)) of the all-reduce (latencies
        // included, an approximation).
        Levels::NodeBuffer => {
            let broadcast = if g > 1 {
                in_node * g as f64 / (2.0 * (g - 1) as f64)
            } else {
                0.0
            };
            in_node + across(bytes, 1.0) + broadcast
        }
        // Reduce-scatter and all-gather: an all-reduce's bytes (with one base latency where
        // NCCL pays two). The g blocks cross the network at once, each through 1/g of the
        // node's ports.
        Levels::NodeBlocks => {
            let share = (ports / g as f64).min(1.0);
            in_node + across(bytes / g as f64, share)
        }
        // In the node, a reduce-scatter and an all-gather (an all-reduce's bytes, as above).
        // Through the host, one after the other: each rank's block read (1/g of the buffer on
        // each rank's own link), the first GPU's 3 buffers for NCCL, each rank's block of the
        // sum uploaded (1/g again).
        Levels::HostStaged => {
            let staged = match &topology.host {
                Some(host) => bytes * (3.0 + 2.0 / g as f64) / host.bytes_per_s,
                None => 0.0,
            };
            in_node + staged + across(bytes, 1.0)
        }
    }
}

/// A reduce-scatter or an all-gather of a buffer of `bytes` (each rank ends with, or starts
/// from, 1/N of it): NCCL's ring runs each as one half of its all-reduce, (N - 1) steps moving
/// (N - 1) / N of the buffer, so half of [`all_reduce_seconds`], latencies included (an
/// approximation: NCCL pays one base latency per collective, counted here as half of one).
pub fn all_gather_seconds(topology: &Topology, n: usize, bytes: f64) -> f64 {
    all_reduce_seconds(topology, n, bytes) / 2.0
}

/// One ring through every rank (NCCL's ring: 2 (n - 1) steps, 2 (nodes - 1) of them across the
/// network), its bandwidth the smaller of the node's links and the node's network ports
/// together.
fn ring_seconds(topology: &Topology, n: usize, bytes: f64) -> f64 {
    if n <= 1 {
        return 0.0;
    }
    let g = topology.ranks_per_node.clamp(1, n);
    let nodes = n.div_ceil(g);
    let (intra, inter) = (&topology.intra, &topology.inter);
    let ports = topology.ports_per_node.unwrap_or(g).max(1) as f64;
    let bus = if nodes > 1 {
        intra.bytes_per_s.min(ports * inter.bytes_per_s)
    } else {
        intra.bytes_per_s
    };
    let steps = 2 * (n - 1);
    let inter_steps = 2 * (nodes - 1);
    let intra_steps = (steps - inter_steps) as f64;
    // Bytes each rank moves per unit of bus bandwidth: 2 (n - 1) / n of the buffer.
    let moved = bytes * steps as f64 / n as f64;
    match (intra.nccl, inter.nccl) {
        (Some(intra_hw), Some(inter_hw)) => {
            let protocols: &[usize] = if nodes == 1 && intra_hw == Hw::NvLink {
                &[LL, LL128, SIMPLE] // NCCL 2.8 enables LL128 on NVLink within a node only
            } else {
                &[LL, SIMPLE]
            };
            protocols
                .iter()
                .map(|&p| {
                    // NCCL's refinements: LL's intra-node steps cost 1.8× on more than one
                    // node; Simple's large multi-node all-reduce 1.9× ("plateau effect").
                    let ll_factor = if nodes > 1 && p == LL { 1.8 } else { 1.0 };
                    let step_intra = STEP_US[intra_hw as usize][p] * ll_factor;
                    let step_inter = STEP_US[inter_hw as usize][p];
                    let mut latency_us =
                        BASE_US[p] + intra_steps * step_intra + inter_steps as f64 * step_inter;
                    if p == SIMPLE && nodes > 1 && bytes >= n as f64 / 16.0 * 65536.0 {
                        latency_us *= 1.9;
                    }
                    latency_us * 1e-6 + moved / (bus * BW_SHARE[p])
                })
                .fold(f64::INFINITY, f64::min)
        }
        _ => {
            let ring = intra_steps * intra.alpha_s + inter_steps as f64 * inter.alpha_s;
            let ring = ring + moved / bus;
            if nodes > 1 {
                return ring;
            }
            let one_shot = intra.alpha_s + (n - 1) as f64 * bytes / bus;
            ring.min(one_shot)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn custom_link_is_alpha_beta_ring_or_one_shot() {
        let link = Link::custom("l", 10.0, 100.0).unwrap();
        let t = Topology::flat(link);
        assert_eq!(all_reduce_seconds(&t, 1, 1e9), 0.0);
        // 1 GB over 4 ranks: the ring moves 2 * 3/4 GB per rank (15 ms) in 6 steps (60 µs);
        // one-shot would read 3 GB per rank (30 ms).
        let got = all_reduce_seconds(&t, 4, 1e9);
        assert!((got - (6.0 * 10e-6 + 1.5e9 / 100e9)).abs() < 1e-12, "{got}");
        // 8 bytes: latency-bound, one-shot (one α) wins over the ring's 6 α.
        let small = all_reduce_seconds(&t, 4, 8.0);
        assert!((small - (10e-6 + 24.0 / 100e9)).abs() < 1e-12, "{small}");
    }

    #[test]
    fn nccl_ring_follows_its_cost_model() {
        let nvl = Link::preset("nvlink3").unwrap();
        let t = Topology {
            intra: nvl.clone(),
            inter: Link::preset("net200").unwrap(),
            ranks_per_node: 8,
            ports_per_node: None,
            levels: Levels::Ring,
            host: None,
        };
        // 8 bytes on 8 GPUs of one node: LL wins, 3.6 + 14 * 0.47 µs of latency.
        let tiny = all_reduce_seconds(&t, 8, 8.0);
        let ll = (3.6 + 14.0 * 0.47) * 1e-6 + 8.0 * 14.0 / 8.0 / (nvl.bytes_per_s * 0.25);
        assert!((tiny - ll).abs() < 1e-12, "{tiny} vs {ll}");
        // 1 GB: bandwidth-bound, Simple at the full bus bandwidth.
        let big = all_reduce_seconds(&t, 8, 1e9);
        let simple = (8.4 + 14.0 * 3.4) * 1e-6 + 1e9 * 14.0 / 8.0 / nvl.bytes_per_s;
        assert!((big - simple).abs() < 1e-12, "{big} vs {simple}");
        // Across two nodes the ring crosses the network twice and runs at the 8 ports' 157 GB/s.
        let two = all_reduce_seconds(&t, 16, 1e9);
        let bus = 8.0 * t.inter.bytes_per_s;
        let lat = 1.9 * (8.4 + 28.0 * 3.4 + 2.0 * 9.6) * 1e-6;
        assert!(
            (two - (lat + 1e9 * 30.0 / 16.0 / bus)).abs() < 1e-12,
            "{two}"
        );
        // One port per node: eight times less bandwidth across nodes.
        let one_port = Topology {
            ports_per_node: Some(1),
            ..t.clone()
        };
        assert!(all_reduce_seconds(&one_port, 16, 1e9) > 7.0 * two);
    }

    #[test]
    fn presets_and_bad_links() {
        for p in LINK_PRESETS {
            let l = Link::preset(p.name).unwrap();
            assert!((l.bytes_per_s - p.peak_gb_s * 1e9 * BUS_SHARE).abs() < 1.0);
            assert_eq!(l.nccl, Some(p.hw));
        }
        // NCCL's A100 figure, 235 GB/s.
        assert!((Link::preset("NVLink3").unwrap().bytes_per_s - 235e9).abs() < 1.0);
        let e = Link::preset("nvlink9").unwrap_err().to_string();
        assert!(e.contains("nvlink3") && e.contains("--alpha-us"), "{e}");
        let half = Link::preset("nvlink4")
            .unwrap()
            .with_bandwidth(100.0)
            .unwrap();
        assert_eq!((half.nccl, half.bytes_per_s), (Some(Hw::NvLink), 100e9));
        assert!(Link::custom("x", -1.0, 1.0).is_err());
        assert!(Link::custom("x", 1.0, 0.0).is_err());
        assert!(Link::custom("x", 1.0, f64::NAN).is_err());
    }
}
