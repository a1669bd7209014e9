//! CIFAR, SVHN and image-folder loaders on generated files, and corrupt-file errors.

mod common;

use std::path::Path;

use bnn_data::{
    Cifar100Label, DataError, Dataset, DatasetId, FolderConfig, IDX_IMAGES_MAGIC, IDX_LABELS_MAGIC,
    ImageFolder, MatData, Split, load_cifar10, load_cifar100, load_idx_dir, load_idx_pair,
    load_svhn, load_svhn_mat, open_dir, read_mat,
};
use common::*;

fn err_text<T: std::fmt::Debug>(r: Result<T, DataError>) -> String {
    r.expect_err("expected an error").to_string()
}

#[test]
fn cifar10_in_the_tarball_layout() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("cifar-10-batches-bin");
    std::fs::create_dir(&dir).unwrap();
    for b in 1..=5 {
        write_cifar(
            &dir.join(format!("data_batch_{b}.bin")),
            3,
            (b - 1) * 3,
            |i| vec![(i % 10) as u8],
        );
    }
    write_cifar(&dir.join("test_batch.bin"), 4, 100, |i| {
        vec![(i % 10) as u8]
    });
    // Accepted both as the parent folder and as the folder of .bin files.
    let train = load_cifar10(tmp.path(), Split::Train).unwrap();
    let test = load_cifar10(&dir, Split::Test).unwrap();
    assert_eq!((train.len(), test.len()), (15, 4));
    assert_eq!(train.shape(), (3, 32, 32));
    let s = train.get(7).unwrap();
    assert_eq!(s.label, 7);
    assert_eq!(s.pixels, (0..3072).map(|k| pixel(7, k)).collect::<Vec<_>>());
    assert_eq!(test.get(2).unwrap().label, 2);
    assert!(DatasetId::Cifar10.is_present(tmp.path(), Split::Train));
    let opened = open_dir(DatasetId::Cifar10, Split::Test, tmp.path()).unwrap();
    assert_eq!(opened.len(), 4);
}

#[test]
fn cifar100_fine_and_coarse_labels() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("cifar-100-binary");
    std::fs::create_dir(&dir).unwrap();
    let label = |i: usize| vec![(i % 20) as u8, (i * 7 % 100) as u8];
    write_cifar(&dir.join("train.bin"), 6, 0, label);
    write_cifar(&dir.join("test.bin"), 2, 50, label);
    let fine = load_cifar100(tmp.path(), Split::Train, Cifar100Label::Fine).unwrap();
    let coarse = load_cifar100(tmp.path(), Split::Train, Cifar100Label::Coarse).unwrap();
    assert_eq!(fine.classes(), 100);
    assert_eq!(coarse.classes(), 20);
    assert_eq!(fine.labels(), &[0, 7, 14, 21, 28, 35]);
    assert_eq!(coarse.labels(), &[0, 1, 2, 3, 4, 5]);
    assert_eq!(
        fine.get(5).unwrap().pixels,
        (0..3072).map(|k| pixel(5, k)).collect::<Vec<_>>()
    );
    let test = load_cifar100(&dir, Split::Test, Cifar100Label::Fine).unwrap();
    assert_eq!(test.labels(), &[50, 57]);
}

#[test]
fn cifar_size_not_a_record_multiple_is_a_clear_error() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("test_batch.bin");
    let mut bytes = vec![3u8];
    bytes.extend(vec![0u8; 3072]);
    bytes.extend(vec![1u8; 100]); // a truncated second record
    std::fs::write(&path, bytes).unwrap();
    let msg = err_text(load_cifar10(tmp.path(), Split::Test));
    assert!(
        msg.contains("test_batch.bin") && msg.contains("3073"),
        "{msg}"
    );
    // A CIFAR-100 file read as CIFAR-10 (3074-byte records) is caught the same way.
    let tmp2 = tempfile::tempdir().unwrap();
    write_cifar(&tmp2.path().join("test_batch.bin"), 3, 0, |_| vec![1, 2]);
    let msg = err_text(load_cifar10(tmp2.path(), Split::Test));
    assert!(msg.contains("multiple"), "{msg}");
    // Labels out of range are reported with the record.
    let tmp3 = tempfile::tempdir().unwrap();
    write_cifar(&tmp3.path().join("test_batch.bin"), 2, 0, |i| {
        vec![(i * 11) as u8]
    });
    let msg = err_text(load_cifar10(tmp3.path(), Split::Test));
    assert!(
        msg.contains("record 1") && msg.contains("label 11"),
        "{msg}"
    );
}

fn expected_svhn() -> (Vec<u32>, Vec<Vec<u8>>) {
    let text = include_str!("data/svhn_tiny_expected.txt");
    let mut labels = Vec::new();
    let mut images = Vec::new();
    for line in text.lines() {
        let mut parts = line.split_whitespace();
        let key = parts.next().unwrap();
        if key == "labels" {
            labels = parts.map(|v| v.parse().unwrap()).collect();
        } else {
            images.push(parts.map(|v| v.parse().unwrap()).collect());
        }
    }
    (labels, images)
}

#[test]
fn svhn_mat_written_by_scipy_loads_in_chw_order() {
    let (labels, images) = expected_svhn();
    let data_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data");
    for file in ["svhn_tiny.mat", "svhn_tiny_z.mat"] {
        let data = load_svhn_mat(data_dir.join(file)).unwrap();
        assert_eq!(data.len(), 5, "{file}");
        assert_eq!(data.shape(), (3, 32, 32));
        assert_eq!(data.labels(), &labels[..], "{file}");
        for (i, img) in images.iter().enumerate() {
            assert_eq!(&data.get(i).unwrap().pixels, img, "{file} image {i}");
        }
    }
}

#[test]
fn svhn_mat_matlab_style_compressed_with_narrow_storage() {
    // MATLAB stores the double `y` as miUINT8 when the values fit, and compresses each variable.
    let n = 4;
    let (x, y) = svhn_arrays(n);
    let xm = mat_matrix("X", 9, &[32, 32, 3, n as u32], 2, &x);
    let ym = mat_matrix("y", 6, &[n as u32, 1], 2, &y);
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(
        tmp.path().join("train_32x32.mat"),
        mat_file(&[mat_compressed(&xm), mat_compressed(&ym)]),
    )
    .unwrap();
    let data = load_svhn(tmp.path(), Split::Train).unwrap();
    assert_eq!(data.labels(), &[1, 2, 3, 4]);
    for i in 0..n {
        assert_eq!(
            data.get(i).unwrap().pixels,
            (0..3072).map(|k| pixel(i, k)).collect::<Vec<_>>()
        );
    }
    // Labels 10 mean digit 0; the raw reader exposes the stored values.
    let arrays = read_mat(tmp.path().join("train_32x32.mat")).unwrap();
    assert_eq!(arrays[1].name, "y");
    assert_eq!(arrays[1].data, MatData::U8(vec![1, 2, 3, 4]));
    let y10 = mat_matrix(
        "y",
        6,
        &[2, 1],
        9,
        &[10f64.to_le_bytes(), 3f64.to_le_bytes()].concat(),
    );
    let x2 = mat_matrix("X", 9, &[32, 32, 3, 2], 2, &x[..2 * 3072]);
    let p = tmp.path().join("two.mat");
    std::fs::write(&p, mat_file(&[x2, y10])).unwrap();
    assert_eq!(load_svhn_mat(&p).unwrap().labels(), &[0, 3]);
}

#[test]
fn corrupt_mat_files_give_errors_naming_the_file() {
    let tmp = tempfile::tempdir().unwrap();
    let (x, y) = svhn_arrays(2);
    let good = mat_file(&[
        mat_matrix("X", 9, &[32, 32, 3, 2], 2, &x),
        mat_matrix("y", 6, &[2, 1], 2, &y),
    ]);
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        (
            "truncated.mat",
            good[..good.len() - 300].to_vec(),
            "truncated",
        ),
        ("short.mat", good[..60].to_vec(), "header"),
        ("notmat.mat", b"hello".repeat(40), "MATLAB"),
        (
            "badzlib.mat",
            {
                let mut v = mat_file(&[mat_compressed(&mat_matrix("y", 6, &[2, 1], 2, &y))]);
                let n = v.len();
                for b in &mut v[140..n - 4] {
                    *b ^= 0x5a;
                }
                v
            },
            "compressed",
        ),
        (
            "nox.mat",
            mat_file(&[mat_matrix("y", 6, &[2, 1], 2, &y)]),
            "`X`",
        ),
        (
            "baddims.mat",
            mat_file(&[
                mat_matrix("X", 9, &[32, 32, 3, 3], 2, &x),
                mat_matrix("y", 6, &[2, 1], 2, &y),
            ]),
            "dimensions",
        ),
        (
            "badlabel.mat",
            mat_file(&[
                mat_matrix("X", 9, &[32, 32, 3, 2], 2, &x),
                mat_matrix("y", 6, &[2, 1], 2, &[3, 11]),
            ]),
            "label 11",
        ),
        (
            "hdf5.mat",
            {
                let mut v = b"MATLAB 7.3 MAT-file, Platform: GLNXA64".to_vec();
                v.resize(600, 0);
                v
            },
            "v7.3",
        ),
    ];
    for (name, bytes, needle) in cases {
        let p = tmp.path().join(name);
        std::fs::write(&p, bytes).unwrap();
        let msg = err_text(load_svhn_mat(&p));
        assert!(msg.contains(name), "{name}: {msg}");
        assert!(
            msg.contains(needle),
            "{name}: expected `{needle}` in: {msg}"
        );
    }
}

#[test]
fn idx_gzip_and_raw_and_corruptions() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let pixels: Vec<u8> = (0..3 * 4 * 5).map(|v| v as u8).collect();
    let images = idx(IDX_IMAGES_MAGIC, &[3, 4, 5], &pixels);
    let labels = idx(IDX_LABELS_MAGIC, &[3], &[9, 0, 4]);
    // Train as gzip, test as raw files, with the standard names.
    std::fs::write(d.join("train-images-idx3-ubyte.gz"), gzip(&images)).unwrap();
    std::fs::write(d.join("train-labels-idx1-ubyte.gz"), gzip(&labels)).unwrap();
    std::fs::write(d.join("t10k-images-idx3-ubyte"), &images).unwrap();
    std::fs::write(d.join("t10k-labels-idx1-ubyte"), &labels).unwrap();
    for split in [Split::Train, Split::Test] {
        let data = load_idx_dir(d, split).unwrap();
        assert_eq!(data.shape(), (1, 4, 5));
        assert_eq!(data.labels(), &[9, 0, 4]);
        assert_eq!(data.get(1).unwrap().pixels, pixels[20..40].to_vec());
    }

    let write = |name: &str, bytes: &[u8]| {
        let p = d.join(name);
        std::fs::write(&p, bytes).unwrap();
        p
    };
    let lab = write("labels", &labels);
    // Truncated image data (raw and gzip).
    let t = write("trunc-raw", &images[..images.len() - 7]);
    let msg = err_text(load_idx_pair(&t, &lab, 10));
    assert!(
        msg.contains("trunc-raw") && msg.contains("truncated"),
        "{msg}"
    );
    let gz = gzip(&images);
    let t = write("trunc.gz", &gz[..gz.len() / 2]);
    let msg = err_text(load_idx_pair(&t, &lab, 10));
    assert!(msg.contains("trunc.gz"), "{msg}");
    // Truncated header.
    let t = write("trunc-header", &images[..9]);
    let msg = err_text(load_idx_pair(&t, &lab, 10));
    assert!(
        msg.contains("trunc-header") && msg.contains("header"),
        "{msg}"
    );
    // Wrong magic: labels where images are expected, and garbage.
    let msg = err_text(load_idx_pair(&lab, &lab, 10));
    assert!(msg.contains("2049") && msg.contains("2051"), "{msg}");
    let t = write("garbage", b"\x12\x34\x56\x78rest");
    let msg = err_text(load_idx_pair(&t, &lab, 10));
    assert!(msg.contains("garbage") && msg.contains("magic"), "{msg}");
    // Count mismatch and out-of-range labels.
    let img = write("img", &images);
    let l2 = write("l2", &idx(IDX_LABELS_MAGIC, &[2], &[1, 2]));
    assert!(err_text(load_idx_pair(&img, &l2, 10)).contains("2 labels for 3 images"));
    let l3 = write("l3", &idx(IDX_LABELS_MAGIC, &[3], &[1, 2, 10]));
    assert!(err_text(load_idx_pair(&img, &l3, 10)).contains("label 10"));
    // Missing file.
    let msg = err_text(load_idx_pair(d.join("nope"), &lab, 10));
    assert!(msg.contains("nope"), "{msg}");
}

#[test]
fn image_folder_decodes_resizes_and_orders_classes() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    // Classes created out of order; they must come back sorted by folder name.
    let classes = [("n02000000", [200, 30, 30]), ("n01000000", [20, 200, 40])];
    for split in ["train", "val"] {
        for (wnid, rgb) in classes {
            let d = root.join(split).join(wnid);
            std::fs::create_dir_all(&d).unwrap();
            write_jpeg(&d.join("a.JPEG"), 40, 24, rgb);
            write_jpeg(&d.join("b.jpg"), 20, 30, rgb);
            std::fs::write(d.join("notes.txt"), b"ignored").unwrap();
        }
    }
    let config = FolderConfig {
        resize_shorter: 16,
        crop: 12,
    };
    let train = ImageFolder::imagenet(root, Split::Train, config).unwrap();
    assert_eq!(train.class_names(), &["n01000000", "n02000000"]);
    assert_eq!(train.len(), 4);
    assert_eq!(train.shape(), (3, 12, 12));
    for i in 0..train.len() {
        let s = train.get(i).unwrap();
        assert_eq!(s.shape(), (3, 12, 12));
        assert_eq!(s.label, train.label(i).unwrap());
        let rgb = classes
            .iter()
            .find(|c| c.0 == train.class_names()[s.label as usize])
            .unwrap()
            .1;
        // A flat colour survives JPEG and resizing within a few levels, per channel.
        for (ch, plane) in s.pixels.chunks(144).enumerate() {
            let mean = plane.iter().map(|&v| v as f64).sum::<f64>() / 144.0;
            assert!(
                (mean - rgb[ch] as f64).abs() < 8.0,
                "sample {i} ch {ch}: {mean}"
            );
        }
    }
    assert!(DatasetId::ImageNet.is_present(root, Split::Test));
    let val = ImageFolder::imagenet(root, Split::Test, config).unwrap();
    assert_eq!(val.len(), 4);

    // A corrupt JPEG is a decode error naming the file, not a panic.
    let bad = root.join("train/n01000000/c.JPEG");
    std::fs::write(&bad, b"\xff\xd8\xff\xe0 not really a jpeg").unwrap();
    let train = ImageFolder::imagenet(root, Split::Train, config).unwrap();
    let idx = (0..train.len())
        .find(|&i| train.file(i).unwrap().0 == bad)
        .unwrap();
    let msg = err_text(train.get(idx));
    assert!(msg.contains("c.JPEG"), "{msg}");
    // An empty tree is refused.
    let empty = tempfile::tempdir().unwrap();
    assert!(ImageFolder::open(empty.path(), config).is_err());
}
