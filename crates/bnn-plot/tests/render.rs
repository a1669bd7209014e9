//! Every figure, drawn from small fixed inputs into PNG and SVG: the PNG decodes to the
//! requested size, the SVG is well-formed XML whose root has the requested width and height,
//! and bad inputs are errors that name what is wrong.

mod fixtures;

use std::path::{Path, PathBuf};

use bnn_plot::*;

fn check_png(path: &Path, size: Size) {
    let img = image::open(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert_eq!(
        (img.width(), img.height()),
        (size.width, size.height),
        "{}",
        path.display()
    );
    // Something was drawn: not a blank page.
    let rgb = img.to_rgb8();
    let dark = rgb
        .pixels()
        .filter(|p| p.0.iter().all(|&c| c < 128))
        .count();
    assert!(dark > 100, "{}: only {dark} dark pixels", path.display());
}

fn check_svg(path: &Path, size: Size) {
    let text = std::fs::read_to_string(path).unwrap();
    let doc = roxmltree::Document::parse(&text)
        .unwrap_or_else(|e| panic!("{}: not well-formed XML: {e}", path.display()));
    let root = doc.root_element();
    assert_eq!(root.tag_name().name(), "svg");
    assert_eq!(
        root.attribute("width"),
        Some(size.width.to_string().as_str())
    );
    assert_eq!(
        root.attribute("height"),
        Some(size.height.to_string().as_str())
    );
    assert!(
        root.descendants().any(|n| n.has_tag_name("text")),
        "{}: no text",
        path.display()
    );
}

/// Draws with `draw` into `name.png` and `name.svg` in a fresh directory and checks both.
fn both(name: &str, size: Size, draw: impl Fn(&Path) -> Result<()>) {
    let dir = tempfile::tempdir().unwrap();
    for ext in ["png", "svg"] {
        let path: PathBuf = dir.path().join(format!("{name}.{ext}"));
        draw(&path).unwrap_or_else(|e| panic!("{name}.{ext}: {e}"));
        if ext == "png" {
            check_png(&path, size);
        } else {
            check_svg(&path, size);
        }
    }
    // Only the two figures are left: no temporary files.
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 2);
}

#[test]
fn reliability_renders() {
    let d = fixtures::diagrams();
    let panels: Vec<ReliabilityPanel> = d
        .iter()
        .map(|(name, diagram)| ReliabilityPanel { name, diagram })
        .collect();
    let size = Size::new(960, 480);
    both("reliability", size, |p| reliability(&panels, size, p));
    let size = Size::new(400, 360);
    both("reliability-one", size, |p| {
        reliability(&panels[..1], size, p)
    });
}

fn ood_plot(u: &fixtures::UncertaintySets, mi: bool) -> OodPlot<'_> {
    OodPlot {
        title: "OOD",
        in_name: "in (test)",
        out_name: "out (OOD)",
        in_dist: Uncertainties {
            max_prob: &u.in_max,
            entropy: &u.in_entropy,
            mutual_information: mi.then_some(&u.in_mi[..]),
        },
        out_dist: Uncertainties {
            max_prob: &u.out_max,
            entropy: &u.out_entropy,
            mutual_information: mi.then_some(&u.out_mi[..]),
        },
    }
}

#[test]
fn ood_renders_with_and_without_mutual_information() {
    let u = fixtures::uncertainties();
    let size = Size::new(800, 600);
    both("ood", size, |p| ood(&ood_plot(&u, true), size, p));
    both("ood-no-mi", size, |p| ood(&ood_plot(&u, false), size, p));
}

#[test]
fn weights_render_as_dots_and_as_density() {
    let size = Size::new(900, 600);
    for (n, k, name) in [(2_000, 8, "weights-dots"), (30_000, 100, "weights-density")] {
        let w = fixtures::weights(n, k);
        let data = WeightsPlot {
            title: name,
            mu: &w.mu,
            sigma: &w.sigma,
            fates: &w.fates,
            gaussians: &w.gaussians,
        };
        for axis in [SigmaAxis::Auto, SigmaAxis::Linear, SigmaAxis::Log] {
            let options = WeightsOptions {
                sigma_axis: axis,
                max_ellipses: 20,
                ..Default::default()
            };
            both(name, size, |p| weights(&data, &options, size, p));
        }
    }
    // Centres without covariances (a .swb file's view).
    let w = fixtures::weights(3000, 6);
    let centres: Vec<Gaussian> = w
        .gaussians
        .iter()
        .map(|g| Gaussian {
            mean: g.mean,
            cov: None,
        })
        .collect();
    let data = WeightsPlot {
        title: "centres",
        mu: &w.mu,
        sigma: &w.sigma,
        fates: &w.fates,
        gaussians: &centres,
    };
    both("weights-centres", size, |p| {
        weights(&data, &WeightsOptions::default(), size, p)
    });
    // Without Gaussians: component indices only colour the points.
    let w = fixtures::weights(500, 4);
    let data = WeightsPlot {
        title: "no Gaussians",
        mu: &w.mu,
        sigma: &w.sigma,
        fates: &w.fates,
        gaussians: &[],
    };
    both("weights-plain", size, |p| {
        weights(&data, &WeightsOptions::default(), size, p)
    });
}

#[test]
fn per_class_renders() {
    let (conf, class) = fixtures::per_class(800);
    let mut names = fixtures::class_names();
    let size = Size::new(900, 500);
    fn plot<'a>(names: &'a [String], conf: &'a [f64], class: &'a [u32]) -> PerClassPlot<'a> {
        PerClassPlot {
            title: "per class",
            class_names: names,
            class_axis: "true class",
            value_axis: "confidence",
            confidence: conf,
            class,
        }
    }
    both("per-class", size, |p| {
        per_class(&plot(&names, &conf, &class), size, p)
    });
    // A class without examples is labelled, not an error.
    names.push("Empty class".into());
    both("per-class-empty", size, |p| {
        per_class(&plot(&names, &conf, &class), size, p)
    });
}

#[test]
fn corruptions_render() {
    let series = fixtures::corruption_series();
    let size = Size::new(1000, 380);
    both("corruptions", size, |p| corruptions(&series, size, p));
}

/// Two regression networks' coverage curves: one over-confident (below the diagonal), one
/// calibrated; and the errors a bad point gives.
#[test]
fn coverage_renders_and_refuses_bad_points() {
    use bnn_metrics::CoveragePoint;
    let levels: Vec<f64> = (1..20).map(|i| i as f64 * 0.05).collect();
    let sharp: Vec<CoveragePoint> = levels
        .iter()
        .map(|&level| CoveragePoint {
            level,
            coverage: level * level,
        })
        .collect();
    let calibrated: Vec<CoveragePoint> = levels
        .iter()
        .map(|&level| CoveragePoint {
            level,
            coverage: level,
        })
        .collect();
    let series = [
        CoverageSeries {
            name: "over-confident",
            points: &sharp,
        },
        CoverageSeries {
            name: "calibrated",
            points: &calibrated,
        },
    ];
    let size = Size::new(600, 560);
    both("coverage", size, |p| coverage(&series, size, p));
    let dir = tempfile::tempdir().unwrap();
    let png = dir.path().join("c.png");
    assert!(
        coverage(&[], size, &png)
            .unwrap_err()
            .to_string()
            .contains("none given")
    );
    let bad = [CoveragePoint {
        level: 0.5,
        coverage: 1.5,
    }];
    let e = coverage(
        &[CoverageSeries {
            name: "x",
            points: &bad,
        }],
        size,
        &png,
    )
    .unwrap_err();
    assert!(e.to_string().contains("not a level and a coverage"), "{e}");
    assert!(!png.exists());
}

#[test]
fn bad_paths_and_sizes_are_errors() {
    let dir = tempfile::tempdir().unwrap();
    let series = fixtures::corruption_series();
    let e = corruptions(&series, Size::new(1000, 400), &dir.path().join("c.jpg")).unwrap_err();
    assert!(matches!(e, PlotError::UnsupportedFormat { .. }), "{e}");
    let e = corruptions(&series, Size::new(100, 400), &dir.path().join("c.png")).unwrap_err();
    assert!(matches!(e, PlotError::BadSize { .. }), "{e}");
    let e = corruptions(
        &series,
        Size::new(1000, 400),
        &dir.path().join("missing/c.png"),
    )
    .unwrap_err();
    assert!(matches!(e, PlotError::Io { .. }), "{e}");
    assert!(e.to_string().contains("missing"), "{e}");
    // Three reliability panels need 300 px each.
    let d = fixtures::diagrams();
    let panels: Vec<ReliabilityPanel> = d
        .iter()
        .map(|(name, diagram)| ReliabilityPanel { name, diagram })
        .collect();
    let e = reliability(&panels, Size::new(800, 400), &dir.path().join("r.png")).unwrap_err();
    assert!(
        matches!(e, PlotError::BadSize { min_width: 900, .. }),
        "{e}"
    );
}

#[test]
fn bad_inputs_are_errors_naming_the_problem() {
    let dir = tempfile::tempdir().unwrap();
    let png = dir.path().join("x.png");
    let size = Size::new(900, 600);

    let e = reliability(&[], size, &png).unwrap_err();
    assert!(e.to_string().contains("none given"), "{e}");

    let u = fixtures::uncertainties();
    let mut plot = ood_plot(&u, true);
    plot.out_dist.mutual_information = None;
    let e = ood(&plot, size, &png).unwrap_err();
    assert!(e.to_string().contains("one data set only"), "{e}");
    let short = &u.in_entropy[..10];
    let mut plot = ood_plot(&u, false);
    plot.in_dist.entropy = short;
    assert!(matches!(
        ood(&plot, size, &png),
        Err(PlotError::BadInput { .. })
    ));
    let nan = vec![f64::NAN; u.in_max.len()];
    let mut plot = ood_plot(&u, false);
    plot.in_dist.max_prob = &nan;
    let e = ood(&plot, size, &png).unwrap_err();
    assert!(e.to_string().contains("not finite"), "{e}");

    let w = fixtures::weights(100, 3);
    let fates = vec![PointFate::Shared(7); 100];
    let data = WeightsPlot {
        title: "",
        mu: &w.mu,
        sigma: &w.sigma,
        fates: &fates,
        gaussians: &w.gaussians,
    };
    let e = weights(&data, &WeightsOptions::default(), size, &png).unwrap_err();
    assert!(e.to_string().contains("weight 0 shares Gaussian 7"), "{e}");
    let mut sigma = w.sigma.clone();
    sigma[3] = 0.0;
    let data = WeightsPlot {
        title: "",
        mu: &w.mu,
        sigma: &sigma,
        fates: &w.fates,
        gaussians: &w.gaussians,
    };
    let log = WeightsOptions {
        sigma_axis: SigmaAxis::Log,
        ..Default::default()
    };
    let e = weights(&data, &log, size, &png).unwrap_err();
    assert!(e.to_string().contains("log sigma axis"), "{e}");
    let mut bad = w.gaussians.clone();
    bad[1].cov = Some([[-1.0, 0.0], [0.0, 1.0]]);
    let data = WeightsPlot {
        title: "",
        mu: &w.mu,
        sigma: &w.sigma,
        fates: &w.fates,
        gaussians: &bad,
    };
    let e = weights(&data, &WeightsOptions::default(), size, &png).unwrap_err();
    assert!(e.to_string().contains("Gaussian 1"), "{e}");

    let names = fixtures::class_names();
    let e = per_class(
        &PerClassPlot {
            title: "",
            class_names: &names,
            class_axis: "",
            value_axis: "",
            confidence: &[0.5, 1.5],
            class: &[0, 1],
        },
        size,
        &png,
    )
    .unwrap_err();
    assert!(e.to_string().contains("outside [0, 1]"), "{e}");
    let e = per_class(
        &PerClassPlot {
            title: "",
            class_names: &names,
            class_axis: "",
            value_axis: "",
            confidence: &[0.5],
            class: &[10],
        },
        size,
        &png,
    )
    .unwrap_err();
    assert!(e.to_string().contains("class 10"), "{e}");

    let mut s = fixtures::corruption_series();
    s[1].severity[2] = 0.5;
    let e = corruptions(&s, Size::new(1000, 400), &png).unwrap_err();
    assert!(e.to_string().contains("not increasing"), "{e}");
    // Nothing was written by the failed calls.
    assert!(!png.exists());
}
