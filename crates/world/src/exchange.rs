//! The exchanges of a sum or gather across the processes, in bytes: what crosses the link and
//! how it is cut. The additions are the caller's (`firemesh-backend`'s `across.rs` adds the
//! buffers as tensors on its devices, in process order, so every process holds the same bits).

use crate::link::{LinkError, ProcessLink};

/// Buffers from this size on cross a world of more than 2 processes by blocks where the link
/// has its own all-to-all (MPI's, NCCL's): an all-to-all gives process `q` block `q` of every
/// buffer, it adds them, and an all-gather shares the sums. Smaller ones, and all on other
/// links, cross whole in one all-gather.
pub const BLOCKS_FROM_BYTES: usize = 64 * 1024;

/// Whether a sum of `elements` taking `bytes` crosses `link` by blocks ([`BLOCKS_FROM_BYTES`]).
pub fn by_blocks(link: &dyn ProcessLink, bytes: usize, elements: usize) -> bool {
    let n = link.processes();
    n > 2 && link.has_all_to_all() && bytes >= BLOCKS_FROM_BYTES && elements >= n
}

/// Every process's chunk `me` (this process's) of its flat `bytes`, in process order: chunk `q`
/// of `chunks[q]` elements of `size` bytes goes to process `q`, by the link's all-to-all.
pub fn own_chunks(
    link: &dyn ProcessLink,
    bytes: &[u8],
    chunks: &[usize],
    size: usize,
) -> Result<Vec<Vec<u8>>, LinkError> {
    let me = link.process();
    let send_lens: Vec<usize> = chunks.iter().map(|c| c * size).collect();
    link.all_to_all(bytes, &send_lens, &vec![send_lens[me]; link.processes()])
}

/// What every process sent of one exchange of a tensor's bytes ([`gather_shaped`]), in process
/// order.
pub struct Shaped {
    messages: Vec<Vec<u8>>,
    /// The bytes of each message's header (its shape).
    header: usize,
}

impl Shaped {
    pub fn iter(&self) -> impl Iterator<Item = &[u8]> {
        self.messages.iter().map(|m| &m[self.header..])
    }
}

impl std::ops::Index<usize> for Shaped {
    type Output = [u8];
    fn index(&self, q: usize) -> &[u8] {
        &self.messages[q][self.header..]
    }
}

/// Every process's `bytes` of a tensor of `shape`, in process order. Every process sends a
/// tensor of the same shape: another shape is another exchange (the processes' exchanges out of
/// step), never to be added or joined, and fails.
pub fn gather_shaped(
    link: &dyn ProcessLink,
    shape: &[usize],
    bytes: &[u8],
) -> Result<Shaped, LinkError> {
    let header = 8 * (shape.len() + 1);
    let mut message = Vec::with_capacity(header + bytes.len());
    message.extend((shape.len() as u64).to_le_bytes());
    for d in shape {
        message.extend((*d as u64).to_le_bytes());
    }
    message.extend_from_slice(bytes);
    let messages = link.all_gather(&message)?;
    for (q, m) in messages.iter().enumerate() {
        if m.get(..header) != Some(&message[..header]) {
            let dims = number(m, 0).min(m.len() / 8);
            let theirs: Vec<u64> = (1..=dims).map(|i| number(m, i) as u64).collect();
            return Err(LinkError(format!(
                "process {q} sent a tensor of shape {theirs:?} where this one has {shape:?}: the \
                 processes' exchanges are out of step"
            )));
        }
    }
    Ok(Shaped { messages, header })
}

/// The byte `ranges` of every process's `bytes` of a tensor of `shape` laid end to end in
/// process order, each copied once from what the link received.
pub fn gather_ranges(
    link: &dyn ProcessLink,
    shape: &[usize],
    bytes: &[u8],
    ranges: &[std::ops::Range<usize>],
) -> Result<Vec<Vec<u8>>, LinkError> {
    let all = gather_shaped(link, shape, bytes)?;
    let len = bytes.len();
    let pieces = ranges.iter().map(|range| {
        let mut out = Vec::with_capacity(range.len());
        for (q, bytes) in all.iter().enumerate() {
            let (from, to) = (q * len, (q + 1) * len);
            if range.start < to && from < range.end {
                out.extend_from_slice(
                    &bytes[range.start.max(from) - from..range.end.min(to) - from],
                );
            }
        }
        out
    });
    Ok(pieces.collect())
}

/// The little-endian number at word `i` of `message` (0 where it is short).
fn number(message: &[u8], i: usize) -> usize {
    let mut b = [0u8; 8];
    if let Some(word) = message.get(8 * i..8 * i + 8) {
        b.copy_from_slice(word);
    }
    u64::from_le_bytes(b) as usize
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::threads::on_each;

    #[test]
    fn a_shaped_exchange_brings_every_process_its_peers_bytes_or_says_they_are_out_of_step() {
        let answers = on_each(3, |l| {
            let link: &dyn ProcessLink = &l;
            let me = link.process() as u8;
            let same = gather_shaped(link, &[2, 1], &[me, me + 10]).unwrap();
            let same: Vec<Vec<u8>> = same.iter().map(<[u8]>::to_vec).collect();
            let wide = [2, 1 + usize::from(me == 2)];
            let apart = gather_shaped(link, &wide, &[me; 2]).err().map(|e| e.0);
            // Process q's two bytes are world bytes 2q and 2q + 1: the ranges cut across them.
            let cut = gather_ranges(link, &[2], &[me, me + 10], &[0..3, 3..6]).unwrap();
            (same, apart, cut)
        });
        for (p, (same, apart, cut)) in answers.into_iter().enumerate() {
            assert_eq!(same, [[0, 10], [1, 11], [2, 12]]);
            let apart = apart.expect("process 2's shape differs");
            let culprit = match p {
                2 => "process 0 sent a tensor of shape [2, 1] where this one has [2, 2]",
                _ => "process 2 sent a tensor of shape [2, 2] where this one has [2, 1]",
            };
            assert!(apart.starts_with(culprit), "{apart}");
            assert_eq!(cut, [vec![0, 10, 1], vec![11, 2, 12]]);
        }
    }

    #[test]
    fn large_sums_in_worlds_of_more_than_two_go_by_blocks_and_chunks_reach_their_process() {
        let answers = on_each(3, |l| {
            let link: &dyn ProcessLink = &l;
            let me = link.process() as u8;
            // Chunk q (q + 1 elements of 2 bytes) goes to process q.
            let bytes: Vec<u8> = (0..3u8)
                .flat_map(|q| vec![10 * me + q; 2 * (q as usize + 1)])
                .collect();
            let mine = own_chunks(link, &bytes, &[1, 2, 3], 2).unwrap();
            let decisions = [
                by_blocks(link, BLOCKS_FROM_BYTES, 3),
                by_blocks(link, BLOCKS_FROM_BYTES - 1, 3),
                by_blocks(link, BLOCKS_FROM_BYTES, 2),
            ];
            (mine, decisions)
        });
        for (p, (mine, decisions)) in answers.into_iter().enumerate() {
            let want: Vec<Vec<u8>> = (0..3u8)
                .map(|q| vec![10 * q + p as u8; 2 * (p + 1)])
                .collect();
            assert_eq!(mine, want);
            assert_eq!(decisions, [true, false, false]);
        }
        let two = on_each(2, |l| by_blocks(&l, 1 << 30, 1 << 20));
        assert_eq!(two, [false, false]);
    }
}
