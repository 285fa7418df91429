//! Checkpoints for preemptible machines. One file per checkpoint, `step-NNNNNNNN.ckpt`:
//!
//! ```text
//! "FIREMESH-CKPT\0v1" | header length (u32 LE) | header (JSON)
//!     | model length (u64 LE) | model | optimizer | CRC-32 of all before (u32 LE)
//! ```
//!
//! The header holds the step, the schedule, the seed, the ranks and batch, and the caller's
//! own description of the run (`R`: for `firemesh train`, the model and its shape, the
//! optimizer and the sampler's position), its fields beside the library's in one JSON object;
//! model and optimizer are Burn records. A file is
//! written under a temporary name, flushed to disk and renamed into place, so that a kill at
//! any moment leaves either the old set of checkpoints or the new one; the CRC catches a file
//! damaged later. The newest `keep` are kept.

use crate::error::{Error, Result};
use crate::optim::Schedule;
use crate::precision::{Precision, ScalerState};
use serde::{de::DeserializeOwned, Deserialize, Serialize};
use std::fs::{self, File};
use std::io::Write;
use std::path::{Path, PathBuf};

const MAGIC: &[u8; 16] = b"FIREMESH-CKPT\0v1";

/// Everything but the tensors. `R` is what the program that writes the checkpoint says of its
/// run (which model, which optimizer, where its data stands): its fields are read back as it
/// wrote them, and its names must not be the library's.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Header<R> {
    #[serde(flatten)]
    pub run: R,
    /// Optimizer steps done.
    pub step: usize,
    pub schedule: Schedule,
    /// The run's seed: data order and per-step random draws derive from it and the step.
    pub seed: u64,
    pub ranks: usize,
    pub batch: usize,
    pub samples_seen: u64,
    /// The run's precision (checkpoints written before mixed precision existed are f32's).
    #[serde(default)]
    pub precision: Precision,
    /// The loss scaler's state (f16): a resumed run scales as the interrupted one would have.
    #[serde(default)]
    pub loss_scaler: Option<ScalerState>,
}

/// A checkpoint's contents.
pub struct Checkpoint<R> {
    pub header: Header<R>,
    pub model: Vec<u8>,
    pub optimizer: Vec<u8>,
}

impl<R: Serialize + DeserializeOwned> Checkpoint<R> {
    fn encode(&self) -> Result<Vec<u8>> {
        let header = serde_json::to_vec(&self.header)
            .map_err(|e| Error::Checkpoint(format!("cannot encode the header: {e}")))?;
        let mut bytes = Vec::with_capacity(
            MAGIC.len() + 8 + header.len() + self.model.len() + self.optimizer.len(),
        );
        bytes.extend_from_slice(MAGIC);
        bytes.extend_from_slice(&(header.len() as u32).to_le_bytes());
        bytes.extend_from_slice(&header);
        bytes.extend_from_slice(&(self.model.len() as u64).to_le_bytes());
        bytes.extend_from_slice(&self.model);
        bytes.extend_from_slice(&self.optimizer);
        let crc = crc32fast::hash(&bytes);
        bytes.extend_from_slice(&crc.to_le_bytes());
        Ok(bytes)
    }

    fn decode(bytes: &[u8]) -> std::result::Result<Self, String> {
        let body_len = bytes
            .len()
            .checked_sub(4)
            .filter(|&n| n >= MAGIC.len() + 4)
            .ok_or("too short")?;
        if &bytes[..MAGIC.len()] != MAGIC {
            return Err("not a firemesh checkpoint".into());
        }
        let (body, crc) = bytes.split_at(body_len);
        if crc32fast::hash(body) != u32::from_le_bytes(crc.try_into().unwrap_or_default()) {
            return Err("checksum mismatch (truncated or damaged)".into());
        }
        let mut at = MAGIC.len();
        let header_len = u32::from_le_bytes(body[at..at + 4].try_into().unwrap_or_default());
        at += 4;
        let header_end = at + header_len as usize;
        let header: Header<R> =
            serde_json::from_slice(body.get(at..header_end).ok_or("bad header")?)
                .map_err(|e| format!("bad header: {e}"))?;
        let model_len = body
            .get(header_end..header_end + 8)
            .and_then(|b| b.try_into().ok())
            .map(u64::from_le_bytes)
            .ok_or("bad model length")? as usize;
        let model_start = header_end + 8;
        let model = body
            .get(model_start..model_start + model_len)
            .ok_or("bad model length")?
            .to_vec();
        let optimizer = body[model_start + model_len..].to_vec();
        Ok(Self {
            header,
            model,
            optimizer,
        })
    }
}

/// The checkpoints of a run folder.
pub struct CheckpointDir {
    dir: PathBuf,
}

impl CheckpointDir {
    pub fn new(run_dir: &Path) -> Self {
        Self {
            dir: run_dir.join("checkpoints"),
        }
    }

    pub fn path(&self) -> &Path {
        &self.dir
    }

    /// Where the checkpoint of `step` is (or will be) written.
    pub fn file(&self, step: usize) -> PathBuf {
        self.dir.join(format!("step-{step:08}.ckpt"))
    }

    /// Completed checkpoint files, oldest first.
    pub fn list(&self) -> Vec<PathBuf> {
        let Ok(entries) = fs::read_dir(&self.dir) else {
            return Vec::new();
        };
        let mut files: Vec<PathBuf> = entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| {
                p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with("step-") && n.ends_with(".ckpt"))
            })
            .collect();
        files.sort();
        files
    }

    /// Writes `checkpoint` atomically and keeps the newest `keep`; returns its path.
    pub fn write<R: Serialize + DeserializeOwned>(
        &self,
        checkpoint: &Checkpoint<R>,
        keep: usize,
    ) -> Result<PathBuf> {
        let io = |what: &str, path: &Path, e: std::io::Error| {
            Error::io(format!("checkpoint: cannot {what} {}", path.display()), e)
        };
        fs::create_dir_all(&self.dir).map_err(|e| io("create", &self.dir, e))?;
        let path = self.file(checkpoint.header.step);
        let temp = self
            .dir
            .join(format!(".step-{:08}.ckpt.tmp", checkpoint.header.step));
        let bytes = checkpoint.encode()?;
        {
            let mut file = File::create(&temp).map_err(|e| io("create", &temp, e))?;
            file.write_all(&bytes).map_err(|e| io("write", &temp, e))?;
            file.sync_all().map_err(|e| io("flush", &temp, e))?;
        }
        fs::rename(&temp, &path).map_err(|e| io("rename", &temp, e))?;
        if let Ok(dir) = File::open(&self.dir) {
            let _ = dir.sync_all(); // the rename itself reaches the disk
        }
        let files = self.list();
        for old in files.iter().take(files.len().saturating_sub(keep)) {
            let _ = fs::remove_file(old);
        }
        Ok(path)
    }

    /// The newest checkpoint that reads back whole, its run described as `R`. Damaged ones
    /// are skipped; each is reported through `warn`. Leftover temporary files of interrupted
    /// writes are removed.
    pub fn newest_valid<R: Serialize + DeserializeOwned>(
        &self,
        mut warn: impl FnMut(String),
    ) -> Option<(PathBuf, Checkpoint<R>)> {
        if let Ok(entries) = fs::read_dir(&self.dir) {
            for e in entries.flatten() {
                if e.file_name().to_string_lossy().ends_with(".ckpt.tmp") {
                    let _ = fs::remove_file(e.path());
                }
            }
        }
        for path in self.list().into_iter().rev() {
            match fs::read(&path)
                .map_err(|e| e.to_string())
                .and_then(|b| Checkpoint::decode(&b))
            {
                Ok(c) => return Some((path, c)),
                Err(why) => warn(format!(
                    "skipping damaged checkpoint {}: {why}",
                    path.display()
                )),
            }
        }
        None
    }
}
