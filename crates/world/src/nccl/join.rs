//! EXPERIMENTAL (it has not run on GPUs yet): the joins that make NCCL links, by NCCL's own
//! bootstrap under torchrun-style variables ([`World::join_by_nccl`]), or with ids carried
//! over a world already joined ([`Processes::nccl_link`]).

use super::{gpu_uuid, NcclLink, UniqueId};
use crate::error::{Error, Result};
use crate::join::Joined;
use crate::launcher::World;
use crate::link::{LinkError, ProcessLink};
use crate::processes::Processes;
use std::sync::Arc;
use std::time::Duration;

impl World {
    /// The processes of a torchrun-style world, joined by NCCL's own bootstrap from each
    /// process's GPU 0. `id_at` makes the id of a communicator whose process 0 listens at the
    /// address it is given (`ncclGetUniqueId` under `NCCL_COMM_ID`, which the program's edge
    /// sets while it has one thread): one for the world's link, one for its side channel, both
    /// before any join. A world with no place to meet, or with several processes on a node, is
    /// refused before NCCL is asked ([`World::torchrun_meeting`]). A join that does not
    /// complete within `timeout` fails (a process missing, or an address out of reach).
    pub fn join_by_nccl(
        &self,
        mut id_at: impl FnMut(&str) -> std::result::Result<UniqueId, LinkError>,
        timeout: Duration,
    ) -> Result<Joined> {
        let (p, n) = (self.process, self.processes);
        let meeting = self.torchrun_meeting()?;
        let failed = |e: LinkError| {
            Error::Launcher(format!(
                "process {p} of {n}, joining by NCCL's own bootstrap at {}: {}",
                meeting[0], e.0
            ))
        };
        // Both ids first: making one sets the environment, which must happen before any
        // thread (NCCL's, CUDA's) exists.
        let main = id_at(&meeting[0]).map_err(failed)?;
        let side = id_at(&meeting[1]).map_err(failed)?;
        let join = |id| NcclLink::connect(0, p, n, id, timeout).map_err(failed);
        let link = join(main)?.with_side_channel(join(side)?);
        let link = link.map_err(failed)?;
        let [place, _] = meeting;
        Ok(Joined::by(Processes::joined_by_nccl(
            Arc::new(link),
            timeout,
            place,
        )))
    }
}

impl Processes {
    /// The NCCL link of a CUDA mesh whose first GPU is `first`, across these processes: every
    /// process joins from its own GPU (two processes on one GPU are refused alike on every
    /// process). Joined by NCCL's own bootstrap: that link. Otherwise two new communicators
    /// (the link and its side channel), with the ids process 0 makes, carried over this
    /// world's link.
    pub fn nccl_link(&self, first: usize) -> Result<Arc<dyn ProcessLink>> {
        let together = |e: LinkError| Error::Together(e.0);
        let gpus = self.each(gpu_uuid(first).map_err(together))?;
        for (q, gpu) in gpus.iter().enumerate() {
            if let Some(p) = gpus[..q].iter().position(|g| g == gpu) {
                return Err(Error::Together(format!(
                    "processes {p} and {q} would both join NCCL from {gpu}: NCCL takes one GPU \
                     per process; start one process per node (its mesh takes all the node's \
                     GPUs)"
                )));
            }
        }
        if let (Some(_), Some(link)) = (self.nccl_bootstrap(), self.link()) {
            return Ok(link.clone());
        }
        let join = || -> Result<NcclLink> {
            let hex = self.decided_by_lead(|| Ok(UniqueId::new().map_err(together)?.to_hex()))?;
            let id = UniqueId::from_hex(&hex).map_err(together)?;
            let (p, n) = (self.index(), self.count());
            self.agree(NcclLink::connect(first, p, n, id, self.timeout()).map_err(together))
        };
        let link = join()?.with_side_channel(join()?);
        Ok(Arc::new(link.map_err(together)?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An id that cannot be made (no NCCL here; on a GPU machine, a peer that never comes)
    /// fails the join in one error naming the process and the place, after the checks of the
    /// launcher's world; no id is asked for a world that cannot meet.
    #[test]
    fn an_nccl_bootstrap_join_that_cannot_be_made_names_its_process_and_place() {
        let vars = [
            ("RANK", "0"),
            ("WORLD_SIZE", "2"),
            ("MASTER_ADDR", "127.0.0.1"),
            ("MASTER_PORT", "29500"),
        ];
        let lookup = |extra: &'static [(&'static str, &'static str)]| {
            move |k: &str| {
                (vars.iter().chain(extra))
                    .find(|(n, _)| *n == k)
                    .map(|(_, v)| v.to_string())
            }
        };
        let torchrun = World::from_env(lookup(&[])).unwrap();
        let mut asked = Vec::new();
        let no_nccl = |place: &str| {
            asked.push(place.to_string());
            Err(LinkError("no NCCL on this machine".into()))
        };
        let Err(e) = torchrun.join_by_nccl(no_nccl, Duration::from_secs(1)) else {
            panic!("joined without NCCL")
        };
        assert_eq!(
            e.to_string(),
            "process 0 of 2, joining by NCCL's own bootstrap at 127.0.0.1:29501: no NCCL on \
             this machine"
        );
        assert_eq!(asked, ["127.0.0.1:29501"]);
        let crowded = World::from_env(lookup(&[("LOCAL_WORLD_SIZE", "2")])).unwrap();
        let never = |_: &str| -> std::result::Result<UniqueId, LinkError> {
            unreachable!("NCCL was asked")
        };
        let Err(e) = crowded.join_by_nccl(never, Duration::from_secs(1)) else {
            panic!("joined two processes of one node")
        };
        assert!(e.to_string().contains("one process per node"), "{e}");
    }
}
