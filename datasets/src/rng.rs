//! A small deterministic random number generator, stable across releases and platforms.

/// SplitMix64 (Steele, Lea, Flood 2014).
#[derive(Debug, Clone)]
pub(crate) struct SplitMix64(u64);

impl SplitMix64 {
    /// A generator for the stream identified by `keys` (e.g. seed and epoch).
    pub(crate) fn from_keys(keys: &[u64]) -> Self {
        let mut state = 0x5EED_F12E_3E5E_0000;
        for &key in keys {
            state = SplitMix64(state ^ key).next_u64();
        }
        SplitMix64(state)
    }

    pub(crate) fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    pub(crate) fn next_unit(&mut self) -> f32 {
        (self.next_u64() >> 40) as f32 / (1u64 << 24) as f32
    }

    /// Uniform in `0..bound` (`bound > 0`), without modulo bias.
    pub(crate) fn below(&mut self, bound: usize) -> usize {
        let bound = bound as u64;
        let zone = u64::MAX - u64::MAX % bound;
        loop {
            let value = self.next_u64();
            if value < zone {
                return (value % bound) as usize;
            }
        }
    }

    /// Fisher–Yates shuffle.
    pub(crate) fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            items.swap(i, self.below(i + 1));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streams_are_reproducible_and_distinct() {
        let draw = |keys: &[u64]| {
            let mut rng = SplitMix64::from_keys(keys);
            (0..4).map(|_| rng.next_u64()).collect::<Vec<_>>()
        };
        assert_eq!(draw(&[1, 2]), draw(&[1, 2]));
        assert_ne!(draw(&[1, 2]), draw(&[1, 3]));
        assert_ne!(draw(&[1, 2]), draw(&[2, 1]));
    }

    #[test]
    fn shuffle_is_a_permutation_and_below_stays_in_range() {
        let mut rng = SplitMix64::from_keys(&[9]);
        let mut items: Vec<usize> = (0..100).collect();
        rng.shuffle(&mut items);
        assert_ne!(items, (0..100).collect::<Vec<_>>());
        items.sort_unstable();
        assert_eq!(items, (0..100).collect::<Vec<_>>());
        assert!((0..1000).all(|_| rng.below(7) < 7));
        assert!((0..1000).all(|_| (0.0..1.0).contains(&rng.next_unit())));
    }
}
