//! Property tests: ranges and symmetries that must hold for any valid input.

use bnn_metrics::{
    EvalSummary, McPredictive, Probabilities, auroc, average_precision, predictive_entropy,
};
use proptest::prelude::*;

/// `(n, classes, logits, labels)` with logits of widely varying scale.
fn logits_and_labels() -> impl Strategy<Value = (usize, usize, Vec<f32>, Vec<u32>)> {
    (1usize..40, 1usize..8).prop_flat_map(|(n, c)| {
        (
            Just(n),
            Just(c),
            prop::collection::vec(-30.0f32..30.0, n * c),
            prop::collection::vec(0u32..c as u32, n),
        )
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    #[test]
    fn summary_ranges((n, c, logits, labels) in logits_and_labels()) {
        let p = Probabilities::from_logits(logits, n, c).unwrap();
        let s = EvalSummary::compute(&p, &labels).unwrap();
        prop_assert!((0.0..=1.0).contains(&s.accuracy));
        prop_assert!((0.0..=1.0).contains(&s.ece), "ece {}", s.ece);
        prop_assert!((0.0..=1.0).contains(&s.mce));
        prop_assert!(s.ece <= s.mce + 1e-12);
        prop_assert!(s.brier >= 0.0 && s.brier <= 2.0 + 1e-6, "brier {}", s.brier);
        prop_assert!(s.nll >= 0.0);
    }

    #[test]
    fn entropy_at_most_ln_c((n, c, logits, _l) in logits_and_labels()) {
        let p = Probabilities::from_logits(logits, n, c).unwrap();
        let max = (c as f64).ln();
        for h in predictive_entropy(&p) {
            prop_assert!(h >= -1e-12 && h <= max + 1e-6, "h {h} ln C {max}");
        }
    }

    #[test]
    fn mutual_information_non_negative(
        (n, c, logits, _l) in logits_and_labels(),
        shifts in prop::collection::vec(-5.0f32..5.0, 1..6),
    ) {
        let mut mc = McPredictive::new(n, c).unwrap();
        for (s, &shift) in shifts.iter().enumerate() {
            // Different samples: perturb one class per sample.
            let sample: Vec<f32> = logits
                .iter()
                .enumerate()
                .map(|(i, &x)| if i % c == s % c { x + shift } else { x })
                .collect();
            mc.push_logits(&sample).unwrap();
        }
        let pred = mc.finish().unwrap();
        let max = (c as f64).ln();
        for (&mi, &h) in pred.mutual_information().unwrap().iter().zip(pred.entropy()) {
            prop_assert!(mi >= -1e-9, "mi {mi}");
            prop_assert!(mi <= h + 1e-9 && h <= max + 1e-6);
        }
    }

    #[test]
    fn auroc_antisymmetric_without_ties(
        scores in prop::collection::btree_set(-1_000_000i64..1_000_000, 2..80),
        split in any::<prop::sample::Index>(),
        seed in any::<u64>(),
    ) {
        // Distinct scores, assigned to the two classes by a seed-driven shuffle.
        let mut s: Vec<f64> = scores.into_iter().map(|x| x as f64 / 1000.0).collect();
        let mut state = seed | 1;
        for i in (1..s.len()).rev() {
            state ^= state << 13; state ^= state >> 7; state ^= state << 17;
            s.swap(i, (state % (i as u64 + 1)) as usize);
        }
        let k = 1 + split.index(s.len() - 1);
        let (a, b) = s.split_at(k);
        let neg = |v: &[f64]| v.iter().map(|x| -x).collect::<Vec<_>>();
        let fwd = auroc(a, b).unwrap();
        let back = auroc(&neg(a), &neg(b)).unwrap();
        prop_assert!((fwd - (1.0 - back)).abs() < 1e-12, "{fwd} vs 1 - {back}");
    }

    #[test]
    fn auroc_equals_pairwise_count_with_ties(
        a in prop::collection::vec(0i8..6, 1..30),
        b in prop::collection::vec(0i8..6, 1..30),
    ) {
        // Mann-Whitney: P(in > out) + P(in == out) / 2 — an independent O(n^2) definition.
        let (a, b): (Vec<f64>, Vec<f64>) =
            (a.iter().map(|&x| f64::from(x)).collect(), b.iter().map(|&x| f64::from(x)).collect());
        let mut wins = 0.0;
        for x in &a {
            for y in &b {
                wins += if x > y { 1.0 } else if x == y { 0.5 } else { 0.0 };
            }
        }
        let want = wins / (a.len() * b.len()) as f64;
        prop_assert!((auroc(&a, &b).unwrap() - want).abs() < 1e-12);
        let ap = average_precision(&a, &b).unwrap();
        prop_assert!(ap > 0.0 && ap <= 1.0 + 1e-12);
    }
}
