//! [`Processes`]: the processes of a joined world, and what they agree on before and during a
//! run (a run's settings at the start, the checkpoint a resume starts from, whether to stop
//! after a step). Each verb is one all-gather through the world's link; every process reaches
//! the same verdict, so a refusal is the same one-line error on every process. The verbs that
//! take a caller's result are generic over its error, which a refusal of another process
//! reaches as [`Error::Together`].

use crate::error::{Error, Result};
use crate::link::ProcessLink;
use std::sync::Arc;
use std::time::Duration;

/// An error a verb of [`Processes`] can hand back: the caller's own, which says what it is in
/// one line and takes the world's errors in.
pub trait Verdict: std::fmt::Display + From<Error> {}

impl<E: std::fmt::Display + From<Error>> Verdict for E {}

/// This process's place among the processes training one run, and the link that joins them
/// (`None`: this process alone).
#[derive(Clone, Default)]
pub struct Processes {
    link: Option<Arc<dyn ProcessLink>>,
    /// The longest wait for the other processes at one exchange (`--world-timeout`).
    timeout: Duration,
    /// Where NCCL's own bootstrap met, where it joined the processes (torchrun-style
    /// variables): then `link` is NCCL's, of each process's GPU 0, and there is no MPI.
    nccl_bootstrap: Option<String>,
}

impl Processes {
    /// This process alone.
    pub fn alone() -> Self {
        Self::default()
    }

    /// The processes `link` joins, which wait at most `timeout` for each other at an exchange.
    pub fn joined(link: Arc<dyn ProcessLink>, timeout: Duration) -> Self {
        Self {
            link: Some(link),
            timeout,
            nccl_bootstrap: None,
        }
    }

    /// The processes NCCL's own bootstrap joined at `meeting` (torchrun-style variables):
    /// `link` is NCCL's, of each process's GPU 0.
    pub fn joined_by_nccl(link: Arc<dyn ProcessLink>, timeout: Duration, meeting: String) -> Self {
        Self {
            nccl_bootstrap: Some(meeting),
            ..Self::joined(link, timeout)
        }
    }

    /// Where NCCL's own bootstrap met, where it joined the processes (no MPI then).
    pub fn nccl_bootstrap(&self) -> Option<&str> {
        self.nccl_bootstrap.as_deref()
    }

    /// The longest wait for the other processes at one exchange, for links made later (NCCL's).
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// The link, where there are several processes.
    pub fn link(&self) -> Option<&Arc<dyn ProcessLink>> {
        self.link.as_ref().filter(|l| l.processes() > 1)
    }

    pub fn count(&self) -> usize {
        self.link().map_or(1, |l| l.processes())
    }

    pub fn index(&self) -> usize {
        self.link().map_or(0, |l| l.process())
    }

    /// Whether this process writes the run folder and prints the run's progress: process 0.
    pub fn leads(&self) -> bool {
        self.index() == 0
    }

    /// Every process's `value`, in process order (this process's alone, without a link).
    fn gather(&self, value: &[u8]) -> Result<Vec<Vec<u8>>> {
        match self.link() {
            None => Ok(vec![value.to_vec()]),
            Some(link) => link.all_gather(value).map_err(|source| Error::Link {
                process: link.process(),
                source,
            }),
        }
    }

    /// Fails, on every process alike, unless every process gives the same `value` (`what` names
    /// it in the error).
    pub fn check_same(&self, what: &str, value: &str) -> Result<()> {
        let all = self.gather(value.as_bytes())?;
        let differ: Vec<String> = (all.iter().enumerate())
            .filter(|(_, v)| *v != &all[0])
            .map(|(p, _)| p.to_string())
            .collect();
        if differ.is_empty() {
            return Ok(());
        }
        Err(Error::Together(format!(
            "the processes of this world disagree on {what}: process(es) {} differ from process \
             0 ({}); start every process with the same command",
            differ.join(", "),
            String::from_utf8_lossy(&all[0])
        )))
    }

    /// The value process 0 computes with `f`, on every process (the others do not call `f`);
    /// process 0's error, the same line on every process.
    pub fn decided_by_lead<E: Verdict>(
        &self,
        f: impl FnOnce() -> std::result::Result<String, E>,
    ) -> std::result::Result<String, E> {
        if self.link().is_none() {
            return f();
        }
        let mine = match self.leads() {
            true => f(),
            false => Ok(String::new()),
        };
        Ok(self.each(mine)?.swap_remove(0))
    }

    /// Every process's `value`, in process order; where any process has an error instead,
    /// the first such, the same line on every process.
    pub fn each<E: Verdict>(
        &self,
        value: std::result::Result<String, E>,
    ) -> std::result::Result<Vec<String>, E> {
        if self.link().is_none() {
            return value.map(|v| vec![v]);
        }
        let mine = match value {
            Ok(v) => format!("ok:{v}"),
            Err(e) => format!("error:{e}"),
        };
        let all = self.gather(mine.as_bytes())?;
        let all: Vec<String> = all
            .iter()
            .map(|v| String::from_utf8_lossy(v).into_owned())
            .collect();
        let mut values = Vec::with_capacity(all.len());
        for (p, v) in all.iter().enumerate() {
            match v.split_once(':') {
                Some(("ok", v)) => values.push(v.to_string()),
                Some((_, e)) => return Err(Error::Together(format!("process {p}: {e}")).into()),
                None => return Err(Error::Together(format!("process {p} sent nothing")).into()),
            }
        }
        Ok(values)
    }

    /// `result`, where every process has a value; else the first error, the same line on every
    /// process. For a step that may fail on one process only (a device, a join): the others
    /// would otherwise wait for it at their next exchange until the world's timeout.
    pub fn agree<T, E: Verdict>(
        &self,
        result: std::result::Result<T, E>,
    ) -> std::result::Result<T, E> {
        if self.link().is_none() {
            return result;
        }
        let verdict = match &result {
            Ok(_) => Ok(String::new()),
            Err(e) => Err(Error::Together(e.to_string())),
        };
        self.each(verdict).map_err(E::from)?;
        result
    }

    /// Waits until every process has come here.
    pub fn barrier(&self) -> Result<()> {
        self.gather(&[]).map(|_| ())
    }

    /// Whether any process says `yes`.
    pub fn any(&self, yes: bool) -> Result<bool> {
        Ok(self.gather(&[yes as u8])?.iter().any(|v| v == &[1]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::threads::ThreadWorld;

    /// `f` on every process of a world of `n` threads, as [`Processes`].
    fn on_each<T: Send + 'static>(
        n: usize,
        f: impl Fn(Processes) -> T + Send + Sync + Copy + 'static,
    ) -> Vec<T> {
        crate::threads::on_each(n, move |link| {
            f(Processes::joined(Arc::new(link), Duration::from_secs(10)))
        })
    }

    #[test]
    fn the_processes_reach_one_verdict_together() {
        let answers = on_each(3, |p| {
            let same = p.check_same("the settings", "lr 0.1");
            let differ = p.check_same("the settings", &format!("lr 0.{}", p.index().min(1)));
            let lead = p.decided_by_lead(|| Ok::<_, Error>("run-7".to_string()));
            let failed = p.agree(match p.index() {
                2 => Err(Error::Launcher("no GPU here".into())),
                _ => Ok(p.index()),
            });
            let stop = p.any(p.index() == 1);
            let calm = p.any(false);
            p.barrier().unwrap();
            (
                p.leads(),
                same.is_ok(),
                differ.unwrap_err().to_string(),
                lead.unwrap(),
                failed.unwrap_err().to_string(),
                stop.unwrap(),
                calm.unwrap(),
            )
        });
        for (q, (leads, same, differ, lead, failed, stop, calm)) in answers.into_iter().enumerate()
        {
            assert_eq!(leads, q == 0);
            assert!(same);
            assert!(
                differ.contains("disagree on the settings: process(es) 1, 2 differ"),
                "{differ}"
            );
            assert_eq!(lead, "run-7");
            assert_eq!(failed, "process 2: no GPU here");
            assert!(stop && !calm);
        }
    }

    #[test]
    fn a_process_alone_decides_for_itself() {
        let alone = Processes::alone();
        assert_eq!((alone.count(), alone.index(), alone.leads()), (1, 0, true));
        assert!(alone.check_same("x", "y").is_ok());
        assert_eq!(alone.each(Ok::<_, Error>("v".into())).unwrap(), ["v"]);
        assert!(alone
            .agree(Err::<(), _>(Error::Launcher("e".into())))
            .is_err());
        assert!(!alone.any(false).unwrap());
    }

    #[test]
    fn a_lost_process_fails_the_verb_naming_this_one() {
        let mut links = ThreadWorld::links(2, Duration::from_millis(200));
        let _absent = links.pop();
        let link: Arc<dyn ProcessLink> = Arc::new(links.pop().unwrap());
        let p = Processes::joined(link, Duration::from_millis(200));
        let e = p.barrier().unwrap_err();
        assert!(matches!(e, Error::Link { process: 0, .. }), "{e}");
        assert!(e.to_string().starts_with("process 0: "), "{e}");
    }
}
