//! `--tables ablation` (the ablation and the GMM-K tables) interrupted and resumed gives the
//! rows of an uninterrupted run, on a small subset of the real Fashion-MNIST.
//!
//! Two interruptions are made in one run directory: one inside a variant's retraining (a
//! panic from the observer after its first epoch, as a kill would), and one in every variant
//! between its last checkpoint and its row (the row files removed, as a kill during the Monte
//! Carlo evaluation leaves them). The second is where a variant stage whose evaluation was not
//! seeded gave other numbers than the run that trained it.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};

use bnn_data::DatasetId;
use bnn_models::Arch;
use bnn_train::EpochStats;
use swbnn::experiment::Progress;
use swbnn::setup::Setup;
use swbnn::store::{ROW_FILE, STAGES_DIR};
use swbnn::tables::{self, ReportContext, TableId, TableRow, TablesConfig};
use swshare::retrain_stop::RetrainStop;

/// Held by each run: burn's device generator is shared by the process, so two runs on
/// parallel test threads would draw each other's noise.
static ONE_RUN_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

struct Quiet;
impl bnn_train::Observer for Quiet {}
impl Progress for Quiet {}

/// Panics in the second epoch of stage `target` (the observer hears of an epoch before its
/// checkpoint is committed, so the first epoch's is), as a kill there would stop the run.
struct KillIn {
    target: &'static str,
    current: String,
    epochs: usize,
}

impl bnn_train::Observer for KillIn {
    fn on_epoch(&mut self, _stats: &EpochStats) {
        if self.current == self.target {
            self.epochs += 1;
            if self.epochs == 2 {
                panic!("killed in {}", self.target);
            }
        }
    }
}

impl Progress for KillIn {
    fn stage(&mut self, name: &str) {
        self.current = name.to_string();
    }
}

fn setup(out: &Path) -> Setup {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut setup = swbnn::presets::setup(
        DatasetId::FashionMnist,
        Some(Arch::Lenet5),
        true,
        &swbnn::data::OodSearch::from_env(&root),
        out.to_path_buf(),
    );
    setup.ood = None;
    setup.train_subset = Some(400);
    setup.test_subset = Some(100);
    setup.deterministic.epochs = 1;
    setup.bbb.epochs = 1;
    // Two whole epochs (no stopping rule), so the kill inside a variant's retraining leaves a
    // checkpoint to resume.
    setup.compress.retrain.epochs = 2;
    setup.compress.retrain_stop = RetrainStop::Epochs;
    setup.samples = 3;
    setup.workers = 1;
    setup.compress.sharing.gmm.k = 8;
    setup.compress.sharing.refine.n_min = 3;
    setup
}

fn context() -> ReportContext {
    ReportContext {
        command: "test".into(),
        backend: "flex".into(),
    }
}

/// The rows without their training seconds (a resumed stage adds its own wall time).
fn untimed(rows: &[TableRow]) -> Vec<TableRow> {
    rows.iter()
        .cloned()
        .map(|mut r| {
            r.row.train_seconds = 0.0;
            r
        })
        .collect()
}

#[test]
fn an_interrupted_ablation_run_resumes_to_the_rows_of_an_uninterrupted_one() {
    let _alone = ONE_RUN_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let tables_chosen = TableId::parse_list(&["ablation"]).unwrap();
    let cfg = TablesConfig {
        gmm_k: vec![4, 8],
        ..TablesConfig::default()
    };
    let device = bnn_layers::test_device();

    let whole_dir = tempfile::tempdir().unwrap();
    let whole = tables::run(
        &setup(whole_dir.path()),
        &cfg,
        &tables_chosen,
        &device,
        &context(),
        &mut Quiet,
    )
    .unwrap();

    let dir = tempfile::tempdir().unwrap();
    let mut s = setup(dir.path());
    let mut kill = KillIn {
        target: "ablation-no-outliers",
        current: String::new(),
        epochs: 0,
    };
    let killed = catch_unwind(AssertUnwindSafe(|| {
        tables::run(&s, &cfg, &tables_chosen, &device, &context(), &mut kill).is_ok()
    }));
    assert!(killed.is_err(), "the run was not interrupted");
    let stages = dir.path().join(STAGES_DIR);
    assert!(stages.join("ablation-no-outliers/state.json").is_file());
    assert!(!stages.join("ablation-no-outliers").join(ROW_FILE).exists());
    s.resume = true;
    let resumed = tables::run(&s, &cfg, &tables_chosen, &device, &context(), &mut Quiet).unwrap();
    assert_eq!(untimed(&resumed.rows), untimed(&whole.rows));

    // Every variant killed after its last checkpoint, before its row.
    let mut removed = 0;
    for entry in std::fs::read_dir(&stages).unwrap() {
        let stage = entry.unwrap().path();
        let name = stage.file_name().unwrap().to_string_lossy().into_owned();
        if name.starts_with("ablation-") || name.starts_with("gmm-k-") {
            std::fs::remove_file(stage.join(ROW_FILE)).unwrap();
            removed += 1;
        }
    }
    assert_eq!(removed, 4, "three ablation variants and K = 4");
    let again = tables::run(&s, &cfg, &tables_chosen, &device, &context(), &mut Quiet).unwrap();
    let (want, got) = (untimed(&whole.rows), untimed(&again.rows));
    assert_eq!(got.len(), want.len());
    for (g, w) in got.iter().zip(&want) {
        assert_eq!(g, w, "{}: the resumed row differs", g.label);
    }
}
