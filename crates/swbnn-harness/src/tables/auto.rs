//! The `auto` table: `compress --auto`'s search ([`swbnn_ops::search`]) run on the BBB model
//! of the main experiment, its chosen file evaluated on the test set beside the default-K
//! 2DGBNN and the BBB it came from. The search reads the validation split and its
//! tile-shuffled images only; the test set is read once, for the chosen file's row.

use std::time::Instant;

use bnn_layers::count_params;
use bnn_models::{ModelConfig, Network};
use bnn_train::{Observer, evaluate};
use burn::prelude::*;
use serde::{Deserialize, Serialize};
use swbnn_ops::search::{
    Candidate, ChosenFile, SearchConfig, SearchInputs, SearchProgress, SearchReport, progress_line,
    search,
};

use crate::Error;
use crate::data::ExperimentData;
use crate::experiment::{Progress, evaluation_seed, training_loader, weight_stats};
use crate::method::Method;
use crate::results::Row;
use crate::setup::Setup;
use crate::store::{self, StageDir};

/// The stage directory of the search.
pub const AUTO_STAGE: &str = "auto";

/// The search file in the stage directory (as `compress --auto` writes beside its output).
pub const SEARCH_FILE: &str = "search.json";

/// The figure of the first seed's search in the run directory's `figures/`.
pub const SEARCH_FIGURE: &str = "search.png";

/// The row label of the chosen file in the table.
pub const AUTO_LABEL: &str = "auto (smallest within the margins on validation)";

/// What the table keeps of one seed's search, beside its row.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AutoOutcome {
    /// The whole search.
    pub search: SearchReport,
    /// The written candidate's name (`mu-only K = 25, int8 outliers`, ...).
    pub chosen: String,
}

/// Runs the search in stage [`AUTO_STAGE`] (its row and search file cached there) with the
/// setup's compression as the sharing candidates' base, `force` on (a table row is wanted
/// even when no candidate qualifies: the outcome then says it is the nearest), and evaluates
/// the written file on the test set as every row is.
pub(crate) fn auto_row(
    setup: &Setup,
    (bayes, bayes_config): (&Network, &ModelConfig),
    data: &ExperimentData,
    device: &Device,
    progress: &mut dyn Progress,
) -> Result<(Row, AutoOutcome), Error> {
    let stage = StageDir::open(setup, AUTO_STAGE)?;
    let search_path = stage.path().join(SEARCH_FILE);
    if let Some(row) = stage.cached_row()?
        && search_path.is_file()
    {
        let search: SearchReport = store::read_json(&search_path)?;
        return Ok((row, outcome(search)?));
    }
    progress.stage(AUTO_STAGE);
    let validation_ood = data.validation_ood_loader.as_ref().ok_or_else(|| {
        Error::Usage("the auto table searches on the validation split: the setup has none".into())
    })?;
    let cfg = &setup.compress;
    let train = training_loader(setup, data, &cfg.retrain)?;
    let inputs = SearchInputs {
        bayes,
        bayes_config,
        train: &train,
        validation: &data.validation_loader,
        validation_ood,
        validation_images: data.validation.len(),
    };
    let started = Instant::now();
    let (report, file) = search(
        &inputs,
        cfg,
        &SearchConfig::default(),
        true,
        &mut Steps(progress),
    )?;
    let seconds = started.elapsed().as_secs_f64();
    let file = file.ok_or_else(|| Error::Usage("the search wrote no file".into()))?;
    let (model, method, path) = match &file {
        ChosenFile::Swb(bytes) => {
            let data = swshare::format::from_bytes(bytes)?;
            let (m, _) = swshare::burn_edges::from_swb::<ModelConfig>(&data, device)?;
            (m, Method::Gbnn2d, stage.model().swb_path())
        }
        ChosenFile::Qbnn(bytes) => {
            let data = swshare::format::qbnn::from_bytes(bytes)?;
            let (m, _) = swbnn_ops::qbnn::from_qbnn(&data, device)?;
            (m, Method::Qbnn, stage.path().join(store::QBNN_FILE))
        }
    };
    swshare::format::write_atomic(&path, file.bytes())?;
    store::write_json(&search_path, &report)?;
    let row = stage.row(|| {
        // Seeded as the default-K 2DGBNN's row, so the two are evaluated on the same draws.
        device.seed(evaluation_seed(setup, Method::Gbnn2d));
        let ev = evaluate(
            &model,
            &data.test_loader,
            data.ood_loader.as_ref(),
            setup.samples,
        )?;
        Ok(Row::new(
            setup.arch,
            method,
            ev,
            count_params(&model).trainable,
            file.bytes().len() as u64,
            seconds,
            weight_stats(&model)?,
        ))
    })?;
    progress.row(&row);
    Ok((row, outcome(report)?))
}

fn outcome(search: SearchReport) -> Result<AutoOutcome, Error> {
    let chosen = search
        .written()
        .map(Candidate::label)
        .ok_or_else(|| Error::Usage("the search file names no written candidate".into()))?;
    Ok(AutoOutcome { search, chosen })
}

/// The experiment's progress as the search's: stage-3 steps to its bars, each candidate as a
/// line.
struct Steps<'a>(&'a mut dyn Progress);

impl SearchProgress for Steps<'_> {
    fn candidate(&mut self, c: &Candidate, best: Option<&Candidate>) {
        self.0.stage(&format!("auto: {}", progress_line(c, best)));
    }

    fn steps(&mut self) -> &mut dyn Observer {
        // `Progress: Observer`; the upcast is the trait object's supertrait coercion.
        self.0
    }
}
