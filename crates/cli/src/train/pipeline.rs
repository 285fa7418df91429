//! The input pipeline: a producer thread walks the sampler ahead of the training loop, decodes
//! each batch's samples on worker threads and builds each rank's slice on that rank's device;
//! up to `prefetch` batches wait in a queue. The loop measures how long it waited.

use super::data::{ImageSource, Split};
use crate::{Error, Result};
use burn::data::dataset::InMemDataset;
use burn::prelude::*;
use firemesh_backend::{from_shards, from_shards_int, Mesh, MeshBackend};
use firemesh_collective::DeviceStream;
use firemesh_datasets::{
    shard_image_batch, shard_token_batch, DistributedSampler, ImageBatch, ImageItem,
    SamplerPosition, TailPolicy,
};
use firemesh_zoo::Batch;
use std::sync::mpsc::{sync_channel, Receiver};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// One step's input, as per-rank parts on the ranks' devices.
pub enum Parts<B: Backend> {
    Images(Vec<ImageBatch<B>>),
    Tokens(Vec<Tensor<B, 2, Int>>),
}

/// A batch with its place in the data order.
pub struct StepInput<B: Backend> {
    pub step: usize,
    pub position: SamplerPosition,
    /// Samples in the batch, over all ranks.
    pub samples: usize,
    pub parts: Parts<B>,
}

/// The order of training batches: every epoch a fresh shuffle of the split (from the seed and
/// the epoch), cut into global batches of a fixed size; the short tail of an epoch is dropped.
/// The order does not depend on the rank count.
#[derive(Clone)]
pub struct Order {
    sampler: DistributedSampler,
    pub steps_per_epoch: usize,
}

impl Order {
    pub fn new(len: usize, batch: usize, seed: u64) -> Result<Self> {
        if batch > len {
            return Err(Error::Invalid(format!(
                "--batch {batch} is larger than the {len} training samples"
            )));
        }
        let sampler = DistributedSampler::new(len, 1, batch, seed, TailPolicy::DropLast)?;
        Ok(Self {
            sampler,
            steps_per_epoch: len / batch,
        })
    }

    /// Where global step `step` falls.
    pub fn position(&self, step: usize) -> SamplerPosition {
        SamplerPosition {
            epoch: (step / self.steps_per_epoch) as u64,
            step: step % self.steps_per_epoch,
        }
    }
}

/// Batches of `split` for steps `start..end`, produced ahead on a thread.
pub struct Prefetcher<B: Backend> {
    queue: Option<Receiver<Result<StepInput<B>>>>,
    producer: Option<JoinHandle<()>>,
    /// Time the training loop spent waiting for a batch.
    pub waited: Duration,
}

impl<B: Backend> Prefetcher<B> {
    pub fn start(
        split: Split,
        order: Order,
        range: std::ops::Range<usize>,
        devices: Vec<B::Device>,
        share: (usize, usize),
        prefetch: usize,
        workers: usize,
    ) -> Result<Self> {
        let (send, queue) = sync_channel(prefetch);
        // The parts are uploaded on the device stream (`build`): they never cross streams.
        let producer = std::thread::Builder::new()
            .name("firemesh-input".into())
            .spawn(move || {
                let mut step = range.start;
                while step < range.end {
                    let position = order.position(step);
                    let epoch = order.sampler.batches_from(position);
                    for batch in epoch.take(order.steps_per_epoch - position.step) {
                        if step == range.end {
                            break;
                        }
                        let mine = share_of(&batch.indices, share);
                        let input = build(&split, mine, &devices, workers).map(|parts| StepInput {
                            step,
                            position: batch.position,
                            samples: batch.indices.len(),
                            parts,
                        });
                        let failed = input.is_err();
                        if send.send(input).is_err() || failed {
                            return; // the loop stopped, or nothing more can be built
                        }
                        step += 1;
                    }
                }
            })
            .map_err(|e| Error::Invalid(format!("cannot start the input thread: {e}")))?;
        Ok(Self {
            queue: Some(queue),
            producer: Some(producer),
            waited: Duration::ZERO,
        })
    }

    /// The next batch, waiting for it if it is not ready.
    pub fn next(&mut self) -> Result<StepInput<B>> {
        let start = Instant::now();
        let got = self.queue.as_ref().and_then(|q| q.recv().ok());
        self.waited += start.elapsed();
        got.unwrap_or_else(|| Err(Error::Invalid("the input pipeline stopped early".into())))
    }
}

impl<B: Backend> Drop for Prefetcher<B> {
    fn drop(&mut self) {
        drop(self.queue.take()); // unblocks the producer
        if let Some(p) = self.producer.take() {
            let _ = p.join();
        }
    }
}

/// The index chunks that evaluate the first `limit` samples of a split of `len` (0: all) in
/// batches of at most `batch`; a tail with fewer samples than `ranks` is left out, and in a
/// world of `processes` a chunk is cut to a multiple of them (each takes an equal share).
pub fn eval_chunks(
    len: usize,
    limit: usize,
    batch: usize,
    ranks: usize,
    processes: usize,
) -> Vec<Vec<usize>> {
    let len = if limit == 0 { len } else { len.min(limit) };
    let processes = processes.max(1);
    (0..len)
        .step_by(batch.max(1))
        .map(|start| {
            let n = (start + batch).min(len) - start;
            (start..start + n / processes * processes).collect::<Vec<_>>()
        })
        .filter(|chunk| !chunk.is_empty() && chunk.len() >= ranks)
        .collect()
}

/// Process `share.0`'s equal share of a batch's samples (of `share.1` processes, in process
/// order): the samples of its ranks, whose blocks follow world rank order. The batch splits
/// into equal shares (checked when the run starts).
pub fn share_of(indices: &[usize], (process, processes): (usize, usize)) -> &[usize] {
    let per = indices.len() / processes.max(1);
    &indices[process * per..(process + 1) * per]
}

/// The per-rank parts of the samples `indices` (positions in `split`): rank r gets the r-th
/// slice of an even split, built on `devices[r]`, on the device stream (where the mesh computes,
/// `firemesh_collective::stream`), whichever thread builds them.
pub fn build<B: Backend>(
    split: &Split,
    indices: &[usize],
    devices: &[B::Device],
    workers: usize,
) -> Result<Parts<B>> {
    DeviceStream::run(|| build_here(split, indices, devices, workers))
}

fn build_here<B: Backend>(
    split: &Split,
    indices: &[usize],
    devices: &[B::Device],
    workers: usize,
) -> Result<Parts<B>> {
    match split {
        Split::Images { source, items } => {
            let picked: Vec<usize> = indices.iter().map(|&i| items[i]).collect();
            let decoded = decode(source, &picked, workers)?;
            let all: Vec<usize> = (0..decoded.len()).collect();
            let decoded = InMemDataset::new(decoded);
            Ok(Parts::Images(shard_image_batch::<B, _>(
                &decoded, &all, devices,
            )?))
        }
        Split::Tokens(corpus) => Ok(Parts::Tokens(shard_token_batch::<B, _>(
            corpus.as_ref(),
            indices,
            devices,
        )?)),
    }
}

/// Decodes `indices` of `source` on up to `workers` threads, in order.
fn decode(source: &ImageSource, indices: &[usize], workers: usize) -> Result<Vec<ImageItem>> {
    let load = |chunk: &[usize]| -> Result<Vec<ImageItem>> {
        Ok(chunk
            .iter()
            .map(|&i| source.load(i))
            .collect::<std::result::Result<_, _>>()?)
    };
    if workers <= 1 || indices.len() < 2 {
        return load(indices);
    }
    let chunk = indices.len().div_ceil(workers);
    std::thread::scope(|s| {
        let jobs: Vec<_> = indices
            .chunks(chunk)
            .map(|c| s.spawn(move || load(c)))
            .collect();
        let mut items = Vec::with_capacity(indices.len());
        for job in jobs {
            let part = job
                .join()
                .map_err(|_| Error::Invalid("a decoding thread panicked".into()))??;
            items.extend(part);
        }
        Ok(items)
    })
}

/// The per-rank parts of a batch as one batch sharded over the mesh.
pub fn to_mesh<Bk: MeshBackend>(
    mesh: &Mesh<burn::tensor::Device<Bk::Inner>>,
    parts: Parts<Bk::Inner>,
) -> Result<Batch<Bk>> {
    Ok(match parts {
        Parts::Images(p) => {
            let (images, labels): (Vec<_>, Vec<_>) =
                p.into_iter().map(|b| (b.images, b.labels)).unzip();
            Batch::Images {
                images: from_shards::<Bk, 4>(mesh, images, 0)?,
                labels: from_shards_int::<Bk, 1>(mesh, labels, 0)?,
            }
        }
        Parts::Tokens(p) => Batch::Tokens(from_shards_int::<Bk, 2>(mesh, p, 0)?),
    })
}
