//! The 2DGBNN configurations of the ablation and sweep tables, each derived from the main
//! experiment's [`CompressConfig`] by changing one thing.

use swshare::SharingSpace;
use swshare::compress::CompressConfig;

use super::{TableId, TablesConfig};
use crate::method::Method;
use crate::setup::Setup;

/// One 2DGBNN configuration of a table.
#[derive(Debug, Clone, PartialEq)]
pub struct Variant {
    /// The table it belongs to.
    pub table: TableId,
    /// The row's label in the report.
    pub label: String,
    /// Its stage directory's name (unused when the configuration is the main one).
    pub stage: String,
    /// The configuration.
    pub compress: CompressConfig,
}

/// No outlier at all: no mean threshold (`tau_w` beyond every weight), no gradient criterion,
/// and no cluster-size reduction (whose members would become outliers).
fn without_outliers(c: &mut CompressConfig) {
    c.sharing.outliers.tau_w = f64::MAX;
    c.sharing.outliers.grad_top_fraction = 0.0;
    c.sharing.refine.n_min = 0;
}

fn without_ellipses(c: &mut CompressConfig) {
    c.sharing.refine.ellipse.enabled = false;
}

/// The configurations of `table` (empty for the tables without 2DGBNN variants), the main
/// configuration included where the table compares against it.
pub fn variants(setup: &Setup, cfg: &TablesConfig, table: TableId) -> Vec<Variant> {
    let base = &setup.compress;
    let v = |label: String, stage: String, change: &dyn Fn(&mut CompressConfig)| {
        let mut compress = base.clone();
        change(&mut compress);
        Variant {
            table,
            label,
            stage,
            compress,
        }
    };
    match table {
        TableId::EqualSize => vec![
            v("2dgbnn".into(), Method::Gbnn2d.name().into(), &|_| {}),
            v(
                format!("1-D sharing (mu only, K = {})", base.sharing.gmm.k),
                "equal-size-mu-only".into(),
                &|c| c.sharing.space = SharingSpace::MuOnly,
            ),
        ],
        TableId::Ablation => vec![
            v(
                "2dgbnn (outliers and ellipses)".into(),
                Method::Gbnn2d.name().into(),
                &|_| {},
            ),
            v(
                "without ellipses".into(),
                "ablation-no-ellipses".into(),
                &without_ellipses,
            ),
            v(
                "without outliers".into(),
                "ablation-no-outliers".into(),
                &without_outliers,
            ),
            v(
                "without outliers and ellipses".into(),
                "ablation-no-outliers-no-ellipses".into(),
                &|c| {
                    without_outliers(c);
                    without_ellipses(c);
                },
            ),
        ],
        TableId::GmmK => {
            let ks = match cfg.gmm_k.is_empty() {
                true => TablesConfig::default_k(base.sharing.gmm.k),
                false => cfg.gmm_k.clone(),
            };
            ks.into_iter()
                .map(|k| {
                    v(format!("K = {k}"), format!("gmm-k-{k}"), &|c| {
                        c.sharing.gmm.k = k
                    })
                })
                .collect()
        }
        TableId::TauW => cfg
            .tau_w
            .iter()
            .map(|&t| {
                v(format!("tau_w = {t}"), format!("tau-w-{t}"), &|c| {
                    c.sharing.outliers.tau_w = t
                })
            })
            .collect(),
        TableId::Merge => {
            let on = base.sharing.refine.merge.enabled;
            let toggled = |c: &mut CompressConfig| c.sharing.refine.merge.enabled = !on;
            let (before, after) = match on {
                true => (
                    v("before merging (off)".into(), "merge-off".into(), &toggled),
                    v(
                        "after merging (on)".into(),
                        Method::Gbnn2d.name().into(),
                        &|_| {},
                    ),
                ),
                false => (
                    v(
                        "before merging (off)".into(),
                        Method::Gbnn2d.name().into(),
                        &|_| {},
                    ),
                    v("after merging (on)".into(), "merge-on".into(), &toggled),
                ),
            };
            vec![before, after]
        }
        TableId::Main | TableId::Quant | TableId::Ensemble | TableId::Timing | TableId::Auto => {
            Vec::new()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bnn_data::DatasetId;

    fn setup() -> Setup {
        crate::presets::setup(
            DatasetId::FashionMnist,
            None,
            true,
            &crate::data::OodSearch::from_env(std::path::Path::new(".")),
            "out".into(),
        )
    }

    #[test]
    fn each_variant_changes_one_thing_and_includes_the_main_row() {
        let s = setup();
        let cfg = TablesConfig::for_setup(&s);
        let a = variants(&s, &cfg, TableId::Ablation);
        assert_eq!(a.len(), 4);
        assert_eq!(a[0].compress, s.compress);
        assert!(!a[1].compress.sharing.refine.ellipse.enabled);
        assert_eq!(a[2].compress.sharing.outliers.grad_top_fraction, 0.0);
        assert!(!a[3].compress.sharing.refine.ellipse.enabled);
        assert_eq!(a[3].compress.sharing.refine.n_min, 0);
        for v in &a {
            v.compress.validate().unwrap();
        }
        let t = variants(&s, &cfg, TableId::TauW);
        let taus: Vec<f64> = t
            .iter()
            .map(|v| v.compress.sharing.outliers.tau_w)
            .collect();
        assert_eq!(taus, [0.1, 0.2, 0.4, 0.6]);
        // The preset's tau_w is 0.2: that row is the main configuration.
        assert_eq!(t[1].compress, s.compress);
        let m = variants(&s, &cfg, TableId::Merge);
        assert!(!m[0].compress.sharing.refine.merge.enabled);
        assert_eq!(m[1].compress, s.compress);
        let k = variants(&s, &cfg, TableId::GmmK);
        let ks: Vec<usize> = k.iter().map(|v| v.compress.sharing.gmm.k).collect();
        let base = s.compress.sharing.gmm.k;
        assert_eq!(ks, TablesConfig::default_k(base));
        let stages: std::collections::HashSet<_> = [a, t, m, k]
            .iter()
            .flatten()
            .filter(|v| v.compress != s.compress)
            .map(|v| v.stage.clone())
            .collect();
        assert_eq!(
            stages.len(),
            3 + 3 + 1 + 3,
            "one stage per distinct configuration"
        );
    }
}
