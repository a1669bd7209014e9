//! `swbnn`: train, compress, evaluate and inspect weight-shared Bayesian neural networks.

// Training allocates and frees many tensor buffers of a few megabytes per step; glibc's malloc
// returns them to the kernel and page-faults them back in (7 % of a Bayesian MLP step in perf);
// mimalloc keeps them (docs/benchmarks.md).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// mimalloc's `mi_option_purge_delay` (the index in its option enum, mimalloc 2 and 3).
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// Keeps freed memory committed instead of returning it to the kernel 10 ms after a free:
/// every training step frees and reallocates the same buffers, and each return cost fresh
/// (huge-)page faults and zeroing on the next step, 15 % of a ResNet-20 step (perf,
/// `docs/benchmarks.md`).
fn keep_freed_memory() {
    // SAFETY: sets a process-wide allocator option; called once at the start of main.
    unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, -1) };
}

mod cli_interop;
mod cli_plot;
mod cli_warmup;

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use bnn_data::DataSource;
use bnn_layers::{Estimator, device_by_name};
use bnn_models::Arch;
use bnn_train::{DataParallel, EpochStats, Observer, StepInfo};
use clap::{Parser, Subcommand};
use indicatif::{ProgressBar, ProgressStyle};
use swbnn::args;
use swbnn_harness::experiment::Progress;
use swbnn_harness::results::Row;
use swbnn_ops::ValidationSplit;
use swbnn_ops::commands::{
    self, CalibrateRequest, CompressRequest, CompressSettings, EvalRequest, Scaling, TrainKind,
    TrainRequest,
};
use swbnn_ops::defaults::BbbRecipe;
use swbnn_ops::search::{Candidate, Margins, SearchConfig, SearchProgress, progress_line};

#[derive(Parser)]
#[command(
    name = "swbnn",
    version,
    about = "Stochastic weight sharing for Bayesian neural networks (2DGBNN)"
)]
struct Cli {
    /// Backend: flex (default CPU), ndarray, cpu, wgpu, cuda or cuda:N (each if compiled in).
    #[arg(long, global = true, default_value = "flex")]
    backend: String,
    /// Threads for the CPU backends (default: all cores).
    #[arg(long, global = true, value_parser = args::threads)]
    threads: Option<usize>,
    /// Print results as JSON.
    #[arg(long, global = true)]
    json: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Train a deterministic or Bayes-by-Backprop model; checkpoints every epoch into --out.
    Train {
        /// Data set: mnist, fashion-mnist, cifar-10, cifar-100, svhn or imagenet (looked for in
        /// --data, $SWBNN_DATA, the user cache, then /usr/share/datasets); or your own:
        /// folder:DIR (class sub-folders of PNG/JPEG images; DIR/train and DIR/test for the two
        /// splits) or npz:FILE (x_train, y_train, optionally x_test, y_test). Classes, channels
        /// and size come from the data; its normalisation is measured and stored with the model.
        /// Regression: csv:TRAIN.csv[,test=TEST.csv] (a header row, numeric columns; the
        /// targets named by --target), or npz:FILE whose y_train is floating point; features
        /// and targets are standardised on the training rows and the statistics stored.
        #[arg(long, value_name = "NAME|folder:DIR|npz:FILE|csv:FILE", value_parser = args::DataSourceParser)]
        dataset: DataSource,
        /// A target column of a csv: data set (repeatable, in output order); every other column
        /// is a feature.
        #[arg(long = "target", value_name = "NAME")]
        targets: Vec<String>,
        /// A regression network's noise model: heteroscedastic (the default: a standard
        /// deviation per input and target) or homoscedastic (one per target).
        #[arg(long, value_parser = args::noise())]
        noise: Option<bnn_models::Noise>,
        /// Resize the images of a folder: data set to this square size in pixels (default: the
        /// first image's size; images of mixed sizes need it). At most 1024.
        #[arg(long, value_parser = args::image_size)]
        image_size: Option<usize>,
        /// Architecture: mlp, lenet5, resnet18, resnet20, resnet50, resnet101, wrn28-10,
        /// vit-b16 or vit-tiny.
        #[arg(long)]
        arch: Arch,
        /// The MLP's hidden layers' widths, comma-separated (default 400,400; --arch mlp
        /// only), e.g. 50 for the one hidden layer of 50 units of the UCI regression benchmarks.
        #[arg(long, value_name = "WIDTHS", value_delimiter = ',')]
        mlp_hidden: Option<Vec<usize>>,
        /// A deterministic network, or a Bayesian one trained by Bayes by Backprop.
        #[arg(long, value_parser = args::train_kind())]
        kind: TrainKind,
        /// Training epochs; a checkpoint is committed after each.
        #[arg(long, default_value_t = 5, value_parser = args::epochs)]
        epochs: usize,
        /// Directory for model.bpk, config.json and the checkpoint state.
        #[arg(long)]
        out: PathBuf,
        /// Start from a trained model directory (with --kind bayesian only): a deterministic
        /// model's weights become the Bayesian means; a Bayesian model (`swbnn train`, `swbnn
        /// import`) is continued as it is, means, sigmas and batch norm. Its architecture must
        /// be --arch.
        #[arg(long)]
        from: Option<PathBuf>,
        /// How a Bayesian model is trained (with --kind bayesian only): `pretrained` (the
        /// default: Adam, the paper's sigma initialisation) or `reference` (the PyTorch
        /// reference recipe: SGD under a one-cycle cosine schedule, every rho -6), as
        /// `cargo xtask reproduce --recipe` trains its BBB stage.
        #[arg(long, value_parser = args::recipe())]
        recipe: Option<BbbRecipe>,
        /// Also write the Bayesian model as it starts, before any training (after --from), to
        /// this .safetensors file in bayesian-torch's names: the start that
        /// `benches/peers/torch_reference_bbb.py --init` trains from, so that both sides train
        /// from the same initial net. An existing file is refused.
        #[arg(long, value_name = "FILE")]
        save_init: Option<PathBuf>,
        /// Continue from the last checkpoint in --out. Never starts over: an --out without a
        /// checkpoint (its state.json) is an error, as is a checkpoint of another run. Without
        /// --resume a fresh run starts, and an --out holding a model is refused.
        #[arg(long)]
        resume: bool,
        /// The data folder (used alone: a folder without the data set is an error).
        #[arg(long)]
        data: Option<PathBuf>,
        /// Use a stratified subset of the training set (more than it has is an error).
        #[arg(long, value_parser = args::positive)]
        subset: Option<usize>,
        /// Training images held out as the validation split (0: none), drawn stratified with
        /// a fixed seed before --subset picks from the rest; never trained on. `swbnn train`
        /// and `swbnn compress` hold out the same images for the same number.
        #[arg(long, default_value_t = ValidationSplit::DEFAULT_SIZE, value_parser = args::count)]
        validation: usize,
        /// Gradient estimator of the Bayesian layers: reparam, local-reparam or flipout.
        #[arg(long, default_value = "reparam")]
        estimator: String,
        /// Seed of the initialisation, the data order and the weight noise: the same seed,
        /// backend and thread count give the same model.
        #[arg(long, default_value_t = 0)]
        seed: u64,
        /// Data-parallel training on these devices of this machine, one replica each, e.g.
        /// cuda:0,cuda:1 (NCCL all-reduce). A CPU backend may be repeated (flex,flex) to
        /// simulate replicas in turn. Each batch of 128 is split between the replicas.
        #[arg(long, value_name = "LIST")]
        devices: Option<String>,
    },
    /// Run 2DGBNN stages 1-3 on a trained Bayesian model directory and save a .swb file.
    Compress {
        /// Directory written by `swbnn train --kind bayesian`.
        #[arg(long)]
        model: PathBuf,
        /// The data set the model was trained on (its training split retrains stage 3):
        /// mnist, fashion-mnist, cifar-10, cifar-100, svhn, imagenet, folder:DIR or npz:FILE.
        #[arg(long, value_name = "NAME|folder:DIR|npz:FILE", value_parser = args::DataSourceParser)]
        dataset: DataSource,
        /// Output .swb file (an existing one only with --force), or `-` for standard output
        /// (the report then goes to standard error).
        #[arg(long)]
        out: PathBuf,
        /// Replace an existing --out (never a file of the input model's directory).
        #[arg(long)]
        force: bool,
        /// Number of GMM components: at most 32768 (the fit's time grows with K: 51 s at
        /// K = 32000 on a 478k-weight MLP on 2 cores, 9 s at the default), and at most the
        /// inlier weights.
        #[arg(long, value_parser = args::k)]
        k: Option<usize>,
        /// A compression config JSON file (`{"sharing": {...}, "retrain": {...},
        /// "retrain_stop": ..., "save": {...}}`; missing fields take the library's defaults,
        /// the paper's fixed stage-3 epochs among them).
        #[arg(long)]
        config: Option<PathBuf>,
        /// Most retraining epochs (stage 3); default: the config file's, else 2. Without
        /// --config, stage 3 ends earlier once the model is as confident as the BNN it came
        /// from (the presets' rule, docs/method.md).
        #[arg(long, value_parser = args::epochs)]
        epochs: Option<usize>,
        /// The data folder (used alone: a folder without the data set is an error).
        #[arg(long)]
        data: Option<PathBuf>,
        /// Use a stratified subset of the training set (more than it has is an error).
        #[arg(long, value_parser = args::positive)]
        subset: Option<usize>,
        /// Training images held out as the validation split (0: none), drawn stratified with
        /// a fixed seed before --subset picks from the rest; never trained on. `swbnn train`
        /// and `swbnn compress` hold out the same images for the same number.
        #[arg(long, default_value_t = ValidationSplit::DEFAULT_SIZE, value_parser = args::count)]
        validation: usize,
        /// Search sizes and methods on the validation split: 2DGBNN and 1-D sharing over a
        /// ladder of K up to the configured one (int8 outliers or not), and the quantised
        /// BNNs; write the smallest file whose validation metrics stay within the margins of
        /// the source BNN, and the whole search beside --out (`m.swb` -> `m.search.json`).
        #[arg(long, conflicts_with = "k")]
        auto: bool,
        /// --auto: accuracy the candidate may lose, in percentage points.
        #[arg(long, requires = "auto", default_value_t = Margins::PROTOCOL.accuracy_points, value_parser = args::margin)]
        margin_accuracy: f64,
        /// --auto: NLL the candidate may gain.
        #[arg(long, requires = "auto", default_value_t = Margins::PROTOCOL.nll, value_parser = args::margin)]
        margin_nll: f64,
        /// --auto: ECE (15 bins) the candidate may gain.
        #[arg(long, requires = "auto", default_value_t = Margins::PROTOCOL.ece, value_parser = args::margin)]
        margin_ece: f64,
        /// --auto: AUROC against the tile-shuffled validation images the candidate may lose.
        #[arg(long, requires = "auto", default_value_t = Margins::PROTOCOL.ood_auroc, value_parser = args::margin)]
        margin_ood_auroc: f64,
        /// --auto: Monte Carlo samples of each validation pass.
        #[arg(long, requires = "auto", default_value_t = SearchConfig::default().samples, value_parser = args::samples)]
        samples: usize,
        /// --auto: most sharing candidates retrained, each a step of the bisection over the
        /// sharing candidates' sizes (stage 3 is the search's cost).
        #[arg(long, requires = "auto", default_value_t = SearchConfig::default().max_retrains, value_parser = args::count)]
        max_retrains: usize,
    },
    /// Evaluate a model (.swb or .qbnn file, or a training directory): accuracy, NLL, ECE,
    /// OOD AUROC.
    Eval {
        /// A .swb or .qbnn file, or a directory with model.bpk and config.json.
        model: PathBuf,
        /// The data set whose test split is evaluated: mnist, fashion-mnist, cifar-10,
        /// cifar-100, svhn, imagenet, folder:DIR or npz:FILE (images are resized and
        /// normalised as the model records).
        #[arg(long, value_name = "NAME|folder:DIR|npz:FILE", value_parser = args::DataSourceParser)]
        dataset: DataSource,
        /// Out-of-distribution data set: a preset (--ood-dir gives its directory), or
        /// folder:DIR or npz:FILE (its test split, else all its images).
        #[arg(long, value_name = "NAME|folder:DIR|npz:FILE", value_parser = args::DataSourceParser)]
        ood: Option<DataSource>,
        /// The OOD set's folder: its test split in the standard layout, or
        /// images-idx3-ubyte.gz and labels-idx1-ubyte.gz (the layout of the 10,000-digit MNIST
        /// sample). Default: --data, then the usual search.
        #[arg(long, requires = "ood")]
        ood_dir: Option<PathBuf>,
        /// Monte-Carlo samples (1 to 1,000: memory does not grow with them, time does, and
        /// 1,000 puts the Monte Carlo error of a probability below 0.016); samples times the
        /// images evaluated at most 50 million.
        #[arg(long, default_value_t = 30, value_parser = args::samples)]
        samples: usize,
        /// The data folder (used alone: a folder without the data set is an error).
        #[arg(long)]
        data: Option<PathBuf>,
        /// Use a stratified subset of the test set (more than it has is an error) and of the
        /// OOD set (cut to it when larger).
        #[arg(long, value_parser = args::positive)]
        subset: Option<usize>,
        /// Seed of the Monte-Carlo weight samples: the same seed gives the same numbers.
        #[arg(long, default_value_t = 0)]
        seed: u64,
        /// Also evaluate on the 15 corrupted test sets (rotation, Gaussian noise, contrast,
        /// translation, blur; severities 1-3).
        #[arg(long)]
        corruptions: bool,
        /// Also report the metrics at the model's fitted temperature (`swbnn calibrate`),
        /// beside the raw ones. A model without one is an error.
        #[arg(long, conflicts_with = "temperature")]
        calibrated: bool,
        /// Also report the metrics at this temperature (0.05 to 20), beside the raw ones.
        #[arg(long, value_parser = args::temperature)]
        temperature: Option<f64>,
    },
    /// Fit a model's temperature (post-hoc calibration) on the validation split, by NLL, and
    /// store it with the model: in a .swb or .qbnn file, or as calibration.json in a model
    /// directory.
    Calibrate {
        /// A .swb or .qbnn file, or a directory with model.bpk and config.json.
        model: PathBuf,
        /// The data set the model was trained on (the validation split is held out of its
        /// training split): mnist, fashion-mnist, cifar-10, cifar-100, svhn, imagenet,
        /// folder:DIR or npz:FILE.
        #[arg(long, value_name = "NAME|folder:DIR|npz:FILE", value_parser = args::DataSourceParser)]
        dataset: DataSource,
        /// The data folder (used alone: a folder without the data set is an error).
        #[arg(long)]
        data: Option<PathBuf>,
        /// Training images held out as the validation split, as `swbnn train --validation`
        /// held them out: by default the split the model records (models trained before the
        /// record: 5,000); a split it did not hold out, or fewer than 500 images, is an error.
        /// For a model in a run directory (a `setup.json` at or above it), the run's split; a
        /// different number is an error.
        #[arg(long, value_parser = args::positive)]
        validation: Option<usize>,
        /// Seed of the hold-out (default: the fixed seed every run and `swbnn train` use; in
        /// a run directory, the run's).
        #[arg(long)]
        validation_seed: Option<u64>,
        /// Monte-Carlo samples per image (one pass for a deterministic network).
        #[arg(long, default_value_t = 30, value_parser = args::samples)]
        samples: usize,
        /// Seed of the Monte-Carlo weight samples: the same seed gives the same temperature.
        #[arg(long, default_value_t = 0)]
        seed: u64,
        /// Also fit split-conformal prediction sets (adaptive prediction sets) that hold the
        /// true class with this probability (strictly between 0 and 1, e.g. 0.9), on the same
        /// validation split, after the temperature; `swbnn eval` then reports their coverage
        /// and size. Without it, a conformal calibration the model held is removed.
        #[arg(long, value_name = "LEVEL")]
        conformal: Option<f64>,
    },
    /// Draw a figure (reliability, ood, weights, per-class, corruptions, size-quality, search)
    /// of a run directory, a .swb file, a training directory or a `*.search.json`, as PNG or
    /// SVG.
    Plot(cli_plot::PlotArgs),
    /// Read a PyTorch state dict (.pt, .pth, .safetensors; bayesian-torch, blitz, torchbnn or a
    /// deterministic net) into a model directory that eval, compress and train --from take.
    Import(cli_interop::ImportArgs),
    /// Write a model (.swb or model directory) as .safetensors for PyTorch's load_state_dict.
    Export(cli_interop::ExportArgs),
    /// Run a model once at the given shapes on a GPU backend (--backend wgpu or cuda), so that
    /// the GPU kernel caches hold its compiled kernels and autotune results for later runs;
    /// prints where the caches are and how many kernels were compiled.
    Warmup(cli_warmup::WarmupArgs),
    /// Print a .swb file's statistics.
    Inspect {
        /// The .swb file.
        model: PathBuf,
    },
}

struct Bars {
    bar: Option<ProgressBar>,
    quiet: bool,
}

impl Bars {
    fn new(quiet: bool) -> Self {
        Self { bar: None, quiet }
    }
}

impl Observer for Bars {
    fn on_step(&mut self, info: &StepInfo) {
        if self.quiet {
            return;
        }
        let bar = self.bar.get_or_insert_with(|| {
            let b = ProgressBar::new(info.steps as u64);
            b.set_style(
                ProgressStyle::with_template("{prefix} [{bar:30}] {pos}/{len} {msg} ETA {eta}")
                    .unwrap_or_else(|_| ProgressStyle::default_bar()),
            );
            b
        });
        bar.set_prefix(format!("epoch {}", info.epoch + 1));
        bar.set_position(info.step as u64 + 1);
        bar.set_message(format!(
            "loss {:.4} {:.0} img/s",
            info.loss, info.images_per_s
        ));
    }

    fn on_epoch(&mut self, s: &EpochStats) {
        if let Some(b) = self.bar.take() {
            b.finish_and_clear();
        }
        if !self.quiet {
            eprintln!("{}", swbnn_ops::commands::epoch_line(s));
        }
    }
}

/// `compress --auto`'s progress: each candidate's verdict and the best so far, and the
/// stage-3 bars.
struct SearchBars<'a> {
    bars: &'a mut Bars,
}

impl SearchProgress for SearchBars<'_> {
    fn candidate(&mut self, c: &Candidate, best: Option<&Candidate>) {
        if self.bars.quiet {
            return;
        }
        eprintln!("{}", progress_line(c, best));
    }

    fn steps(&mut self) -> &mut dyn Observer {
        self.bars
    }
}

impl Progress for Bars {
    fn stage(&mut self, name: &str) {
        if !self.quiet {
            eprintln!("== {name}");
        }
    }

    fn row(&mut self, r: &Row) {
        if !self.quiet {
            eprintln!(
                "{} {}: acc {:.4} nll {:.4} ece {:.4}",
                r.arch, r.method, r.accuracy, r.nll, r.ece
            );
        }
    }
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {}", args::error_message(&e));
            ExitCode::FAILURE
        }
    }
}

fn run() -> Result<()> {
    keep_freed_memory();
    let cli = Cli::parse();
    if let Some(t) = cli.threads {
        rayon_threads(t)?;
    }
    if let Command::Warmup(args) = &cli.command {
        // Before any device is opened: the warm-up sets up the caches with its kernel log.
        let report = swbnn_ops::warmup::run(&args.request(), &cli.backend)?;
        if cli.json {
            println!("{}", serde_json::to_string(&report)?);
        } else {
            for line in report.lines() {
                println!("{line}");
            }
        }
        return Ok(());
    }
    let device = device_by_name(&cli.backend)?;
    let mut bars = Bars::new(cli.json);
    match cli.command {
        Command::Train {
            dataset,
            targets,
            noise,
            image_size,
            arch,
            mlp_hidden,
            kind,
            epochs,
            out,
            from,
            recipe,
            save_init,
            resume,
            data,
            subset,
            validation,
            estimator,
            seed,
            devices,
        } => {
            if let Some(list) = &devices {
                let parallel =
                    DataParallel::parse(list).with_context(|| format!("--devices {list}"))?;
                let backend = |n: &str| n.split(':').next().unwrap_or(n).to_string();
                if cli.backend != "flex" && backend(&cli.backend) != backend(&parallel.names()[0]) {
                    bail!(
                        "--backend {} and --devices {list} name different backends; --devices alone picks the devices",
                        cli.backend
                    );
                }
            }
            let estimator = Estimator::from_name(&estimator).with_context(|| {
                format!("unknown estimator {estimator} (reparam, local-reparam, flipout)")
            })?;
            let request = TrainRequest {
                targets,
                noise,
                mlp_hidden,
                image_size,
                epochs,
                from,
                recipe,
                save_init,
                resume,
                data_dir: data,
                subset,
                validation: ValidationSplit::new(validation),
                estimator,
                seed,
                devices,
                ..TrainRequest::new(dataset, arch, kind, out)
            };
            let history = commands::train(&request, &device, &mut bars)?;
            if cli.json {
                println!("{}", serde_json::to_string(&history)?);
            }
        }
        Command::Compress {
            model,
            dataset,
            out,
            force,
            k,
            config,
            epochs,
            data,
            subset,
            validation,
            auto,
            margin_accuracy,
            margin_nll,
            margin_ece,
            margin_ood_auroc,
            samples,
            max_retrains,
        } => {
            let request = CompressRequest {
                force,
                settings: config.map_or(CompressSettings::Defaults, CompressSettings::File),
                k,
                epochs,
                data_dir: data,
                subset,
                validation: ValidationSplit::new(validation),
                ..CompressRequest::new(model, dataset, out)
            };
            if auto {
                let search = SearchConfig {
                    margins: Margins {
                        accuracy_points: margin_accuracy,
                        nll: margin_nll,
                        ece: margin_ece,
                        ood_auroc: margin_ood_auroc,
                    },
                    samples,
                    max_retrains,
                    ..SearchConfig::default()
                };
                let mut progress = SearchBars { bars: &mut bars };
                let report = commands::compress_auto(&request, &search, &device, &mut progress)?;
                if cli.json {
                    println!("{}", serde_json::to_string(&report)?);
                } else if let Some(c) = report.written() {
                    println!(
                        "wrote {} ({}), {} of the source's {} parameters; the search is in {}",
                        request.out.display(),
                        c,
                        c.parameters,
                        report.source_parameters,
                        commands::search_file(&request.out).display()
                    );
                }
                return Ok(());
            }
            let report = commands::compress(&request, &device, &mut bars)?;
            // With `--out -` standard output holds the .swb bytes alone.
            let text = if cli.json {
                serde_json::to_string(&report)?
            } else {
                report.to_string()
            };
            if request.out.as_os_str() == "-" {
                eprintln!("{text}");
            } else {
                println!("{text}");
            }
        }
        Command::Eval {
            model,
            dataset,
            ood,
            ood_dir,
            samples,
            data,
            subset,
            seed,
            corruptions,
            calibrated,
            temperature,
        } => {
            let scaling = match (calibrated, temperature) {
                (true, _) => Scaling::Stored,
                (false, Some(t)) => Scaling::Given(t),
                (false, None) => Scaling::Raw,
            };
            let request = EvalRequest {
                ood,
                ood_dir,
                samples,
                data_dir: data,
                subset,
                seed,
                corruptions,
                scaling,
                ..EvalRequest::new(model.clone(), dataset)
            };
            let out = commands::eval(&request, &device)?;
            if cli.json {
                println!(
                    "{}",
                    serde_json::to_string(&serde_json::json!({
                        "evaluation": out.evaluation,
                        "regression": out.regression,
                        "calibrated": out.calibrated.as_ref().map(|(t, ev)| serde_json::json!({
                            "temperature": t,
                            "evaluation": ev,
                        })),
                        "conformal": out.conformal,
                        "weights": out.weights,
                        "corruptions": out.corruptions,
                        "ood_set": out.ood_source.as_ref().map(|(dir, files)| serde_json::json!({
                            "dataset": request.ood.as_ref().map(|o| o.to_string()),
                            "dir": dir,
                            "sha256": files,
                        })),
                    }))?
                );
            } else {
                if let (Some(ood), Some((dir, files))) = (&request.ood, &out.ood_source) {
                    let names: Vec<&str> = files.keys().map(String::as_str).collect();
                    println!(
                        "OOD set: {ood} read from {} ({})",
                        dir.display(),
                        names.join(", ")
                    );
                }
                if let Some(ev) = &out.evaluation {
                    print_evaluation("", ev);
                }
                if let Some(reg) = &out.regression {
                    print_regression(reg);
                }
                if let Some((t, ev)) = &out.calibrated {
                    print_evaluation(&format!("calibrated (T = {t:.4}): "), ev);
                } else if let Some(t) = out.stored_temperature {
                    eprintln!(
                        "note: {} has a fitted temperature {t:.4}; --calibrated reports its calibrated metrics too",
                        model.display()
                    );
                }
                match &out.conformal {
                    Some(commands::ConformalEvaluation::Sets {
                        temperature,
                        summary,
                        ..
                    }) => println!(
                        "conformal sets (APS, level {}, T = {temperature:.4}): coverage {:.4}, mean set size {:.3} over {} images",
                        summary.level, summary.coverage, summary.mean_set_size, summary.n
                    ),
                    Some(commands::ConformalEvaluation::Intervals { summary, .. }) => println!(
                        "conformal intervals (level {}): coverage {:.4}, mean width {:.4} over {} rows",
                        summary.level, summary.coverage, summary.mean_width, summary.n
                    ),
                    None => {}
                }
                if !out.corruptions.is_empty() {
                    print!(
                        "{}",
                        swbnn_harness::results::markdown_corruptions(&out.corruptions)
                    );
                }
            }
        }
        Command::Calibrate {
            model,
            dataset,
            data,
            validation,
            validation_seed,
            samples,
            seed,
            conformal,
        } => {
            let request = CalibrateRequest {
                data_dir: data,
                validation,
                validation_seed,
                samples,
                seed,
                conformal,
                ..CalibrateRequest::new(model, dataset)
            };
            let out = commands::calibrate(&request, &device)?;
            let fit = &out.fit;
            let intervals = fit.conformal.as_ref().and_then(|c| c.as_intervals());
            if cli.json {
                println!("{}", serde_json::to_string(fit)?);
            } else if let Some(cal) = intervals {
                println!(
                    "conformal intervals at level {}: |y - mean| / std thresholds {:?} on {} validation rows (seed {}{}); validation NLL {:.4}; stored in {}",
                    cal.level,
                    cal.qhat,
                    cal.n,
                    out.split.seed,
                    out.run_dir
                        .map(|d| format!(", the split of the run in {}", d.display()))
                        .unwrap_or_default(),
                    fit.nll_before,
                    out.stored_in.display()
                );
            } else {
                println!(
                    "temperature {:.4}: validation NLL {:.4} -> {:.4} ({} images held out with seed {}{}, {} samples); stored in {}",
                    fit.temperature,
                    fit.nll_before,
                    fit.nll_after,
                    fit.images,
                    out.split.seed,
                    out.run_dir
                        .map(|d| format!(", the split of the run in {}", d.display()))
                        .unwrap_or_default(),
                    fit.samples,
                    out.stored_in.display()
                );
                if let Some((aps, _)) = fit.conformal.as_ref().and_then(|c| c.as_aps()) {
                    println!(
                        "conformal prediction sets (APS) at level {}: threshold {:.4} on {} validation images",
                        aps.level, aps.qhat, aps.n
                    );
                }
            }
            if fit.at_bound {
                eprintln!(
                    "warning: the temperature lies on a bound of the searched range {:?}: the model or the validation data is unusual",
                    bnn_metrics::TEMPERATURE_RANGE
                );
            }
        }
        Command::Plot(args) => {
            let plotted = swbnn_harness::plot::run(&args.request(), &device)?;
            if let Some(dir) = &plotted.ood_dir {
                eprintln!("OOD set read from {}", dir.display());
            }
            eprintln!("wrote {}", plotted.out.display());
        }
        Command::Import(args) => {
            let record = bnn_interop::import(&args.request(), &device)?;
            eprintln!(
                "imported {} ({} tensors, {} names) into {}",
                record.source,
                record.tensors,
                record.convention,
                args.out.display()
            );
        }
        Command::Export(args) => match commands::export(&args.request(), &device)? {
            commands::Exported::Stream { bytes, tensors } => {
                std::io::Write::write_all(&mut std::io::stdout().lock(), &bytes)
                    .context("writing to standard output")?;
                eprintln!("wrote {tensors} tensors to standard output");
            }
            commands::Exported::File { path, tensors } => {
                eprintln!("wrote {} ({tensors} tensors)", path.display());
            }
        },
        // Run above, before the device is opened.
        Command::Warmup(_) => {}
        Command::Inspect { model } => {
            // The one loader `eval` and `export` use, so a file `inspect` passes is one they
            // accept (an unshared NaN or a `rho` of 3e38 passed the format's own checks).
            let loaded = swbnn_ops::load::load_model(&model, &device)?;
            let swbnn_ops::load::LoadedFrom::Shared { data, bytes } = &loaded.from else {
                bail!(
                    "{}: `inspect` describes weight-shared .swb files; this model loads, but \
                     is not one",
                    model.display()
                );
            };
            let summary = describe(data, *bytes);
            if cli.json {
                println!("{summary}");
            } else {
                println!(
                    "{}:\n{}",
                    model.display(),
                    serde_json::to_string_pretty(&summary)?
                );
            }
        }
    }
    Ok(())
}

/// One evaluation's metrics, each line after `prefix`.
/// A regression network's metrics, one line each.
fn print_regression(reg: &commands::RegressionEvaluation) {
    let s = &reg.summary;
    println!(
        "rmse {:.4}  nll {:.4}  crps {:.4}  pit error {:.4}  (targets {}; n = {}, {} samples)",
        s.rmse,
        s.gaussian_nll,
        s.crps,
        s.pit_calibration_error,
        reg.target_names.join(", "),
        s.n,
        s.n_samples
    );
    let intervals: Vec<String> = s
        .intervals
        .iter()
        .map(|i| {
            format!(
                "{:.0}%: coverage {:.4}, width {:.4}",
                100.0 * i.level,
                i.coverage,
                i.mean_width
            )
        })
        .collect();
    println!("central intervals  {}", intervals.join("; "));
    println!(
        "mean variance: aleatoric {:.4}, epistemic {:.4}",
        s.mean_aleatoric_variance, s.mean_epistemic_variance
    );
}

fn print_evaluation(prefix: &str, ev: &bnn_train::Evaluation) {
    let s = &ev.summary;
    println!(
        "{prefix}accuracy {:.4}  nll {:.4}  ece {:.4}  mce {:.4}  brier {:.4}  (n = {}, {} samples)",
        s.accuracy, s.nll, s.ece, s.mce, s.brier, s.n, ev.samples
    );
    if let (Some(a), Some(b)) = (&ev.ood_max_prob, &ev.ood_entropy) {
        println!(
            "{prefix}OOD AUROC {:.4} (max-prob), {:.4} (entropy); AUPR-in {:.4}; FPR@95 {:.4}",
            a.auroc, b.auroc, a.aupr_in, a.fpr_at_95_tpr
        );
    }
}

/// A model file's statistics: weights by fate, codebook size, parameters.
fn describe(data: &swshare::format::SharedModelData, file_bytes: u64) -> serde_json::Value {
    let mut v = swbnn_ops::load::sharing_stats(data);
    v["file_bytes"] = file_bytes.into();
    v["architecture"] = serde_json::from_str::<serde_json::Value>(&data.arch).unwrap_or_default();
    v["temperature"] = serde_json::json!(data.temperature);
    v
}

fn rayon_threads(n: usize) -> Result<()> {
    rayon::ThreadPoolBuilder::new()
        .num_threads(n)
        .build_global()
        .context("setting the thread count")
}

#[cfg(test)]
mod tests {
    use super::*;
    use bnn_data::DatasetId;
    use clap::CommandFactory;
    use std::path::Path;

    /// Splits a shell command line into words: whitespace outside quotes separates them;
    /// '...' and "..." quote. Enough for the documentation's commands.
    fn shell_words(line: &str) -> Vec<String> {
        let (mut words, mut word, mut quote, mut any) = (Vec::new(), String::new(), None, false);
        for c in line.chars() {
            match (quote, c) {
                (None, '\'' | '"') => (quote, any) = (Some(c), true),
                (Some(q), c) if c == q => quote = None,
                (None, c) if c.is_whitespace() => {
                    if any {
                        words.push(std::mem::take(&mut word));
                    }
                    any = false;
                }
                (_, c) => {
                    word.push(c);
                    any = true;
                }
            }
        }
        if any {
            words.push(word);
        }
        words
    }

    /// The `swbnn` command lines of the shell blocks of a Markdown text: lines continued by
    /// a trailing backslash joined, comments cut, each `&&`- or `;`-separated part that runs
    /// `swbnn` (as `swbnn ...` or `cargo run ... -p swbnn -- ...`) as its arguments.
    fn documented_commands(markdown: &str) -> Vec<(String, Vec<String>)> {
        let mut out = Vec::new();
        let (mut in_shell, mut pending) = (false, String::new());
        for line in markdown.lines() {
            let t = line.trim();
            if let Some(lang) = t.strip_prefix("```") {
                in_shell = !in_shell && matches!(lang, "sh" | "bash" | "shell" | "console");
                continue;
            }
            if !in_shell {
                continue;
            }
            let t = t.strip_prefix("$ ").unwrap_or(t);
            pending.push_str(t.trim_end_matches('\\'));
            pending.push(' ');
            if t.ends_with('\\') {
                continue;
            }
            let full = std::mem::take(&mut pending);
            let code = match full.find(" #") {
                Some(i) => &full[..i],
                None => full.as_str(),
            };
            for part in code.split("&&").flat_map(|p| p.split(';')) {
                let part = part.trim();
                let args = if let Some(i) = part.find("-p swbnn -- ") {
                    &part[i + "-p swbnn -- ".len()..]
                } else if let Some(rest) = part.strip_prefix("swbnn ") {
                    rest
                } else {
                    continue;
                };
                out.push((part.to_string(), shell_words(args)));
            }
        }
        out
    }

    /// Every `swbnn` command line in the README and the user guide parses: its subcommand,
    /// flags and values exist (a renamed flag or an unknown value fails here).
    #[test]
    fn every_documented_command_parses() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let mut files = vec![root.join("README.md")];
        let guide = root.join("docs/guide");
        let mut pages: Vec<_> = std::fs::read_dir(&guide)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "md"))
            .collect();
        pages.sort();
        files.extend(pages);
        let (mut checked, mut failed) = (0, Vec::new());
        for file in &files {
            let text = std::fs::read_to_string(file).unwrap();
            for (line, args) in documented_commands(&text) {
                checked += 1;
                let parsed = Cli::try_parse_from(std::iter::once("swbnn".to_string()).chain(args));
                if let Err(e) = parsed
                    && !matches!(
                        e.kind(),
                        clap::error::ErrorKind::DisplayHelp
                            | clap::error::ErrorKind::DisplayVersion
                    )
                {
                    failed.push(format!("{}: `{line}`: {}", file.display(), e.kind()));
                }
            }
        }
        assert!(checked >= 20, "only {checked} documented commands found");
        assert!(failed.is_empty(), "{}", failed.join("\n"));
    }

    /// Every flag and argument of every subcommand says what it is in `--help`.
    #[test]
    fn every_flag_has_help() {
        let mut missing = Vec::new();
        let cli = Cli::command();
        let mut commands = vec![(String::from("swbnn"), &cli)];
        while let Some((path, cmd)) = commands.pop() {
            for arg in cmd.get_arguments() {
                let id = arg.get_id().as_str();
                if matches!(id, "help" | "version") {
                    continue;
                }
                if arg.get_help().is_none() && arg.get_long_help().is_none() {
                    missing.push(format!("{path} {id}"));
                }
            }
            for sub in cmd.get_subcommands() {
                commands.push((format!("{path} {}", sub.get_name()), sub));
            }
        }
        assert!(missing.is_empty(), "no help text: {missing:?}");
    }

    /// The value lists written in the help text name every data set and architecture.
    #[test]
    fn help_lists_every_data_set_and_architecture() {
        let cli = Cli::command();
        let train = cli.find_subcommand("train").unwrap();
        let help = |id: &str| {
            let arg = train.get_arguments().find(|a| a.get_id() == id).unwrap();
            arg.get_long_help()
                .or(arg.get_help())
                .map(|h| h.to_string())
                .unwrap_or_default()
        };
        let datasets = help("dataset");
        for d in DatasetId::ALL {
            assert!(
                datasets.contains(d.name()),
                "{} missing: {datasets}",
                d.name()
            );
        }
        let archs = help("arch");
        for a in Arch::ALL {
            assert!(archs.contains(a.name()), "{} missing: {archs}", a.name());
        }
    }
}
