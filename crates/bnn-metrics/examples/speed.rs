//! Speed check: metrics on 10^5 examples x 1000 classes. Prints one JSON object of timings (s).
//!
//! `cargo run --release -p bnn-metrics --example speed [-- N CLASSES]`

use std::time::Instant;

use bnn_metrics::{
    EvalSummary, McPredictive, OodScore, OodSummary, Predictive, Probabilities, predictive_entropy,
};

/// SplitMix64: a tiny deterministic generator, so the example needs no extra dependency.
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in [-4, 4).
    fn logit(&mut self) -> f32 {
        ((self.next() >> 40) as f32 / (1u64 << 24) as f32) * 8.0 - 4.0
    }
}

/// Process CPU time (user + system, all threads) in seconds from `/proc/self/stat` (Linux;
/// `NaN` elsewhere). On a shared, overloaded machine this measures the work where wall time
/// measures the queue.
fn cpu_seconds() -> f64 {
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else {
        return f64::NAN;
    };
    // Fields after the parenthesised command name; utime and stime are fields 14 and 15.
    let after = stat.rsplit(')').next().unwrap_or("");
    let f: Vec<&str> = after.split_whitespace().collect();
    let ticks = |i: usize| {
        f.get(i)
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(f64::NAN)
    };
    // Clock ticks are 100 Hz on Linux (USER_HZ).
    (ticks(11) + ticks(12)) / 100.0
}

/// (result, wall seconds, CPU seconds).
fn timed<T>(f: impl FnOnce() -> T) -> (T, [f64; 2]) {
    let (t, c) = (Instant::now(), cpu_seconds());
    let out = f();
    (out, [t.elapsed().as_secs_f64(), cpu_seconds() - c])
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .map(|a| a.parse())
        .collect::<Result<_, _>>()?;
    let n = args.first().copied().unwrap_or(100_000);
    let c = args.get(1).copied().unwrap_or(1000);
    let mut rng = SplitMix(42);
    let logits: Vec<f32> = (0..n * c).map(|_| rng.logit()).collect();
    let labels: Vec<u32> = (0..n).map(|_| (rng.next() % c as u64) as u32).collect();

    let (mc_pred, t_mc_push) = timed(|| -> Result<Predictive, bnn_metrics::MetricsError> {
        let mut mc = McPredictive::new(n, c)?;
        mc.push_logits(&logits)?;
        mc.finish()
    });
    let mc_pred = mc_pred?;
    drop(mc_pred);
    let (probs, t_softmax) = timed(|| Probabilities::from_logits(logits, n, c));
    let probs = probs?;
    let copy = probs.as_slice().to_vec();
    let (valid, t_validate) = timed(|| Probabilities::new(copy, n, c));
    valid?;
    let (summary, t_summary) = timed(|| EvalSummary::compute(&probs, &labels));
    let summary = summary?;
    let (_, t_entropy) = timed(|| predictive_entropy(&probs));
    // OOD: first half as in-distribution, second half as out-of-distribution.
    let half = n / 2;
    let in_p = Probabilities::new(probs.as_slice()[..half * c].to_vec(), half, c)?;
    let out_p = Probabilities::new(probs.as_slice()[half * c..].to_vec(), n - half, c)?;
    let (ood_max, t_ood_maxprob) =
        timed(|| OodSummary::from_probabilities(&in_p, &out_p, OodScore::MaxProb));
    let (ood_ent, t_ood_entropy) =
        timed(|| OodSummary::from_probabilities(&in_p, &out_p, OodScore::Entropy));
    let (ood_max, ood_ent) = (ood_max?, ood_ent?);
    let timings = [
        ("mc_push_logits_and_finish", t_mc_push),
        ("softmax_from_logits", t_softmax),
        ("validate_probabilities", t_validate),
        ("eval_summary", t_summary),
        ("predictive_entropy", t_entropy),
        ("ood_summary_maxprob", t_ood_maxprob),
        ("ood_summary_entropy", t_ood_entropy),
    ]
    .iter()
    .map(|(k, [w, c])| format!("\"{k}\": {{\"wall_s\": {w:.4}, \"cpu_s\": {c:.2}}}"))
    .collect::<Vec<_>>()
    .join(", ");
    println!(
        "{{\"n\": {n}, \"classes\": {c}, \"threads\": {}, {timings}, \
         \"accuracy\": {:.5}, \"ece\": {:.5}, \"auroc_maxprob\": {:.5}, \"auroc_entropy\": {:.5}}}",
        rayon::current_num_threads(),
        summary.accuracy,
        summary.ece,
        ood_max.auroc,
        ood_ent.auroc
    );
    Ok(())
}
