//! Which engine runs a group's sums: CubeCL's ring (every runtime) or NCCL (CUDA groups whose
//! GPUs are distinct and where the library loads), and why.
//!
//! NCCL runs through CubeCL's own collective path (`ComputeClient::all_reduce`): one
//! communicator over the group's GPUs in this process, on the device buffers, on CubeCL's
//! communication stream of each device, which waits for the device stream with an event and
//! hands back with one (`sync_collective`). CubeCL 0.10 has no reduce-scatter or all-gather
//! there, so ZeRO's scatters and gathers, and `Max`, stay on the ring.

use crate::CollectiveError;

/// The engine a group is asked for (`CollectiveConfig::engine`). The default stays the
/// ring until NCCL's engine has run on a GPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Engine {
    /// NCCL where it can run (a CUDA group of distinct GPUs, the library loaded, a check sum
    /// through it read back right), else the CubeCL ring.
    Auto,
    /// CubeCL's ring (and one-shot) collectives, on every runtime.
    #[default]
    Cubecl,
    /// NCCL for the sums; on a group that cannot run it, every all-reduce fails, naming why.
    Nccl,
}

/// The engine a group runs its sums on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EngineUsed {
    Cubecl,
    Nccl,
}

impl EngineUsed {
    pub fn name(self) -> &'static str {
        match self {
            EngineUsed::Cubecl => "cubecl",
            EngineUsed::Nccl => "nccl",
        }
    }
}

/// What a group runs its sums on, and why (for logs and a run's summary).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EngineChoice {
    pub used: EngineUsed,
    pub why: String,
}

/// Whether NCCL can run a group's sums: the version that loaded, or why it cannot.
pub type NcclStatus = std::result::Result<String, String>;

/// The engine for `asked`, given whether NCCL can run this group's sums.
pub fn choose(asked: Engine, nccl: NcclStatus) -> crate::Result<EngineChoice> {
    let cubecl = |why: String| EngineChoice {
        used: EngineUsed::Cubecl,
        why,
    };
    match (asked, nccl) {
        (Engine::Cubecl, _) => Ok(cubecl(
            "the default (Engine::Auto takes NCCL where it runs)".into(),
        )),
        (Engine::Auto | Engine::Nccl, Ok(version)) => Ok(EngineChoice {
            used: EngineUsed::Nccl,
            why: format!("NCCL {version} loaded; the group's GPUs are distinct"),
        }),
        (Engine::Auto, Err(why)) => Ok(cubecl(why)),
        (Engine::Nccl, Err(why)) => Err(CollectiveError::EngineUnavailable {
            engine: "nccl",
            reason: why,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auto_takes_nccl_where_it_runs_and_says_why_not_elsewhere() {
        let ok = || Ok("2.27.3".to_string());
        let missing = || Err("no libnccl.so on the library path".to_string());
        let auto = choose(Engine::Auto, ok()).unwrap();
        assert_eq!(auto.used, EngineUsed::Nccl);
        assert!(auto.why.contains("2.27.3"), "{}", auto.why);
        let auto = choose(Engine::Auto, missing()).unwrap();
        assert_eq!(auto.used, EngineUsed::Cubecl);
        assert_eq!(auto.why, "no libnccl.so on the library path");
        assert_eq!(
            choose(Engine::Cubecl, ok()).unwrap().used,
            EngineUsed::Cubecl
        );
        let refused = choose(Engine::Nccl, missing()).unwrap_err().to_string();
        assert!(
            refused.contains("nccl") && refused.contains("libnccl.so"),
            "{refused}"
        );
    }

    #[cfg(feature = "wgpu")]
    #[test]
    fn a_wgpu_group_runs_the_ring_and_refuses_nccl() {
        use crate::{CollectiveConfig, Group};
        use cubecl::wgpu::{WgpuDevice, WgpuRuntime};
        let devices = [WgpuDevice::DefaultDevice, WgpuDevice::Cpu];
        let config = |engine| CollectiveConfig {
            engine,
            ..CollectiveConfig::default()
        };
        let auto = Group::<WgpuRuntime>::engine_for(&devices, &config(Engine::Auto)).unwrap();
        assert_eq!(auto.used, EngineUsed::Cubecl);
        assert!(auto.why.contains("CUDA groups only"), "{}", auto.why);
        let nccl = Group::<WgpuRuntime>::engine_for(&devices, &config(Engine::Nccl));
        assert!(nccl.unwrap_err().to_string().contains("CUDA groups only"));
    }
}
