//! Percentiles of measured samples, for the e2e latency check and the
//! controller benchmark (which includes this file by path).

/// The `p`-th percentile (`p` in 0..=1, nearest rank) of `sorted`, or the
/// default (zero) for no samples.
pub fn percentile<T: Copy + Default>(sorted: &[T], p: f64) -> T {
    if sorted.is_empty() {
        return T::default();
    }
    #[expect(
        clippy::cast_precision_loss,
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        reason = "a sample count is exact in f64, and with p in [0, 1] the rounded index is a whole number in [0, len - 1]"
    )]
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}
