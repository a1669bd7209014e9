//! The plan of a run without its data (`cargo xtask reproduce --dry-run`): every stage in
//! order with its epochs and the images it will process, from the data sets' published sizes.

use bnn_data::{DataSource, DatasetId, FolderImages, Split};
use serde::{Deserialize, Serialize};
use swshare::compress::CompressConfig;
use swshare::retrain_stop::RetrainStop;

use super::{TableId, TablesConfig, variants};
use crate::baselines::ensemble::member_config;
use crate::method::Method;
use crate::setup::Setup;

/// `(training, test)` examples of each data set as published: MNIST and Fashion-MNIST
/// 60,000 / 10,000; CIFAR-10 and CIFAR-100 50,000 / 10,000; SVHN (cropped digits, without
/// `extra`) 73,257 / 26,032; ImageNet-1k (ILSVRC2012) 1,281,167 / 50,000.
pub fn dataset_sizes(id: DatasetId) -> (usize, usize) {
    match id {
        DatasetId::Mnist | DatasetId::FashionMnist => (60_000, 10_000),
        DatasetId::Cifar10 | DatasetId::Cifar100 => (50_000, 10_000),
        DatasetId::Svhn => (73_257, 26_032),
        DatasetId::ImageNet => (1_281_167, 50_000),
    }
}

/// One stage of the plan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlannedStage {
    /// Stage directory name under `out/stages/` (or `timing`).
    pub stage: String,
    /// What it does.
    pub work: String,
    /// Training epochs (0 for stages that only evaluate).
    pub epochs: usize,
    /// Mini-batch size of the training (0 without training).
    pub batch_size: usize,
    /// Images through training: epochs x training examples.
    pub train_images: u64,
    /// Images through evaluation: forward passes per image x (test + OOD examples).
    pub eval_images: u64,
}

/// The plan of a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    /// Training examples used.
    pub train_examples: usize,
    /// Test examples used.
    pub test_examples: usize,
    /// OOD examples used (0 without an OOD set).
    pub ood_examples: usize,
    /// The stages, in the order the run makes them.
    pub stages: Vec<PlannedStage>,
}

impl Plan {
    /// Total training images.
    pub fn train_images(&self) -> u64 {
        self.stages.iter().map(|s| s.train_images).sum()
    }

    /// Total evaluation images.
    pub fn eval_images(&self) -> u64 {
        self.stages.iter().map(|s| s.eval_images).sum()
    }

    /// The plan as a Markdown table with totals.
    pub fn markdown(&self) -> String {
        let mut s = format!(
            "{} training, {} test and {} OOD examples.\n\n| Stage | Work | Epochs | Batch | Training images | Evaluation images |\n|---|---|---|---|---|---|\n",
            self.train_examples, self.test_examples, self.ood_examples
        );
        for st in &self.stages {
            s.push_str(&format!(
                "| {} | {} | {} | {} | {} | {} |\n",
                st.stage, st.work, st.epochs, st.batch_size, st.train_images, st.eval_images
            ));
        }
        s.push_str(&format!(
            "| total | | | | {} | {} |\n",
            self.train_images(),
            self.eval_images()
        ));
        s
    }
}

/// `(training, test)` examples of `source`: a preset's published sizes ([`dataset_sizes`]),
/// or a user's data set counted by reading it, a table's rows with its target columns
/// `targets` (`(0, 0)` when it cannot be read: the run itself names the error).
pub fn source_sizes(source: &DataSource, targets: &[String]) -> (usize, usize) {
    if let Some(id) = source.preset() {
        return dataset_sizes(id);
    }
    if source.is_regression().unwrap_or(false) {
        return source.load_tabular(targets).map_or((0, 0), |t| {
            (t.train.len(), t.test.as_ref().map_or(0, |d| d.len()))
        });
    }
    let count = |split: Split| {
        source
            .load(split, FolderImages::default())
            .map_or(0, |d| d.len())
    };
    let test = match source.has_test() {
        Ok(true) => count(Split::Test),
        _ => 0,
    };
    (count(Split::Train), test)
}

/// Adds `stage` unless a stage of its name is planned already (two tables may share one).
fn push_once(stages: &mut Vec<PlannedStage>, stage: PlannedStage) {
    if !stages.iter().any(|s| s.stage == stage.stage) {
        stages.push(stage);
    }
}

/// The stages a run of `tables` (the main experiment alone when empty) will make for `setup`,
/// without opening any data of a preset (a user's data set is read to count its images,
/// [`source_sizes`]).
pub fn plan(setup: &Setup, cfg: &TablesConfig, tables: &[TableId]) -> Plan {
    let (train, test) = source_sizes(&setup.dataset, &setup.targets);
    let cap = |n: usize, subset: Option<usize>| subset.map_or(n, |s| s.min(n));
    // The validation split is held out first; the training subset is drawn from the rest.
    let train = cap(
        train.saturating_sub(setup.validation.size),
        setup.train_subset,
    );
    let test = cap(test, setup.test_subset);
    let ood = setup.ood.as_ref().map_or(0, |(id, _)| {
        // The bundled OOD digits are MNIST's 10,000 test images.
        cap(dataset_sizes(*id).1, setup.test_subset)
    });
    let eval = |passes: usize| (passes * (test + ood)) as u64;
    let corrupt = |passes: usize| (passes * test * setup.corruptions.len()) as u64;
    let s = setup.samples;
    let trained =
        |stage: &str, work: &str, tc: &bnn_train::TrainConfig, eval_images: u64| PlannedStage {
            stage: stage.into(),
            work: work.into(),
            epochs: tc.epochs,
            batch_size: tc.batch_size,
            train_images: (tc.epochs * train) as u64,
            eval_images,
        };
    let evaluated = |stage: String, work: String, eval_images: u64| PlannedStage {
        stage,
        work,
        epochs: 0,
        batch_size: 0,
        train_images: 0,
        eval_images,
    };
    let mut stages = vec![
        trained(
            Method::Deterministic.name(),
            "train, evaluate",
            &setup.deterministic,
            eval(1) + corrupt(1),
        ),
        trained(
            Method::Bbb.name(),
            "train Bayes by Backprop, evaluate",
            &setup.bbb,
            eval(s) + corrupt(s),
        ),
        trained(
            Method::Gbnn2d.name(),
            match setup.compress.retrain_stop {
                RetrainStop::Epochs => "stages 1-2, retrain, evaluate",
                // The epochs and images are then a ceiling.
                RetrainStop::ConfidenceRecovered { .. } => {
                    "stages 1-2, retrain (at most; ends once BBB's confidence is recovered), evaluate"
                }
            },
            &setup.compress.retrain,
            eval(s) + corrupt(s),
        ),
    ];
    // Two tables may show the same quantised rows, or the same 2DGBNN configuration: each is
    // planned once.
    let quant_stages = |stages: &mut Vec<PlannedStage>| {
        for b in &cfg.sigma_bits {
            push_once(
                stages,
                evaluated(
                    format!("qbnn-sigma{b}"),
                    format!("quantise the BBB model (sigma {b} bits), evaluate"),
                    eval(s),
                ),
            );
        }
    };
    let variant_stages = |stages: &mut Vec<PlannedStage>,
                          planned: &mut Vec<CompressConfig>,
                          t: TableId,
                          prefix: &str| {
        for v in variants(setup, cfg, t) {
            if planned.contains(&v.compress) {
                continue;
            }
            stages.push(trained(
                &v.stage,
                &format!("{prefix}{}: stages 1-2, retrain, evaluate", v.label),
                &v.compress.retrain,
                eval(s),
            ));
            planned.push(v.compress);
        }
    };
    let mut planned = vec![setup.compress.clone()];
    for &t in tables {
        match t {
            TableId::Quant => {
                quant_stages(&mut stages);
            }
            TableId::EqualSize => {
                variant_stages(&mut stages, &mut planned, t, "");
                stages.push(trained(
                    crate::experiment::UNSHARED_RETRAIN_STAGE,
                    "retrain the BBB model with 2DGBNN's stage-3 settings, no sharing, evaluate",
                    &setup.compress.retrain,
                    eval(s),
                ));
                for (stage, what) in crate::experiment::SNR_PRUNE_STAGES
                    .into_iter()
                    .zip(["parameters", "file bytes"])
                {
                    stages.push(trained(
                        stage,
                        &format!(
                            "prune the BBB model by |mu|/sigma to 2DGBNN's {what}, retrain as \
                             stage 3, evaluate"
                        ),
                        &setup.compress.retrain,
                        eval(s),
                    ));
                }
                quant_stages(&mut stages);
            }
            TableId::Ensemble => {
                for i in 1..cfg.ensemble_members {
                    stages.push(trained(
                        &format!("ensemble-{i}"),
                        "train a member",
                        &member_config(&setup.deterministic, i),
                        0,
                    ));
                }
                stages.push(evaluated(
                    Method::Ensemble.name().into(),
                    format!("evaluate {} members", cfg.ensemble_members),
                    eval(cfg.ensemble_members),
                ));
            }
            TableId::Ablation | TableId::GmmK | TableId::TauW | TableId::Merge => {
                variant_stages(&mut stages, &mut planned, t, "2DGBNN ");
            }
            TableId::Timing => {
                let n = cfg.timing.images.min(test) as u64;
                let ensemble = if tables.contains(&TableId::Ensemble) {
                    cfg.ensemble_members
                } else {
                    0
                };
                let passes = (1 + 2 * s + ensemble) as u64 * (cfg.timing.repeats as u64 + 1);
                stages.push(evaluated(
                    "timing".into(),
                    "measure MC inference speed".into(),
                    n * passes,
                ));
            }
            TableId::Auto => {
                let sc = swbnn_ops::search::SearchConfig::default();
                stages.push(PlannedStage {
                    ..trained(
                        crate::tables::auto::AUTO_STAGE,
                        &format!(
                            "compress --auto: stages 1-2 of every candidate, at most {} \
                             retrained, each judged on validation; the chosen file evaluated",
                            sc.max_retrains
                        ),
                        &setup.compress.retrain,
                        eval(s),
                    )
                });
            }
            TableId::Main => {}
        }
    }
    Plan {
        train_examples: train,
        test_examples: test,
        ood_examples: ood,
        stages,
    }
}
