//! The checks both kinds of group make on what they are given: the devices of a new group,
//! and the buffers of every collective. Written once so that the same bad input gets the same
//! error from a [`crate::Group`] and from a [`crate::PortableGroup`].

use crate::{CollectiveError, DType, Result};
use std::fmt::Debug;

/// A group has at least one rank.
pub(crate) fn ensure_nonempty<D>(devices: &[D]) -> Result<()> {
    if devices.is_empty() {
        Err(CollectiveError::EmptyGroup)
    } else {
        Ok(())
    }
}

/// A group lists each device once (`new_shared` constructors opt out on purpose).
pub(crate) fn ensure_distinct<D: PartialEq + Debug>(devices: &[D]) -> Result<()> {
    for (i, a) in devices.iter().enumerate() {
        if let Some(j) = devices[..i].iter().position(|b| b == a) {
            return Err(CollectiveError::DuplicateRank {
                first: j,
                second: i,
                device: format!("{a:?}"),
            });
        }
    }
    Ok(())
}

/// One rank's buffer, as the checks see it.
pub(crate) struct BufferMeta<D, T> {
    pub device: D,
    /// The element type as the group reads it (Burn's dtype on the portable path).
    pub elem: T,
    pub len: usize,
}

/// What one kind of group accepts, beyond one buffer per rank on that rank's device, all of
/// one element type.
pub(crate) struct BufferRules<F, U> {
    /// What the group calls a rank's buffer in its errors ("buffer", "tensor").
    pub noun: &'static str,
    /// Whether every rank must pass the same length (all but all-gather).
    pub same_len: bool,
    /// The most elements one buffer may hold.
    pub max_len: usize,
    /// `(rank, elem)`: the collective dtype of a rank's element type, or why that rank's
    /// buffer cannot take part.
    pub dtype_of: F,
    /// `(rank, dtype)`: whether the rank's device can reduce the group's dtype.
    pub usable: U,
}

/// Check the buffers of one collective against the ranks' `devices` and `rules`, rank by rank;
/// the error names the first rank at fault. Returns rank 0's element type.
pub(crate) fn check_buffers<D, T, F, U>(
    devices: impl ExactSizeIterator<Item = D>,
    bufs: impl ExactSizeIterator<Item = BufferMeta<D, T>>,
    rules: BufferRules<F, U>,
) -> Result<T>
where
    D: PartialEq + Debug,
    T: Copy + PartialEq,
    F: Fn(usize, T) -> Result<DType>,
    U: Fn(usize, DType) -> Result<()>,
{
    if bufs.len() != devices.len() {
        return Err(CollectiveError::WrongRankCount {
            expected: devices.len(),
            got: bufs.len(),
        });
    }
    // Rank 0's element type, its collective dtype and its length: what every rank must match.
    let mut first: Option<(T, DType, usize)> = None;
    for (r, (device, buf)) in devices.zip(bufs).enumerate() {
        if buf.device != device {
            return Err(CollectiveError::DeviceUnavailable {
                rank: r,
                device: format!("{:?}", buf.device),
                reason: format!("rank {r}'s {} must live on {device:?}", rules.noun),
            });
        }
        let dtype = (rules.dtype_of)(r, buf.elem)?;
        let (elem, expected, len) = *first.get_or_insert((buf.elem, dtype, buf.len));
        if buf.elem != elem {
            return Err(CollectiveError::DTypeMismatch {
                rank: r,
                expected,
                got: dtype,
            });
        }
        if buf.len > rules.max_len {
            return Err(CollectiveError::TooLarge {
                rank: r,
                len: buf.len,
            });
        }
        if rules.same_len && buf.len != len {
            return Err(CollectiveError::LengthMismatch {
                rank: r,
                expected: len,
                got: buf.len,
            });
        }
        (rules.usable)(r, dtype)?;
    }
    Ok(first.expect("a group has at least one rank").0)
}
