//! A user's own data through every command: a `.npz` file (`--dataset npz:FILE`) and class
//! folders of PNG images (`--dataset folder:DIR`), made here, go through train
//! (deterministic, then Bayesian from it), compress, calibrate and eval; bad data sets are
//! refused naming the file.

use std::path::Path;

mod common;
use common::cli::{ok, refused, swbnn};
use common::npz_fixture::{images, npy, write_npz};

/// Trains, compresses, calibrates and evaluates on `dataset`; returns eval's JSON.
fn whole_method(dir: &Path, dataset: &str, train_extra: &[&str]) -> serde_json::Value {
    let p = |name: &str| dir.join(name).to_str().unwrap().to_string();
    let (det, bnn, swb) = (p("det"), p("bnn"), p("m.swb"));
    let common = ["--validation", "500", "--threads", "2"];
    let mut args = vec![
        "train",
        "--dataset",
        dataset,
        "--arch",
        "mlp",
        "--kind",
        "deterministic",
        "--epochs",
        "1",
        "--out",
        &det,
    ];
    args.extend(common);
    args.extend(train_extra);
    ok(&args);
    let mut args = vec![
        "train",
        "--dataset",
        dataset,
        "--arch",
        "mlp",
        "--kind",
        "bayesian",
        "--from",
        &det,
        "--epochs",
        "1",
        "--out",
        &bnn,
    ];
    args.extend(common);
    args.extend(train_extra);
    ok(&args);
    let config: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("bnn/config.json")).unwrap())
            .unwrap();
    let norm = &config["normalization"];
    assert_eq!(norm["mean"].as_array().unwrap().len(), 1, "{config}");
    let (mean, std) = (
        norm["mean"][0].as_f64().unwrap(),
        norm["std"][0].as_f64().unwrap(),
    );
    assert!(
        mean > 0.1 && mean < 0.6 && std > 0.05 && std < 0.5,
        "{norm}"
    );
    assert_eq!(config["trained_on"]["dataset"], dataset);
    assert_eq!(config["classes"], 3);
    ok(&[
        "compress",
        "--model",
        &bnn,
        "--dataset",
        dataset,
        "--out",
        &swb,
        "--k",
        "16",
        "--validation",
        "500",
    ]);
    ok(&["calibrate", &swb, "--dataset", dataset]);
    let (out, err) = ok(&["--json", "eval", &swb, "--dataset", dataset, "--calibrated"]);
    assert!(!err.contains("other data than"), "{err}");
    serde_json::from_str(&out).unwrap()
}

#[test]
fn an_npz_file_goes_through_train_compress_calibrate_and_eval() {
    let dir = tempfile::tempdir().unwrap();
    let (x, y) = images(1400, 8, 1);
    let (xt, yt) = images(300, 8, 2);
    let file = dir.path().join("mine.npz");
    write_npz(
        &file,
        &[
            ("x_train", npy(&[1400, 8, 8], &x)),
            ("y_train", npy(&[1400], &y)),
            ("x_test", npy(&[300, 8, 8, 1], &xt)),
            ("y_test", npy(&[300], &yt)),
        ],
    );
    let dataset = format!("npz:{}", file.display());
    let ev = whole_method(dir.path(), &dataset, &[]);
    let summary = &ev["evaluation"]["summary"];
    assert_eq!(summary["n"], 300);
    assert!(summary["accuracy"].as_f64().unwrap() > 0.6, "{summary}");
    assert!(ev["calibrated"]["temperature"].as_f64().is_some(), "{ev}");

    // Another data set's file, given to the model, is named.
    let swb = dir.path().join("m.swb");
    let o = swbnn(&[
        "eval",
        swb.to_str().unwrap(),
        "--dataset",
        "fashion-mnist",
        "--subset",
        "50",
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("other data than it was trained on") || err.contains("the model takes"),
        "{err}"
    );

    // An OOD set of the user's own: the test split of another file.
    let (xo, yo) = images(200, 8, 3);
    let ood = dir.path().join("ood.npz");
    let flipped: Vec<u8> = xo.iter().map(|v| 255 - v).collect();
    write_npz(
        &ood,
        &[
            ("x_train", npy(&[200, 8, 8], &flipped)),
            ("y_train", npy(&[200], &yo)),
        ],
    );
    let (out, _) = ok(&[
        "--json",
        "eval",
        swb.to_str().unwrap(),
        "--dataset",
        &dataset,
        "--ood",
        &format!("npz:{}", ood.display()),
    ]);
    let ev: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert!(
        ev["evaluation"]["ood_entropy"]["auroc"].as_f64().is_some(),
        "{ev}"
    );
    // The OOD set a number came from is named: its source, folder and file digests.
    assert_eq!(
        ev["ood_set"]["dataset"],
        format!("npz:{}", ood.display()),
        "{ev}"
    );
    assert_eq!(
        ev["ood_set"]["sha256"]["ood.npz"].as_str().unwrap().len(),
        64,
        "{ev}"
    );
}

#[test]
fn class_folders_go_through_the_whole_method_resized_to_one_size() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("photos");
    let names = ["circle", "square", "triangle"];
    // Training images of 10 and 12 pixels, test images of 12.
    for (split, n, seed, side, first) in [
        ("train", 1300, 5, 10, 0),
        ("train", 30, 7, 12, 1300),
        ("test", 150, 6, 12, 0),
    ] {
        let (x, y) = images(n, side, seed);
        for (i, label) in y.iter().enumerate() {
            let d = root.join(split).join(names[*label as usize]);
            std::fs::create_dir_all(&d).unwrap();
            let px = x[i * side * side..(i + 1) * side * side].to_vec();
            image::GrayImage::from_raw(side as u32, side as u32, px)
                .unwrap()
                .save(d.join(format!("{:05}.png", first + i)))
                .unwrap();
        }
    }
    let dataset = format!("folder:{}", root.display());
    // Without a size the mixed sizes are refused, naming a file of the other size.
    refused(
        &[
            "train",
            "--dataset",
            &dataset,
            "--arch",
            "mlp",
            "--kind",
            "deterministic",
            "--out",
            dir.path().join("x").to_str().unwrap(),
            "--validation",
            "500",
        ],
        &["01300.png", "mixed sizes", "--image-size"],
    );
    let ev = whole_method(dir.path(), &dataset, &["--image-size", "8"]);
    assert_eq!(ev["evaluation"]["summary"]["n"], 150);
    let figure = dir.path().join("per-class.svg");
    ok(&[
        "plot",
        "per-class",
        dir.path().join("m.swb").to_str().unwrap(),
        "--dataset",
        &dataset,
        "--samples",
        "4",
        "--out",
        figure.to_str().unwrap(),
    ]);
    let svg = std::fs::read_to_string(&figure).unwrap();
    assert!(
        svg.contains("triangle") && svg.contains("circle"),
        "class names from the folders"
    );
}

#[test]
fn bad_data_sets_are_refused_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let out = out.to_str().unwrap();
    let train = |dataset: &str, needles: &[&str]| {
        refused(
            &[
                "train",
                "--dataset",
                dataset,
                "--arch",
                "mlp",
                "--kind",
                "deterministic",
                "--out",
                out,
                "--validation",
                "0",
            ],
            needles,
        )
    };
    let bad = dir.path().join("bad.npz");
    let (x, _) = images(10, 4, 1);
    write_npz(
        &bad,
        &[
            ("x_train", npy(&[10, 4, 4], &x)),
            ("y_train", npy(&[9], &[0; 9])),
        ],
    );
    train(
        &format!("npz:{}", bad.display()),
        &["bad.npz", "10 images", "9 labels"],
    );
    train(
        &format!("npz:{}", dir.path().join("missing.npz").display()),
        &["missing.npz"],
    );
    let empty = dir.path().join("empty");
    std::fs::create_dir_all(empty.join("a")).unwrap();
    std::fs::create_dir_all(empty.join("b")).unwrap();
    train(
        &format!("folder:{}", empty.display()),
        &["empty class folder"],
    );
    train("photos", &["unknown data set", "folder:DIR", "npz:FILE"]);
    refused(
        &[
            "train",
            "--dataset",
            "fashion-mnist",
            "--image-size",
            "8",
            "--arch",
            "mlp",
            "--kind",
            "deterministic",
            "--out",
            out,
        ],
        &["--image-size"],
    );
}
