//! The slowest of N ranks. A synchronous data-parallel step ends when the last rank has sent
//! its gradients, so per-rank variation in compute time (clocks under a power cap, input
//! pipelines, other tenants) costs the expected maximum, not the mean.

/// E[max of n independent standard normals], by integrating x · n φ(x) Φ(x)^(n-1).
pub fn expected_max_of_normals(n: usize) -> f64 {
    if n <= 1 {
        return 0.0;
    }
    let steps = 4000;
    let (lo, hi) = (-9.0f64, 9.0f64);
    let h = (hi - lo) / steps as f64;
    (0..=steps)
        .map(|i| {
            let x = lo + i as f64 * h;
            let w = if i == 0 || i == steps { 0.5 } else { 1.0 };
            w * x * n as f64 * pdf(x) * cdf(x).powi(n as i32 - 1)
        })
        .sum::<f64>()
        * h
}

/// The expected time of the slowest of `n` ranks whose times have mean `mean` and coefficient
/// of variation `cv`.
pub fn slowest_of(n: usize, mean: f64, cv: f64) -> f64 {
    mean * (1.0 + cv * expected_max_of_normals(n))
}

fn pdf(x: f64) -> f64 {
    (-0.5 * x * x).exp() / (2.0 * std::f64::consts::PI).sqrt()
}

/// Φ(x), through a Chebyshev fit of erfc with relative error below 1.2e-7.
fn cdf(x: f64) -> f64 {
    0.5 * erfc(-x / std::f64::consts::SQRT_2)
}

fn erfc(x: f64) -> f64 {
    let z = x.abs();
    let t = 1.0 / (1.0 + 0.5 * z);
    let poly = -z * z - 1.26551223
        + t * (1.00002368
            + t * (0.37409196
                + t * (0.09678418
                    + t * (-0.18628806
                        + t * (0.27886807
                            + t * (-1.13520398
                                + t * (1.48851587 + t * (-0.82215223 + t * 0.17087277))))))));
    let r = t * poly.exp();
    if x >= 0.0 {
        r
    } else {
        2.0 - r
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_expected_maxima() {
        // Tabulated values of E[max of n standard normals].
        for (n, want) in [
            (1, 0.0),
            (2, 0.5642),
            (4, 1.0294),
            (8, 1.4236),
            (64, 2.3437),
        ] {
            let got = expected_max_of_normals(n);
            assert!((got - want).abs() < 1e-3, "n = {n}: {got} vs {want}");
        }
        assert!((slowest_of(8, 2.0, 0.1) - 2.0 * 1.14236).abs() < 1e-3);
    }
}
