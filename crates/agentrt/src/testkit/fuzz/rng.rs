//! A small deterministic PRNG: the same seed, the same values.

/// A small deterministic PRNG (splitmix64).
#[derive(Debug, Clone)]
pub(super) struct Rng(pub(super) u64);

impl Rng {
    pub(super) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (0 when `n` is 0).
    pub(super) fn below(&mut self, n: u64) -> u64 {
        if n == 0 { 0 } else { self.next() % n }
    }

    /// Uniform in `lo..=hi` (`lo` when the range is empty).
    pub(super) fn between(&mut self, lo: i128, hi: i128) -> i128 {
        if hi <= lo {
            return lo;
        }
        let span = (hi - lo).unsigned_abs().saturating_add(1);
        let offset = u128::from(self.next()) % span;
        lo.saturating_add(i128::try_from(offset).unwrap_or(0))
    }

    /// Uniform in `lo..=hi` for sizes.
    pub(super) fn size(&mut self, lo: usize, hi: usize) -> usize {
        let (l, h) = (lo as i128, hi.min(lo.saturating_add(1 << 20)) as i128);
        usize::try_from(self.between(l, h)).unwrap_or(lo)
    }

    /// True with probability `num / den`.
    pub(super) fn chance(&mut self, num: u64, den: u64) -> bool {
        self.below(den) < num
    }

    pub(super) fn pick<'a, T>(&mut self, items: &'a [T]) -> Option<&'a T> {
        let n = items.len() as u64;
        if n == 0 {
            return None;
        }
        items.get(usize::try_from(self.below(n)).unwrap_or(0))
    }
}
