//! `cargo xtask`: reproduce the paper's tables and run the benchmarks.

mod bench;
mod fuzz;
mod gpu;
mod wheel;

// Training allocates and frees many tensor buffers of a few megabytes per step; glibc's malloc
// returns them to the kernel and page-faults them back in (7 % of a Bayesian MLP step in perf);
// mimalloc keeps them (docs/benchmarks.md). The fuzzer counts heap bytes through it.
#[global_allocator]
static GLOBAL: fuzz::CountingAlloc = fuzz::CountingAlloc;

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

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use bnn_data::DataSource;
use bnn_models::Arch;
use bnn_train::{EpochStats, Observer, StepInfo};
use clap::{Parser, Subcommand};
use swbnn::Reproduction;
use swbnn_harness::experiment::Progress;
use swbnn_harness::results::{self, Row};
use swbnn_harness::tables::{self, ReportContext, TableId, TablesConfig, plan::plan};

/// The classes of `--ood heldout:CLASSES`, parsed as one value. Spelled `Option<Vec<u32>>`,
/// clap's derive would read the field as many `u32` values and panic on the parser's `Vec`.
type HeldOutClasses = Vec<u32>;

#[derive(Parser)]
#[command(name = "cargo xtask")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
// Parsed once per process; boxing the flags of `reproduce` would only add indirection.
#[allow(clippy::large_enum_variant)]
enum Command {
    /// Deterministic -> Bayes by Backprop -> 2DGBNN on a data set; writes table.md, table.json,
    /// the figures (figures/) and report.md.
    Reproduce {
        /// mnist, fashion-mnist, cifar10, cifar100, svhn or imagenet; or your own data:
        /// `folder:DIR` (class folders, with `train/` and `test/`) or `npz:FILE` (`x_train`,
        /// `y_train`, `x_test`, `y_test`), run with the generic recipe of
        /// `swbnn_harness::presets::setup_for_source` (the Fashion-MNIST preset's training, LeNet-5
        /// for --quick or grey images up to 64 px, else ResNet-20; no OOD set).
        dataset: DataSource,
        /// A small, fast run (LeNet-5, every training image but the validation split, a few epochs).
        #[arg(long)]
        quick: bool,
        /// Architecture (default: the paper's for the data set; for your own data see
        /// DATASET).
        #[arg(long)]
        arch: Option<Arch>,
        /// Output directory (default `results/DATASET/`).
        #[arg(long)]
        out: Option<PathBuf>,
        /// Data directory.
        #[arg(long)]
        data: Option<PathBuf>,
        /// Training epochs (overrides the preset): one number for every stage, or three,
        /// `DET,BBB,RETRAIN` (e.g. `3,2,1`).
        #[arg(long, value_delimiter = ',', num_args = 1..=3, value_parser = swbnn::args::epochs_or_none)]
        epochs: Vec<usize>,
        /// Stratified training subset (overrides the preset; more than the training set has
        /// is an error).
        #[arg(long, value_parser = swbnn::args::positive)]
        train_subset: Option<usize>,
        /// Training images held out as the validation split (default 5,000, for your own
        /// data a tenth of its training split up to 5,000; 0: none), drawn
        /// stratified with a fixed seed before --train-subset picks from the rest, and recorded
        /// in setup.json. Every rule that looks at data (stage 3's stop rule) reads it; a
        /// resumed run must use the split it was made with.
        #[arg(long, value_parser = swbnn::args::count)]
        validation: Option<usize>,
        /// Test subset (more than the test set has is an error; the OOD set is cut to it).
        #[arg(long, value_parser = swbnn::args::positive)]
        test_subset: Option<usize>,
        /// Monte-Carlo samples at evaluation (1 to 10,000).
        #[arg(long, value_parser = swbnn::args::samples)]
        samples: Option<usize>,
        /// Backend.
        #[arg(long, default_value = "flex")]
        backend: String,
        /// Continue an interrupted run in the output directory: finished stages (checkpoints
        /// and rows in `<out>/stages/`) are kept, an unfinished one goes on from its last
        /// epoch, and a stage the run had not reached yet starts. The run itself must exist:
        /// an output directory without its `setup.json` is an error, never a fresh start (leave
        /// out --resume for that), and so is a stage whose model lost its `state.json`.
        #[arg(long)]
        resume: bool,
        /// Repeat the whole experiment with this many seeds (each in `<out>/seed-<i>/`); the
        /// table then shows mean ± sd.
        #[arg(long, default_value_t = 1, value_parser = swbnn::args::positive)]
        seeds: usize,
        /// The first seed number: seed `i` of the run is number `K + i`, every stage's seed
        /// shifted by `1000 * (K + i)` and recorded in its setup.json. The default, 6, skips
        /// the numbers 0-5 that the presets' defaults were chosen on, so a report is on seeds
        /// no decision saw; a choice made on validation metrics may use `--seed-offset 0`.
        #[arg(long, default_value_t = swbnn_harness::setup::DEFAULT_SEED_OFFSET)]
        seed_offset: u64,
        /// How Bayes by Backprop is trained: `reference` (the PyTorch reference recipe: from
        /// scratch, SGD, rho = -6; the full runs' default) or `pretrained` (the paper's: from
        /// the deterministic net, Adam; the `--quick` default). Why: docs/results.md.
        #[arg(long, value_parser = swbnn::args::recipe())]
        recipe: Option<swbnn_harness::presets::BbbRecipe>,
        /// Also evaluate every method on the 15 corrupted test sets (5 kinds x 3 severities)
        /// and write `corruptions.md` / `corruptions.json` and the corruptions figure.
        #[arg(long)]
        corruptions: bool,
        /// A JSON file whose fields replace the preset's (any field of `setup.json`, nested
        /// objects merged), e.g. `{"compress": {"retrain": {"lr": 1e-3}}}`.
        #[arg(long)]
        setup: Option<PathBuf>,
        /// Also make the paper's other tables, comma-separated: main, equal-size, quant,
        /// ensemble, ablation (with gmm-k), gmm-k, tau-w, merge, timing, or all of those; and
        /// auto (`compress --auto`'s search on the BBB model, the chosen file on test). Writes
        /// tables.md and tables.json beside table.md, reusing the main run's stages.
        #[arg(long, value_delimiter = ',')]
        tables: Vec<String>,
        /// Print the plan (stages, epochs, images to train on and evaluate) and exit, without
        /// reading any data.
        #[arg(long)]
        dry_run: bool,
        /// A near out-of-distribution set instead of the preset's: `heldout:CLASSES` (e.g.
        /// `heldout:6,9`) holds those classes out of training and validation; the test rows
        /// cover the other classes, and the OOD set is the held-out classes' test images.
        #[arg(long, value_parser = swbnn::args::held_out_classes)]
        ood: Option<HeldOutClasses>,
        /// A target column of a `csv:` table (repeatable): a table runs the regression
        /// experiment (deterministic, BBB, 2DGBNN, conformal intervals) and writes
        /// regression.md, regression.json and report.md.
        #[arg(long = "target", value_name = "NAME")]
        targets: Vec<String>,
        /// A regression network's noise model: heteroscedastic (default) or homoscedastic.
        #[arg(long, value_parser = swbnn::args::noise())]
        noise: Option<bnn_models::Noise>,
        /// The MLP's hidden widths, comma-separated (a table's default: 100,100).
        #[arg(long, value_name = "WIDTHS", value_delimiter = ',')]
        mlp_hidden: Option<Vec<usize>>,
    },
    /// Mutation fuzzing of the readers of untrusted files; one JSON line per target. Fails
    /// on any panic or an execution beyond the heap (or, for swb-cost, decode-work) bound.
    Fuzz {
        /// swb, swb-cost, idx, cifar, svhn-mat, npy, checkpoint or all.
        #[arg(value_enum)]
        target: fuzz::Target,
        /// Executions per target.
        #[arg(long, default_value_t = 100_000)]
        iterations: u64,
        /// Seed of the mutations (the same seed repeats the run).
        #[arg(long, default_value_t = 0)]
        seed: u64,
        /// Where inputs that panic or pass a bound are saved.
        #[arg(long, default_value = "target/fuzz")]
        save_dir: PathBuf,
    },
    /// Benchmarks that print one JSON line per measurement.
    Bench {
        #[command(subcommand)]
        which: bench::Which,
    },
    /// Builds `swbnn` and `xtask` with the `cuda` backend without network access: kernels
    /// compiled by NVRTC, and an offline stand-in for cubecl-llvm (which would download LLVM).
    /// Into `target/cuda-offline/`; checks that no LLVM is in the graph or linked. At run time
    /// NVRTC needs libnvrtc (on LD_LIBRARY_PATH) and the CUDA headers (CUDA_PATH).
    BuildCuda {
        /// Release profile (default: dev, whose dependencies are optimised too).
        #[arg(long)]
        release: bool,
        /// Also compile the wgpu backend in.
        #[arg(long)]
        wgpu: bool,
    },
    /// Everything one call on a GPU machine with PyTorch and no Rust needs: the wgpu + CUDA
    /// binaries (offline route), the GPU tests, the CUDA headers, a Fashion-MNIST subset and
    /// the PyTorch peer, in `target/gpu-kit/kit.tar.xz`, with `target/gpu-kit/run.sh` to run
    /// there.
    GpuKit {
        /// A folder holding the CUDA headers NVRTC includes (cuda_fp16.h, mma.h, ...); default
        /// `$CUDA_PATH/include` or `/usr/local/cuda/include` when they hold them.
        #[arg(long)]
        cuda_include: Option<PathBuf>,
        /// Fashion-MNIST's folder (default: the data locator's).
        #[arg(long)]
        data: Option<PathBuf>,
        /// Training images in the kit's data subset.
        #[arg(long, default_value_t = 10_000, value_parser = swbnn::args::positive)]
        train_images: usize,
        /// Test images in it.
        #[arg(long, default_value_t = 2_000, value_parser = swbnn::args::positive)]
        test_images: usize,
    },
    /// The Python package as a wheel that `pip install` takes without a Rust toolchain:
    /// abi3 (CPython >= 3.9), manylinux2014 (glibc >= 2.17, x86-64), linked by zig. Needs
    /// `maturin` and the `ziglang` package (`pip install maturin ziglang`).
    Wheel {
        /// Cargo profile: `release` for users; `dev` for a quick build.
        #[arg(long, default_value = "release")]
        profile: String,
        /// A wheel for machines with this machine's glibc or newer, linked by the system's
        /// linker instead of zig: it reuses the dependencies an earlier build of this
        /// checkout compiled for the host, where zig's cross-compilation builds every one
        /// again (CI's install check; a wheel to share is the default).
        #[arg(long)]
        local: bool,
        /// Output folder (default `wheels/` in Cargo's target folder).
        #[arg(long)]
        out: Option<PathBuf>,
    },
}

struct Log;

impl Observer for Log {
    fn on_step(&mut self, i: &StepInfo) {
        if i.step.is_multiple_of(50) {
            eprintln!(
                "  epoch {} step {}/{} loss {:.4} ({:.0} img/s)",
                i.epoch + 1,
                i.step,
                i.steps,
                i.loss,
                i.images_per_s
            );
        }
    }

    fn on_epoch(&mut self, s: &EpochStats) {
        // A regression network has no accuracy: its training RMSE (standardised units).
        let fit = match s.rmse {
            Some(rmse) => format!("train rmse {rmse:.4}"),
            None => format!("train acc {:.4}", s.accuracy),
        };
        eprintln!(
            "  epoch {}: loss {:.4} nll {:.4} {fit} ({:.0} img/s, {:.0} s)",
            s.epoch + 1,
            s.loss,
            s.nll,
            s.images_per_s,
            s.seconds
        );
    }
}

impl Progress for Log {
    fn stage(&mut self, name: &str) {
        eprintln!("== {name}");
    }

    fn row(&mut self, r: &Row) {
        eprintln!(
            "   {} {}: accuracy {:.4} nll {:.4} ece {:.4} ood-auroc {:?}",
            r.arch, r.method, r.accuracy, r.nll, r.ece, r.ood_auroc
        );
    }
}

fn repo_root() -> PathBuf {
    let xtask = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    xtask
        .parent()
        .map_or_else(|| xtask.join(".."), Path::to_path_buf)
}

fn main() -> Result<()> {
    keep_freed_memory();
    match Cli::parse().command {
        Command::Reproduce {
            dataset,
            quick,
            arch,
            out,
            data,
            epochs,
            train_subset,
            validation,
            test_subset,
            samples,
            backend,
            resume,
            seeds,
            seed_offset,
            recipe,
            corruptions,
            setup: patch,
            tables,
            dry_run,
            ood,
            targets,
            noise,
            mlp_hidden,
        } => {
            anyhow::ensure!(seeds >= 1, "--seeds must be at least 1");
            let name = match dataset.preset() {
                Some(id) => id.name().to_string(),
                None => swbnn_harness::figures::dataset_label(&dataset),
            };
            let out = out.unwrap_or_else(|| repo_root().join("results").join(&name));
            let ood_search = swbnn_ops::data::OodSearch::from_env(&repo_root());
            let mut setup = swbnn_harness::presets::setup_for_source(
                &dataset,
                &targets,
                arch,
                quick,
                &ood_search,
                out.clone(),
            )?;
            // The preset's OOD set when it is not on this machine: fetched once the arguments
            // are checked, unless `--setup` says what the OOD set is.
            let mut ood_to_fetch = match setup.ood {
                None => dataset.preset().and_then(swbnn_ops::data::paired_ood),
                Some(_) => None,
            };
            if let Some(r) = recipe {
                swbnn_harness::presets::apply_recipe(r, &mut setup);
            }
            if let Some(path) = patch {
                setup = swbnn_harness::presets::patch(&setup, &path)?;
                if swbnn_harness::presets::patch_sets(&path, "ood")? {
                    ood_to_fetch = None;
                }
            }
            if let Some(classes) = ood {
                setup.held_out_classes = classes;
                setup.ood = None;
                ood_to_fetch = None;
            }
            setup.data_dir = data.or(setup.data_dir);
            setup.noise = noise.or(setup.noise);
            if mlp_hidden.is_some() {
                setup.mlp_hidden = mlp_hidden;
            }
            if corruptions {
                setup.corruptions = bnn_data::Corruption::all();
            }
            setup.resume = resume;
            match epochs[..] {
                [] => {}
                [e] => {
                    setup.deterministic.epochs = e;
                    setup.bbb.epochs = e;
                    setup.compress.retrain.epochs = e;
                }
                [det, bbb, retrain] => {
                    setup.deterministic.epochs = det;
                    setup.bbb.epochs = bbb;
                    setup.compress.retrain.epochs = retrain;
                }
                _ => anyhow::bail!("--epochs takes one number or three (DET,BBB,RETRAIN)"),
            }
            if train_subset.is_some() {
                setup.train_subset = train_subset;
            }
            if let Some(n) = validation {
                setup.validation = swbnn_harness::setup::ValidationSplit::new(n);
            }
            setup.test_subset = test_subset.or(setup.test_subset);
            if let Some(s) = samples {
                setup.samples = s;
            }
            setup = setup.with_seed(seed_offset);
            let tables = match tables.is_empty() {
                true => Vec::new(),
                false => TableId::parse_list(&tables)?,
            };
            if quick && !tables.is_empty() && test_subset.is_none() {
                tables::quick_overrides(&mut setup);
            }
            let tables_config = TablesConfig::for_setup(&setup);
            if dry_run {
                println!(
                    "reproduce {} {} ({}), tables: {}\n",
                    name,
                    setup.arch,
                    if quick { "quick" } else { "full" },
                    if tables.is_empty() {
                        "main".to_string()
                    } else {
                        tables
                            .iter()
                            .map(|t| t.name())
                            .collect::<Vec<_>>()
                            .join(",")
                    }
                );
                print!("{}", plan(&setup, &tables_config, &tables).markdown());
                return Ok(());
            }
            // Every limit and the output directory are checked before any data is read.
            if resume {
                swbnn_ops::checks::resumable_run(&out)?;
            }
            swbnn_ops::checks::output_dir("--out", &out)?;
            setup.check()?;
            let device = bnn_layers::device_by_name(&backend)?;
            // A resumed run downloads nothing: it goes on with what this machine holds.
            if !resume && let Some(id) = ood_to_fetch {
                // The checksummed download, or one line on how to get the data.
                match ood_search.fetch(id) {
                    Ok(dir) => setup.ood = Some((id, dir)),
                    Err(_) => eprintln!("{}", ood_search.missing_hint(id)),
                }
            }
            eprintln!(
                "reproduce {}: {} ({}), seed number {}{}, validation split {}, train subset {:?}, epochs det/bbb/retrain {}/{}/{}{}, OOD {}",
                name,
                setup.arch,
                if quick { "quick" } else { "full" },
                setup.seed,
                match seeds {
                    1 => String::new(),
                    n => format!(" to {}", setup.seed + n as u64 - 1),
                },
                setup.validation.size,
                setup.train_subset,
                setup.deterministic.epochs,
                setup.bbb.epochs,
                setup.compress.retrain.epochs,
                match setup.compress.retrain_stop {
                    swshare::retrain_stop::RetrainStop::Epochs => "",
                    swshare::retrain_stop::RetrainStop::ConfidenceRecovered { .. } =>
                        " (at most: stage 3 ends once it is as confident as BBB, or a regression network as good in validation NLL)",
                },
                match (&setup.ood, &setup.held_out_classes[..]) {
                    (_, [_, ..]) => format!("the held-out classes {:?}", setup.held_out_classes),
                    (Some((id, _)), []) if setup.ood_halves =>
                        format!("{id} (half B; half A validates)"),
                    (Some((id, _)), []) => id.name().to_string(),
                    (None, []) => "none".to_string(),
                }
            );
            let context = ReportContext {
                command: std::iter::once("cargo xtask".to_string())
                    .chain(std::env::args().skip(1))
                    .collect::<Vec<_>>()
                    .join(" "),
                backend: backend.clone(),
            };
            let done = swbnn_harness::reproduce(
                &setup,
                &tables,
                &tables_config,
                seeds,
                &device,
                &context,
                &mut Log,
            )
            .context(match tables.is_empty() {
                true => "the experiment failed",
                false => "the tables run failed",
            })?;
            match done {
                Reproduction::Tables(_) => {
                    let md = out.join(swbnn_harness::store::TABLES_MD);
                    println!("{}", std::fs::read_to_string(&md)?);
                    eprintln!("wrote {}/tables.md and tables.json", out.display());
                }
                Reproduction::Main { outcome, report } => {
                    println!("{}", results::markdown(&outcome.rows));
                    if !outcome.corruptions.is_empty() {
                        println!("{}", results::markdown_corruptions(&outcome.corruptions));
                    }
                    eprintln!("wrote {}/table.md and table.json", out.display());
                    eprintln!("wrote {}", report.display());
                }
                Reproduction::Regression(r) => {
                    println!("{}", swbnn_harness::regression::markdown(&r.summaries));
                    eprintln!("wrote {}", r.table.display());
                    eprintln!("wrote {}", r.report.display());
                }
                Reproduction::Seeds {
                    summaries, report, ..
                } => {
                    println!("{}", results::markdown_seeds(&summaries));
                    eprintln!("wrote {}/table.md and table.json", out.display());
                    eprintln!("wrote {}", report.display());
                }
            }
        }
        Command::Fuzz {
            target,
            iterations,
            seed,
            save_dir,
        } => {
            swbnn_ops::checks::output_dir("--save-dir", &save_dir)?;
            let reports = fuzz::run(target, iterations, seed, &save_dir)?;
            for r in &reports {
                println!("{}", serde_json::to_string(r)?);
            }
            let bad: Vec<&str> = reports
                .iter()
                .filter(|r| r.panics > 0 || r.over_bound > 0)
                .map(|r| r.target)
                .collect();
            anyhow::ensure!(
                bad.is_empty(),
                "panics, heap or decode work beyond the bound in {bad:?}; inputs saved under {}",
                save_dir.display()
            );
        }
        Command::Bench { which } => bench::run(which)?,
        Command::BuildCuda { release, wgpu } => gpu::build_cuda(&repo_root(), release, wgpu)?,
        Command::GpuKit {
            cuda_include,
            data,
            train_images,
            test_images,
        } => {
            gpu::gpu_kit(
                &repo_root(),
                &gpu::KitInputs {
                    cuda_include,
                    data,
                    train_images,
                    test_images,
                },
            )?;
        }
        Command::Wheel {
            profile,
            local,
            out,
        } => {
            let root = repo_root();
            let target = std::env::var_os("CARGO_TARGET_DIR")
                .map_or_else(|| root.join("target"), PathBuf::from);
            let out = out.unwrap_or_else(|| target.join("wheels"));
            let wheel = wheel::build(
                &root,
                &wheel::WheelRequest {
                    profile,
                    local,
                    out,
                },
            )?;
            println!("{}", wheel.display());
        }
    }
    Ok(())
}
