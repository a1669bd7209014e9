//! `compress --auto`: the smallest file, among the compressions a user could ship, whose
//! validation metrics stay within margins of the Bayesian network it came from.
//!
//! The candidates:
//! - the quantised BNNs (int8 `mu`, few-bit `sigma`), which need no retraining;
//! - 2DGBNN and 1-D sharing (`mu` only) over a geometric ladder of K (the configured K,
//!   halved down to [`SearchConfig::smallest_k`]), each saved with `f32` outliers and with
//!   int8 outliers (the same retrained model, two encodings).
//!
//! Stages 1-2 take seconds and fix a sharing candidate's file size (stage 3 changes the
//! values the file holds, not how many: [`swshare::compress::Prepared::file_sizes`]), so
//! every candidate's size is known before any retraining (one gradient pass serves every
//! plan). The sharing candidates, smallest file first, are searched by bisection: quality is
//! taken to grow with the file, so one within the margins sends the search to the smaller
//! half and one outside them to the larger half; each step retrains one plan (stage 3, the
//! search's cost), at most [`SearchConfig::max_retrains`]. The quantised BNNs, which need no
//! retraining, are then judged when smaller than the best kept. The written file is the
//! smallest within every margin; every candidate not judged is recorded with the reason.
//!
//! Each is judged on the validation split and on the tile-shuffled validation
//! images (the OOD proxy the protocol keeps for choices), with the device seeded the same for
//! every model, so the comparisons are paired. The test set is never read.

use std::fmt;
use std::time::Instant;

use bnn_data::DataLoader;
use bnn_layers::count_params;
use bnn_models::{ModelConfig, Network};
use bnn_train::{Evaluation, Observer, evaluation_of, predict};
use burn::prelude::*;
use serde::{Deserialize, Serialize};
use swshare::SharingSpace;
use swshare::compress::{CompressConfig, Prepared, gradient_pass, prepare_from, retrain};
use swshare::format::qbnn::QbnnData;
use swshare::format::{self, SaveOptions};

use crate::Error;

/// How much worse than the source BNN a candidate may be on validation. The defaults are the
/// protocol's non-inferiority margins (docs/protocol.md).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Margins {
    /// Accuracy lost, in percentage points.
    pub accuracy_points: f64,
    /// NLL gained.
    pub nll: f64,
    /// ECE (15 bins) gained.
    pub ece: f64,
    /// AUROC lost against the OOD proxy (predictive-entropy score).
    pub ood_auroc: f64,
}

impl Margins {
    /// The protocol's margins: accuracy -0.3 points, NLL +0.01, ECE +0.002, OOD AUROC -0.01.
    pub const PROTOCOL: Margins = Margins {
        accuracy_points: 0.3,
        nll: 0.01,
        ece: 0.002,
        ood_auroc: 0.01,
    };

    /// Every margin finite and `>= 0`; the error names the margin and its flag.
    pub fn check(&self) -> Result<(), Error> {
        for (name, v) in self.named() {
            if !(v.is_finite() && v >= 0.0) {
                return Err(Error::Usage(format!(
                    "--margin-{name} {v}: a margin must be finite and >= 0"
                )));
            }
        }
        Ok(())
    }

    fn named(&self) -> [(&'static str, f64); 4] {
        [
            ("accuracy", self.accuracy_points),
            ("nll", self.nll),
            ("ece", self.ece),
            ("ood-auroc", self.ood_auroc),
        ]
    }
}

impl Default for Margins {
    fn default() -> Self {
        Margins::PROTOCOL
    }
}

/// What the search tries and how long it may take.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SearchConfig {
    /// How far each validation metric may move from the source's.
    pub margins: Margins,
    /// Monte Carlo samples of every validation evaluation.
    pub samples: usize,
    /// The ladder's lowest K: the configured K is halved while it stays at or above this.
    pub smallest_k: usize,
    /// Bits of the quantised BNNs' standard deviations, one candidate each.
    pub sigma_bits: Vec<u8>,
    /// Most sharing candidates retrained (stage 3), i.e. bisection steps; the rest are
    /// recorded as not tried.
    pub max_retrains: usize,
}

/// Monte Carlo samples of the search's validation passes: 10, where the evaluations of the
/// protocol take 30. Chosen on cost alone: on the quick preset's LeNet-5 a search at 30 samples
/// took 204 s against 98 s at 10 (docs/benchmarks.md), and the source is judged with the same
/// samples and noise as every candidate, so the comparison stays paired.
pub const SEARCH_SAMPLES: usize = 10;

/// Validation images below which an ECE of 15 bins is too noisy to hold to a margin of a few
/// thousandths (the error asks for a larger `--validation`): the bound a temperature fit
/// meets, [`crate::calibration::MIN_FIT_IMAGES`].
pub const MIN_VALIDATION_IMAGES: usize = crate::calibration::MIN_FIT_IMAGES;

impl Default for SearchConfig {
    fn default() -> Self {
        SearchConfig {
            margins: Margins::PROTOCOL,
            samples: SEARCH_SAMPLES,
            smallest_k: 24,
            sigma_bits: vec![1, 2, 8],
            max_retrains: 3,
        }
    }
}

impl SearchConfig {
    /// Range checks, naming the setting.
    pub fn check(&self) -> Result<(), Error> {
        self.margins.check()?;
        crate::limits::check_samples(self.samples, 1, "the search's validation passes")
            .map_err(|e| Error::Usage(format!("--samples: {e}")))?;
        if self.smallest_k < 2 {
            return Err(Error::Usage(format!(
                "the search's smallest K is {}: at least 2",
                self.smallest_k
            )));
        }
        if let Some(b) = self.sigma_bits.iter().find(|b| !(1..=8).contains(*b)) {
            return Err(Error::Usage(format!(
                "the search's sigma bits: {b} is not in 1..=8"
            )));
        }
        Ok(())
    }

    /// The K values tried for a configured `k`: `k`, `k / 2`, `k / 4`, ... while at or above
    /// [`SearchConfig::smallest_k`] (always `k` itself), smallest first.
    pub fn ladder(&self, k: usize) -> Vec<usize> {
        let mut out = vec![k];
        let mut v = k / 2;
        while v >= self.smallest_k && v >= 2 {
            out.push(v);
            v /= 2;
        }
        out.reverse();
        out
    }
}

/// A candidate's compression.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum CandidateMethod {
    /// 2DGBNN: sharing in the `(mu, sigma)` plane.
    #[serde(rename = "2dgbnn")]
    Gbnn2d,
    /// 1-D sharing: `K` clusters of `mu`, one `sigma` each.
    #[serde(rename = "mu-only")]
    MuOnly,
    /// The quantised BNN: int8 `mu`, few-bit `sigma`, not retrained.
    #[serde(rename = "qbnn")]
    Qbnn,
}

impl CandidateMethod {
    /// The name in the search file and in messages.
    pub fn name(self) -> &'static str {
        match self {
            CandidateMethod::Gbnn2d => "2dgbnn",
            CandidateMethod::MuOnly => "mu-only",
            CandidateMethod::Qbnn => "qbnn",
        }
    }

    fn space(self) -> SharingSpace {
        match self {
            CandidateMethod::MuOnly => SharingSpace::MuOnly,
            _ => SharingSpace::MuSigma,
        }
    }
}

/// The metrics a candidate is judged on, all on the validation split.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ValidationMetrics {
    /// Top-1 accuracy (fraction).
    pub accuracy: f64,
    /// Mean NLL of the Monte Carlo predictive.
    pub nll: f64,
    /// Expected calibration error, 15 bins.
    pub ece: f64,
    /// AUROC of validation against its tile-shuffled images (predictive entropy); `None` when
    /// a metric above already ruled the candidate out (the OOD pass is then skipped).
    pub ood_auroc: Option<f64>,
}

impl ValidationMetrics {
    fn of(ev: &Evaluation) -> Self {
        ValidationMetrics {
            accuracy: ev.summary.accuracy,
            nll: ev.summary.nll,
            ece: ev.summary.ece,
            ood_auroc: ev.ood_entropy.as_ref().map(|o| o.auroc),
        }
    }

    /// The margins `self` breaks against `source`, each as `name (value against limit)`.
    pub fn outside(&self, source: &ValidationMetrics, m: &Margins) -> Vec<String> {
        let mut out = Vec::new();
        let acc_floor = source.accuracy - m.accuracy_points / 100.0;
        if self.accuracy < acc_floor {
            out.push(format!(
                "accuracy {:.2}% < {:.2}%",
                100.0 * self.accuracy,
                100.0 * acc_floor
            ));
        }
        if self.nll > source.nll + m.nll {
            out.push(format!("NLL {:.4} > {:.4}", self.nll, source.nll + m.nll));
        }
        if self.ece > source.ece + m.ece {
            out.push(format!("ECE {:.4} > {:.4}", self.ece, source.ece + m.ece));
        }
        if let (Some(a), Some(s)) = (self.ood_auroc, source.ood_auroc)
            && a < s - m.ood_auroc
        {
            out.push(format!("OOD AUROC {a:.4} < {:.4}", s - m.ood_auroc));
        }
        out
    }

    /// How far past its worst margin `self` is, in margins (0 within all; for the fallback
    /// choice when no candidate qualifies).
    fn excess(&self, source: &ValidationMetrics, m: &Margins) -> f64 {
        let over = |by: f64, margin: f64| (by - margin).max(0.0) / margin.max(1e-12);
        let mut e = over(100.0 * (source.accuracy - self.accuracy), m.accuracy_points)
            .max(over(self.nll - source.nll, m.nll))
            .max(over(self.ece - source.ece, m.ece));
        if let (Some(a), Some(s)) = (self.ood_auroc, source.ood_auroc) {
            e = e.max(over(s - a, m.ood_auroc));
        }
        e
    }
}

/// What became of a candidate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    /// The smallest file within every margin: written to `--out`.
    Chosen,
    /// Within every margin, but a smaller file was too.
    Within,
    /// Outside the margins listed.
    Outside(Vec<String>),
    /// Not evaluated, for the reason given.
    NotTried(String),
    /// Stages 1-2 refused the setting (e.g. K above the inliers), with the error.
    Failed(String),
    /// No candidate qualified: the one nearest its margins, written only with `--force`.
    Nearest,
}

/// One candidate of the search, as `*.search.json` lists it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Candidate {
    /// The compression.
    pub method: CandidateMethod,
    /// The GMM size asked for (sharing candidates).
    pub k: Option<usize>,
    /// The codebook's entries after merging (sharing candidates that got a plan).
    pub codebook: Option<usize>,
    /// Bits of the standard deviations (quantised BNNs).
    pub sigma_bits: Option<u8>,
    /// Whether the outliers are stored with 8 bits (sharing candidates).
    pub int8_outliers: bool,
    /// The file's size in bytes (0 when stages 1-2 failed).
    pub bytes: u64,
    /// Trainable parameters of the model the file holds (0 when not built).
    pub parameters: usize,
    /// Validation metrics (`None` when not evaluated).
    pub validation: Option<ValidationMetrics>,
    /// Seconds spent on this candidate (its stages, stage 3 and evaluation).
    pub seconds: f64,
    /// Stage-3 optimiser steps it took (0 for the quantised BNNs).
    pub retrain_steps: usize,
    /// Kept, dropped, or not tried, and why.
    pub verdict: Verdict,
}

impl Candidate {
    /// A one-line name: `2dgbnn K = 50, int8 outliers`, `qbnn sigma 2 bit`.
    pub fn label(&self) -> String {
        match (self.method, self.k, self.sigma_bits) {
            (CandidateMethod::Qbnn, _, Some(b)) => format!("qbnn int8 mu, sigma {b} bit"),
            (m, Some(k), _) => format!(
                "{} K = {k}{}",
                m.name(),
                if self.int8_outliers {
                    ", int8 outliers"
                } else {
                    ""
                }
            ),
            (m, _, _) => m.name().to_string(),
        }
    }

    fn qualifies(&self) -> bool {
        matches!(self.verdict, Verdict::Chosen | Verdict::Within)
    }
}

impl fmt::Display for Candidate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {} bytes", self.label(), self.bytes)?;
        match &self.verdict {
            Verdict::Chosen => write!(f, ", chosen"),
            Verdict::Within => write!(f, ", within the margins"),
            Verdict::Outside(why) => write!(f, ", outside: {}", why.join("; ")),
            Verdict::NotTried(why) => write!(f, ", not tried: {why}"),
            Verdict::Failed(why) => write!(f, ", failed: {why}"),
            Verdict::Nearest => write!(f, ", nearest the margins"),
        }
    }
}

/// The whole search: what `*.search.json` holds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SearchReport {
    /// The settings searched with.
    pub config: SearchConfig,
    /// The source BNN's validation metrics (the margins' reference).
    pub source: ValidationMetrics,
    /// Trainable parameters of the source BNN.
    pub source_parameters: usize,
    /// Validation images (and as many tile-shuffled ones) every model was judged on.
    pub validation_images: usize,
    /// Every candidate, in the order decided: those whose stages 1-2 failed, the sharing
    /// candidates the bisection judged, those it did not, then the quantised BNNs.
    pub candidates: Vec<Candidate>,
    /// The index in `candidates` of the file written: the chosen one, or with `force` the one
    /// nearest its margins when none qualified; `None` when nothing was written.
    pub written: Option<usize>,
    /// Whether the written file is within every margin.
    pub within_margins: bool,
    /// Seconds of the whole search.
    pub seconds: f64,
}

impl SearchReport {
    /// The written candidate.
    pub fn written(&self) -> Option<&Candidate> {
        self.written.and_then(|i| self.candidates.get(i))
    }
}

/// The file of the written candidate.
#[derive(Debug)]
pub enum ChosenFile {
    /// A `.swb` file's bytes.
    Swb(Vec<u8>),
    /// A `.qbnn` file's bytes (every command reads the kind from the content, whatever the
    /// file's name).
    Qbnn(Vec<u8>),
}

impl ChosenFile {
    /// The bytes to write.
    pub fn bytes(&self) -> &[u8] {
        match self {
            ChosenFile::Swb(b) | ChosenFile::Qbnn(b) => b,
        }
    }
}

/// The line a progress display shows for `candidate` as it is decided, with the smallest
/// file kept so far: `2dgbnn K = 50: 51005 bytes, chosen (best so far: ...)`.
pub fn progress_line(candidate: &Candidate, best: Option<&Candidate>) -> String {
    match best {
        Some(b) => format!("{candidate} (best so far: {})", b.label()),
        None => candidate.to_string(),
    }
}

/// Told about each candidate as it is decided, with the smallest kept so far.
pub trait SearchProgress {
    /// A candidate's verdict.
    fn candidate(&mut self, candidate: &Candidate, best: Option<&Candidate>);
    /// The observer of stage-3 steps (a progress bar).
    fn steps(&mut self) -> &mut dyn Observer;
}

/// What [`search`] reads.
pub struct SearchInputs<'a> {
    /// The source BNN, on an autodiff device.
    pub bayes: &'a Network,
    /// Its configuration.
    pub bayes_config: &'a ModelConfig,
    /// Training loader (stage 1's gradient pass and stage 3).
    pub train: &'a DataLoader,
    /// The validation split (stage 3's stop rule and every judgement).
    pub validation: &'a DataLoader,
    /// The tile-shuffled validation images ([`crate::data::validation_ood`]).
    pub validation_ood: &'a DataLoader,
    /// Validation images (for the report).
    pub validation_images: usize,
}

/// Seed of the device before every validation pass: one noise stream for every model, so
/// candidates and source are compared on the same draws.
const EVALUATION_SEED: u64 = 0x5ea_2c4;

/// Runs the search with `base` as the sharing candidates' settings (their K and space
/// replaced); returns the report and the written candidate's file (`None` when no candidate
/// qualifies and `force` is off: the report then says why each failed).
pub fn search(
    inputs: &SearchInputs<'_>,
    base: &CompressConfig,
    cfg: &SearchConfig,
    force: bool,
    progress: &mut dyn SearchProgress,
) -> Result<(SearchReport, Option<ChosenFile>), Error> {
    cfg.check()?;
    base.validate()?;
    if inputs.validation_images < MIN_VALIDATION_IMAGES {
        return Err(Error::Usage(format!(
            "--auto judges each candidate on the validation split; {} images are too few to \
             hold ECE to a margin (at least {MIN_VALIDATION_IMAGES}: a larger --validation)",
            inputs.validation_images
        )));
    }
    let started = Instant::now();
    let device = inputs.bayes.devices().first().cloned().unwrap_or_default();
    let source_model = inputs.bayes.valid();
    let source = judge(&source_model, inputs, cfg, None)?;
    let mut s = Search {
        inputs,
        cfg,
        source,
        candidates: Vec::new(),
        files: Vec::new(),
    };

    // Every candidate's size first: the quantised BNNs are made, the sharing candidates
    // planned (stages 1-2, sharing one gradient pass); neither needs stage 3.
    let mut quantised: Vec<Quantised> = Vec::new();
    for &bits in &cfg.sigma_bits {
        let t = Instant::now();
        let data = crate::qbnn::quantize(inputs.bayes, inputs.bayes_config, bits)?;
        let file = format::qbnn::to_bytes(&data)?;
        quantised.push(Quantised {
            bits,
            data,
            file,
            seconds: t.elapsed().as_secs_f64(),
        });
    }
    let t = Instant::now();
    let weights = gradient_pass(inputs.bayes, inputs.bayes_config, inputs.train, base)?;
    let mut plan_seconds = t.elapsed().as_secs_f64();
    let mut plans: Vec<Planned> = Vec::new();
    for method in [CandidateMethod::Gbnn2d, CandidateMethod::MuOnly] {
        for k in cfg.ladder(base.sharing.gmm.k) {
            let mut c = base.clone();
            c.sharing.gmm.k = k;
            c.sharing.space = method.space();
            let t = Instant::now();
            match prepare_from(&weights, inputs.bayes, inputs.bayes_config, &c) {
                Ok(p) => {
                    let bytes = [
                        p.file_sizes(&with_int8(&c.save, true))?.total,
                        p.file_sizes(&with_int8(&c.save, false))?.total,
                    ];
                    // The gradient pass is counted with the first plan.
                    plan_seconds += t.elapsed().as_secs_f64();
                    plans.push(Planned {
                        meta: PlanMeta {
                            method,
                            k,
                            codebook: Some(p.plan.k()),
                        },
                        cfg: c,
                        bytes,
                        seconds: std::mem::take(&mut plan_seconds),
                        prepared: Some(p),
                        judged: false,
                    });
                }
                Err(e) => {
                    let meta = PlanMeta {
                        method,
                        k,
                        codebook: None,
                    };
                    let c = meta.candidate(
                        0,
                        false,
                        t.elapsed().as_secs_f64(),
                        Verdict::Failed(e.to_string()),
                    );
                    s.push(c, None, progress);
                }
            }
        }
    }

    // The sharing candidates, smallest file first (ties: 2DGBNN, then K), searched by
    // bisection: quality is taken to grow with the file, so a plan within the margins sends
    // the search to the smaller half and one outside them to the larger half. Each step
    // retrains one plan (stage 3, the search's cost): log2 of the plans, within the budget.
    plans.sort_by_key(|p| {
        (
            p.bytes[0],
            p.meta.method != CandidateMethod::Gbnn2d,
            p.meta.k,
        )
    });
    let (mut lo, mut hi) = (0, plans.len());
    let mut failed_above: Option<String> = None;
    let mut retrains = 0;
    while lo < hi && retrains < cfg.max_retrains {
        let mid = lo + (hi - lo) / 2;
        retrains += 1;
        if s.retrain_and_judge(&mut plans[mid], &device, progress)? {
            hi = mid;
        } else {
            failed_above = Some(plans[mid].label());
            lo = mid + 1;
        }
    }
    for (i, p) in plans.iter().enumerate() {
        if p.judged {
            continue;
        }
        for (e, int8) in [true, false].into_iter().enumerate() {
            let why = match (s.best_bytes(), &failed_above) {
                (Some(best), _) if p.bytes[e] >= best => {
                    format!("cannot beat the {best} bytes already kept")
                }
                (_, Some(f)) if i < lo => format!(
                    "a larger sharing candidate ({f}) is outside the margins, so this smaller \
                     one is taken to be too (the bisection's rule)"
                ),
                _ => format!(
                    "the search's stage-3 budget ({} retrainings) was spent",
                    cfg.max_retrains
                ),
            };
            let c = p
                .meta
                .candidate(p.bytes[e], int8, 0.0, Verdict::NotTried(why));
            s.push(c, None, progress);
        }
    }

    // The quantised BNNs need no stage 3: each smaller than the best kept is judged.
    quantised.sort_by_key(|q| q.file.len());
    for q in quantised {
        let mut c = Candidate {
            method: CandidateMethod::Qbnn,
            k: None,
            codebook: None,
            sigma_bits: Some(q.bits),
            int8_outliers: false,
            bytes: q.file.len() as u64,
            parameters: 0,
            validation: None,
            seconds: q.seconds,
            retrain_steps: 0,
            verdict: Verdict::NotTried(String::new()),
        };
        if let Some(best) = s.best_bytes().filter(|b| c.bytes >= *b) {
            c.verdict = Verdict::NotTried(format!("cannot beat the {best} bytes already kept"));
            s.push(c, None, progress);
            continue;
        }
        let t = Instant::now();
        let (model, _) = crate::qbnn::from_qbnn(&q.data, &device.clone().inner())?;
        let (validation, verdict) = s.judge_against_source(&model)?;
        c.parameters = count_params(&model).trainable;
        c.validation = Some(validation);
        c.seconds += t.elapsed().as_secs_f64();
        c.verdict = verdict;
        s.push(c, Some(ChosenFile::Qbnn(q.file)), progress);
    }
    s.finish(force, cfg, started)
}

/// A quantised BNN, made and encoded.
struct Quantised {
    bits: u8,
    data: QbnnData,
    file: Vec<u8>,
    seconds: f64,
}

fn with_int8(save: &SaveOptions, int8_outliers: bool) -> SaveOptions {
    SaveOptions {
        int8_outliers,
        ..*save
    }
}

/// A sharing candidate after stages 1-2.
struct Planned {
    meta: PlanMeta,
    cfg: CompressConfig,
    /// File bytes with int8 and with `f32` outliers.
    bytes: [u64; 2],
    /// Seconds of its stages 1-2 (the first plan's include the gradient pass).
    seconds: f64,
    /// Taken by stage 3.
    prepared: Option<Prepared>,
    /// Whether it was retrained and judged (its candidates are then in the report).
    judged: bool,
}

impl Planned {
    fn label(&self) -> String {
        format!("{} K = {}", self.meta.method.name(), self.meta.k)
    }
}

/// What a sharing candidate is.
#[derive(Clone, Copy)]
struct PlanMeta {
    method: CandidateMethod,
    k: usize,
    /// Codebook entries after merging (`None` when stages 1-2 failed).
    codebook: Option<usize>,
}

impl PlanMeta {
    fn candidate(
        &self,
        bytes: u64,
        int8_outliers: bool,
        seconds: f64,
        verdict: Verdict,
    ) -> Candidate {
        Candidate {
            method: self.method,
            k: Some(self.k),
            codebook: self.codebook,
            sigma_bits: None,
            int8_outliers,
            bytes,
            parameters: 0,
            validation: None,
            seconds,
            retrain_steps: 0,
            verdict,
        }
    }
}

struct Search<'a> {
    inputs: &'a SearchInputs<'a>,
    cfg: &'a SearchConfig,
    source: ValidationMetrics,
    candidates: Vec<Candidate>,
    /// The file of each candidate that has one (same indices).
    files: Vec<Option<ChosenFile>>,
}

impl Search<'_> {
    fn judge_against_source(&self, model: &Network) -> Result<(ValidationMetrics, Verdict), Error> {
        let m = judge(model, self.inputs, self.cfg, Some(&self.source))?;
        let outside = m.outside(&self.source, &self.cfg.margins);
        Ok(match outside.is_empty() {
            true => (m, Verdict::Within),
            false => (m, Verdict::Outside(outside)),
        })
    }

    /// Retrains `p` (stage 3) and judges its int8-outlier file, then, unless that one is
    /// within the margins, its `f32` file; returns whether either is within.
    fn retrain_and_judge(
        &mut self,
        p: &mut Planned,
        device: &Device,
        progress: &mut dyn SearchProgress,
    ) -> Result<bool, Error> {
        let t = Instant::now();
        let prepared = p.prepared.take().expect("retrained once");
        let compressed = retrain(
            prepared,
            self.inputs.bayes,
            self.inputs.train,
            Some(self.inputs.validation),
            &p.cfg,
            None,
            progress.steps(),
        )?;
        p.judged = true;
        let steps =
            swshare::compress::stage3_steps(&compressed.history, self.inputs.train.num_batches());
        let mut seconds = p.seconds + t.elapsed().as_secs_f64();
        let mut within = false;
        for int8 in [true, false] {
            if within {
                let best = self.best_bytes().unwrap_or_default();
                let c = p.meta.candidate(
                    p.bytes[1],
                    int8,
                    0.0,
                    Verdict::NotTried(format!("cannot beat the {best} bytes already kept")),
                );
                self.push(c, None, progress);
                continue;
            }
            let t = Instant::now();
            let bytes =
                format::to_bytes(&compressed.file, &with_int8(&compressed.save_options, int8))?;
            // The model a user of the file gets (int8 outliers are lossy).
            let (model, _) = swshare::burn_edges::from_swb::<ModelConfig>(
                &format::from_bytes(&bytes)?,
                &device.clone().inner(),
            )?;
            let (validation, verdict) = self.judge_against_source(&model)?;
            within = verdict == Verdict::Within;
            let mut c = p.meta.candidate(
                bytes.len() as u64,
                int8,
                std::mem::take(&mut seconds) + t.elapsed().as_secs_f64(),
                verdict,
            );
            c.codebook = Some(compressed.plan.k());
            c.parameters = count_params(&model).trainable;
            c.validation = Some(validation);
            c.retrain_steps = steps;
            self.push(c, Some(ChosenFile::Swb(bytes)), progress);
        }
        Ok(within)
    }

    fn best(&self) -> Option<&Candidate> {
        self.candidates
            .iter()
            .filter(|c| c.qualifies())
            .min_by_key(|c| c.bytes)
    }

    fn best_bytes(&self) -> Option<u64> {
        self.best().map(|c| c.bytes)
    }

    fn push(&mut self, c: Candidate, file: Option<ChosenFile>, progress: &mut dyn SearchProgress) {
        // Only files that may be written are kept: a qualifying one, or any evaluated one
        // while none qualifies (the nearest is written with --force).
        let keep = c.validation.is_some();
        self.candidates.push(c);
        self.files.push(if keep { file } else { None });
        let c = self.candidates.last().expect("just pushed");
        progress.candidate(c, self.best());
    }

    fn finish(
        mut self,
        force: bool,
        cfg: &SearchConfig,
        started: Instant,
    ) -> Result<(SearchReport, Option<ChosenFile>), Error> {
        let chosen = self
            .candidates
            .iter()
            .enumerate()
            .filter(|(_, c)| c.qualifies())
            .min_by_key(|(_, c)| c.bytes)
            .map(|(i, _)| i);
        let (written, within) = match chosen {
            Some(i) => {
                self.candidates[i].verdict = Verdict::Chosen;
                (Some(i), true)
            }
            None if force => {
                let nearest = self
                    .candidates
                    .iter()
                    .enumerate()
                    .filter_map(|(i, c)| c.validation.map(|v| (i, v)))
                    .min_by(|(ia, a), (ib, b)| {
                        let (ea, eb) = (
                            a.excess(&self.source, &cfg.margins),
                            b.excess(&self.source, &cfg.margins),
                        );
                        ea.total_cmp(&eb)
                            .then(self.candidates[*ia].bytes.cmp(&self.candidates[*ib].bytes))
                    })
                    .map(|(i, _)| i);
                if let Some(i) = nearest {
                    self.candidates[i].verdict = Verdict::Nearest;
                }
                (nearest, false)
            }
            None => (None, false),
        };
        let file = written.and_then(|i| self.files[i].take());
        let report = SearchReport {
            config: cfg.clone(),
            source: self.source,
            source_parameters: count_params(self.inputs.bayes).trainable,
            validation_images: self.inputs.validation_images,
            candidates: self.candidates,
            written,
            within_margins: within,
            seconds: started.elapsed().as_secs_f64(),
        };
        Ok((report, file))
    }
}

/// `model`'s validation metrics. Against `source`, the OOD pass is skipped when accuracy,
/// NLL or ECE already break their margins (it cannot change the verdict).
fn judge(
    model: &Network,
    inputs: &SearchInputs<'_>,
    cfg: &SearchConfig,
    source: Option<&ValidationMetrics>,
) -> Result<ValidationMetrics, Error> {
    let device = model.devices().first().cloned().unwrap_or_default();
    device.seed(EVALUATION_SEED);
    let pred = predict(model, inputs.validation, cfg.samples)?;
    let first = ValidationMetrics::of(&evaluation_of(&pred, None, cfg.samples)?);
    if let Some(s) = source
        && !first.outside(s, &cfg.margins).is_empty()
    {
        return Ok(first);
    }
    let ood = predict(model, inputs.validation_ood, cfg.samples)?;
    Ok(ValidationMetrics::of(&evaluation_of(
        &pred,
        Some(&ood.predictive),
        cfg.samples,
    )?))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn metrics(accuracy: f64, nll: f64, ece: f64, auroc: f64) -> ValidationMetrics {
        ValidationMetrics {
            accuracy,
            nll,
            ece,
            ood_auroc: Some(auroc),
        }
    }

    #[test]
    fn the_ladder_halves_the_configured_k_down_to_the_smallest() {
        let cfg = SearchConfig::default();
        assert_eq!(cfg.ladder(100), vec![25, 50, 100]);
        assert_eq!(cfg.ladder(2000), vec![31, 62, 125, 250, 500, 1000, 2000]);
        assert_eq!(cfg.ladder(30), vec![30]);
        assert_eq!(cfg.ladder(10), vec![10]);
    }

    #[test]
    fn each_margin_is_held_and_named() {
        let src = metrics(0.90, 0.30, 0.010, 0.80);
        let m = Margins::PROTOCOL;
        assert!(
            metrics(0.8971, 0.309, 0.0119, 0.791)
                .outside(&src, &m)
                .is_empty()
        );
        let out = metrics(0.8960, 0.311, 0.0121, 0.789).outside(&src, &m);
        assert_eq!(out.len(), 4, "{out:?}");
        assert!(out[0].starts_with("accuracy 89.60% < 89.70%"), "{out:?}");
        assert!(out[1].starts_with("NLL"), "{out:?}");
        assert!(out[2].starts_with("ECE"), "{out:?}");
        assert!(out[3].starts_with("OOD AUROC"), "{out:?}");
        // Better than the source is always within.
        assert!(metrics(0.95, 0.2, 0.0, 0.9).outside(&src, &m).is_empty());
    }

    #[test]
    fn margins_that_are_negative_or_not_finite_are_refused_by_name() {
        for (set, flag) in [
            (
                Margins {
                    nll: -0.1,
                    ..Margins::PROTOCOL
                },
                "--margin-nll",
            ),
            (
                Margins {
                    ece: f64::NAN,
                    ..Margins::PROTOCOL
                },
                "--margin-ece",
            ),
            (
                Margins {
                    accuracy_points: f64::INFINITY,
                    ..Margins::PROTOCOL
                },
                "--margin-accuracy",
            ),
        ] {
            let e = set.check().unwrap_err().to_string();
            assert!(e.contains(flag) && e.contains("finite and >= 0"), "{e}");
        }
        Margins::PROTOCOL.check().unwrap();
    }

    #[test]
    fn the_nearest_candidate_is_the_one_least_past_its_worst_margin() {
        let src = metrics(0.90, 0.30, 0.010, 0.80);
        let m = Margins::PROTOCOL;
        // Twice the NLL margin over, against once the ECE margin over.
        let a = metrics(0.90, 0.33, 0.010, 0.80).excess(&src, &m);
        let b = metrics(0.90, 0.30, 0.014, 0.80).excess(&src, &m);
        assert!((a - 2.0).abs() < 1e-9 && (b - 1.0).abs() < 1e-9, "{a} {b}");
        assert_eq!(metrics(0.9, 0.3, 0.01, 0.8).excess(&src, &m), 0.0);
    }

    #[test]
    fn the_search_file_names_verdicts_in_kebab_case() {
        let v = serde_json::to_value(Verdict::NotTried("budget".into())).unwrap();
        assert_eq!(v, serde_json::json!({"not-tried": "budget"}));
        assert_eq!(
            serde_json::to_value(Verdict::Chosen).unwrap(),
            serde_json::json!("chosen")
        );
        assert_eq!(
            serde_json::to_value(CandidateMethod::MuOnly).unwrap(),
            serde_json::json!("mu-only")
        );
    }
}
