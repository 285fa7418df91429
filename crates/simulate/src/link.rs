//! α–β links and the time of an all-reduce over them.

use crate::{Result, SimulateError};
use serde::{Deserialize, Serialize};

/// A link between ranks: `alpha_s` is the fixed cost of one message (launch, synchronization,
/// wire latency), `bytes_per_s` the bandwidth one rank gets in one direction while every rank
/// sends (a ring's bus bandwidth).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Link {
    pub name: String,
    pub alpha_s: f64,
    pub bytes_per_s: f64,
}

/// A preset: name, what it is, α in µs, peak bandwidth per direction in GB/s, and the share of
/// the peak a bulk transfer reaches.
pub struct LinkPreset {
    pub name: &'static str,
    pub about: &'static str,
    pub alpha_us: f64,
    pub peak_gb_s: f64,
    pub efficiency: f64,
}

/// The presets. Peaks are the published per-direction figures of each link; the efficiency is
/// what a bulk copy reaches in practice (about 80% of a bus, 90% of an RDMA network); α is an
/// order of magnitude for one kernel-driven step (a few µs on a bus, more across a network).
/// `--alpha-us` and `--bandwidth-gbs` override both.
pub const LINK_PRESETS: &[LinkPreset] = &[
    LinkPreset {
        name: "nvlink3",
        about: "NVLink 3 (A100): 12 links, 300 GB/s per direction",
        alpha_us: 5.0,
        peak_gb_s: 300.0,
        efficiency: 0.8,
    },
    LinkPreset {
        name: "nvlink4",
        about: "NVLink 4 (H100/H200): 18 links, 450 GB/s per direction",
        alpha_us: 5.0,
        peak_gb_s: 450.0,
        efficiency: 0.8,
    },
    LinkPreset {
        name: "pcie4",
        about: "PCIe 4.0 x16: 31.5 GB/s per direction",
        alpha_us: 8.0,
        peak_gb_s: 31.5,
        efficiency: 0.8,
    },
    LinkPreset {
        name: "pcie5",
        about: "PCIe 5.0 x16: 63 GB/s per direction",
        alpha_us: 8.0,
        peak_gb_s: 63.0,
        efficiency: 0.8,
    },
    LinkPreset {
        name: "net100",
        about: "100 Gb/s network (RDMA), one port per GPU",
        alpha_us: 15.0,
        peak_gb_s: 12.5,
        efficiency: 0.9,
    },
    LinkPreset {
        name: "net200",
        about: "200 Gb/s network (RDMA), one port per GPU",
        alpha_us: 15.0,
        peak_gb_s: 25.0,
        efficiency: 0.9,
    },
    LinkPreset {
        name: "net400",
        about: "400 Gb/s network (RDMA), one port per GPU",
        alpha_us: 15.0,
        peak_gb_s: 50.0,
        efficiency: 0.9,
    },
];

impl Link {
    /// A link with α in µs and bandwidth in GB/s (10^9 bytes per second).
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
        })
    }

    /// The preset named `name` (see [`LINK_PRESETS`]).
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
        Link::custom(p.name, p.alpha_us, p.peak_gb_s * p.efficiency)
    }
}

/// Ranks in nodes: `intra` joins the ranks of a node, `inter` the nodes (one port per rank).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Topology {
    pub intra: Link,
    pub inter: Link,
    pub ranks_per_node: usize,
}

impl Topology {
    /// One kind of link between every pair of ranks, however many.
    pub fn flat(link: Link) -> Topology {
        Topology {
            inter: link.clone(),
            intra: link,
            ranks_per_node: usize::MAX,
        }
    }
}

/// Seconds of one all-reduce of `bytes` per rank over `n` ranks.
pub fn all_reduce_seconds(topology: &Topology, n: usize, bytes: f64) -> f64 {
    let g = topology.ranks_per_node.max(1);
    if n <= g {
        return in_node(&topology.intra, n, bytes);
    }
    // Hierarchical: each rank of a node owns 1/g of the buffer after the reduce-scatter, sums
    // it with its peers of the other nodes (the g rings run side by side, one port each), and
    // the all-gather spreads the result in the node.
    let nodes = n.div_ceil(g);
    let share = bytes / g as f64;
    let step =
        |link: &Link, k: usize, b: f64| (k - 1) as f64 * (link.alpha_s + b / link.bytes_per_s);
    let scatter_gather = 2.0 * step(&topology.intra, g, share);
    let across = 2.0 * step(&topology.inter, nodes, share / nodes as f64);
    scatter_gather + across
}

/// Ring or one-shot, whichever is shorter, over `n` ranks of one link.
fn in_node(link: &Link, n: usize, bytes: f64) -> f64 {
    if n <= 1 {
        return 0.0;
    }
    let k = n as f64;
    let ring = 2.0 * (k - 1.0) * (link.alpha_s + bytes / (k * link.bytes_per_s));
    let one_shot = link.alpha_s + (k - 1.0) * bytes / link.bytes_per_s;
    ring.min(one_shot)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ring_time_is_alpha_beta() {
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
    fn hierarchy_uses_the_network_for_the_node_share() {
        let t = Topology {
            intra: Link::custom("bus", 0.0, 200.0).unwrap(),
            inter: Link::custom("net", 0.0, 20.0).unwrap(),
            ranks_per_node: 8,
        };
        let bytes = 8e8;
        // 2 nodes of 8: in the node 2 * 7 * 1e8 / 200e9 = 7 ms; across 2 * 1 * 5e7 / 20e9 = 5 ms.
        let got = all_reduce_seconds(&t, 16, bytes);
        assert!((got - (7e-3 + 5e-3)).abs() < 1e-12, "{got}");
        // More nodes cost more, but stay bounded by twice the share over the network.
        let many = all_reduce_seconds(&t, 64, bytes);
        assert!(many > got && many < 7e-3 + 2.0 * 1e8 / 20e9);
    }

    #[test]
    fn presets_and_bad_links() {
        for p in LINK_PRESETS {
            let l = Link::preset(p.name).unwrap();
            assert!(l.bytes_per_s < p.peak_gb_s * 1e9 && l.alpha_s > 0.0);
        }
        assert!(Link::preset("NVLink4").is_ok());
        let e = Link::preset("nvlink9").unwrap_err().to_string();
        assert!(e.contains("nvlink3") && e.contains("--alpha-us"), "{e}");
        assert!(Link::custom("x", -1.0, 1.0).is_err());
        assert!(Link::custom("x", 1.0, 0.0).is_err());
        assert!(Link::custom("x", 1.0, f64::NAN).is_err());
    }
}
