//! The targets: each reader of untrusted bytes with its valid seed inputs.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use bnn_data::{Compose, DataLoader, InMemoryDataset, LoaderConfig};
use bnn_models::{Arch, Kind, ModelConfig};
use bnn_train::{Checkpointer, Silent, TrainConfig, load_model, train};
use burn::prelude::*;
use swshare::format::{SaveOptions, SharedModelData};
use swshare::{OutlierCause, WeightFate};

use super::{Fuzzee, harness};

// ---- .swb -------------------------------------------------------------------------------

/// Roles 0 to 3 are whole files (one per [`SaveOptions`]); role 4 is the architecture JSON
/// alone, put into an otherwise valid file, so architectures reach the model builder.
pub(crate) struct SwbTarget {
    seeds: Vec<Vec<u8>>,
    data: SharedModelData,
    device: Device,
}

/// A tiny shared MLP file with every fate: shared, ellipse and outlier weights.
fn swb_seed(device: &Device) -> Result<SharedModelData> {
    let config =
        ModelConfig::for_input(Arch::Mlp, Kind::Bayesian, 4, 1, 4).with_mlp_hidden(vec![6]);
    let mut data = swshare::burn_edges::uniform_swb(&config, device)?;
    let mut arch: serde_json::Value = serde_json::from_str(&data.arch)?;
    arch["codebook_len"] = 3.into();
    data.arch = arch.to_string();
    data.codebook_mu = vec![-0.1, 0.0, 0.1];
    data.codebook_rho = vec![-5.0, -4.0, -3.0];
    let causes = [
        OutlierCause::MeanThreshold,
        OutlierCause::Gradient,
        OutlierCause::SmallCluster,
    ];
    let mut n_ellipse = 0;
    for (i, fate) in data.fates.iter_mut().enumerate() {
        *fate = if i % 7 == 3 {
            let c = causes[i % 3];
            data.outlier_mu.push(0.01 * i as f32);
            data.outlier_rho.push(-4.0);
            data.outlier_causes.push(c);
            WeightFate::Outlier(c)
        } else if i % 11 == 5 {
            data.ellipses.push(swshare::format::EllipseEntry {
                components: vec![0, 2],
                alphas: vec![0.25, 0.75],
            });
            n_ellipse += 1;
            WeightFate::Ellipse(n_ellipse - 1)
        } else {
            WeightFate::Shared((i % 3) as u32)
        };
    }
    for t in &mut data.unshared {
        for (j, v) in t.data.iter_mut().enumerate() {
            *v = 0.01 * j as f32 - 3.0 * (t.path.ends_with("rho") as u8 as f32);
        }
    }
    Ok(data)
}

impl SwbTarget {
    pub(crate) fn new() -> Result<Self> {
        let device = bnn_layers::device_by_name("flex")?;
        let data = swb_seed(&device)?;
        let mut seeds: Vec<Vec<u8>> = SaveOptions::ALL
            .iter()
            .map(|o| swshare::format::to_bytes(&data, o))
            .collect::<Result<_, _>>()?;
        seeds.push(data.arch.clone().into_bytes());
        Ok(Self {
            seeds,
            data,
            device,
        })
    }
}

impl Fuzzee for SwbTarget {
    fn seeds(&self) -> &[Vec<u8>] {
        &self.seeds
    }

    fn fix(&self, role: usize, input: &mut Vec<u8>) {
        if role != 4 {
            fix_swb_frame(input);
        }
    }

    fn run(&mut self, role: usize, input: &[u8]) -> Result<bool> {
        let bytes;
        let input = if role == 4 {
            let Ok(arch) = std::str::from_utf8(input) else {
                return Ok(false);
            };
            let data = SharedModelData {
                arch: arch.to_string(),
                ..self.data.clone()
            };
            bytes = harness(swshare::format::to_bytes(&data, &SaveOptions::default()))?;
            &bytes[..]
        } else {
            input
        };
        // As `swbnn eval` and `inspect` read a file: the architecture checked before the index.
        let Ok((data, _)) =
            swshare::burn_edges::swb_from_bytes::<bnn_models::ModelConfig>(input, &self.device)
        else {
            return Ok(false);
        };
        Ok(swshare::burn_edges::from_swb::<bnn_models::ModelConfig>(&data, &self.device).is_ok())
    }
}

// ---- .swb decode cost -------------------------------------------------------------------

/// Files with range-coded indices over large codebooks and many layers, where table
/// building dominates: each decode's work must stay within [`COST_PER_BYTE`](super::COST_PER_BYTE)
/// per byte of the input.
pub(crate) struct SwbCostTarget {
    seeds: Vec<Vec<u8>>,
    last_work: u64,
}

/// A format-only model: `k` codebook entries, the given layer sizes, symbols cycling over a
/// few entries per layer, one outlier and one ellipse.
fn cost_seed(k: u32, layers: &[usize]) -> SharedModelData {
    let n: usize = layers.iter().sum();
    let mut fates: Vec<WeightFate> = (0..n)
        .map(|i| WeightFate::Shared(((i * 7 + i / 50) % 9) as u32 % k))
        .collect();
    fates[n / 2] = WeightFate::Outlier(OutlierCause::Gradient);
    fates[n / 3] = WeightFate::Ellipse(0);
    SharedModelData {
        arch: r#"{"name":"cost"}"#.into(),
        codebook_mu: (0..k).map(|c| c as f32 * 1e-3).collect(),
        codebook_rho: vec![-5.0; k as usize],
        layers: layers
            .iter()
            .enumerate()
            .map(|(i, &s)| swshare::format::LayerShape {
                path: format!("l{i}.weight"),
                shape: vec![s],
            })
            .collect(),
        fates,
        ellipses: vec![swshare::format::EllipseEntry {
            components: vec![0, 1],
            alphas: vec![0.5, 0.5],
        }],
        outlier_mu: vec![0.3],
        outlier_rho: vec![-4.0],
        outlier_causes: vec![OutlierCause::Gradient],
        unshared: Vec::new(),
        temperature: None,
        conformal: None,
    }
}

impl SwbCostTarget {
    pub(crate) fn new() -> Result<Self> {
        let opts = SaveOptions {
            entropy_index: true,
            int8_outliers: false,
        };
        let models = [
            cost_seed(300, &[1, 2, 3, 50, 200, 1, 1, 400]),
            cost_seed(2000, &[20; 40]),
            cost_seed(6, &[5; 60]),
        ];
        let mut seeds: Vec<Vec<u8>> = models
            .iter()
            .map(|m| swshare::format::to_bytes(m, &opts))
            .collect::<Result<_, _>>()?;
        seeds.push(swshare::format::to_bytes(
            &models[0],
            &SaveOptions::default(),
        )?);
        Ok(Self {
            seeds,
            last_work: 0,
        })
    }
}

impl Fuzzee for SwbCostTarget {
    fn seeds(&self) -> &[Vec<u8>] {
        &self.seeds
    }

    fn fix(&self, _role: usize, input: &mut Vec<u8>) {
        fix_swb_frame(input);
    }

    fn run(&mut self, _role: usize, input: &[u8]) -> Result<bool> {
        let before = swshare::format::decode_work();
        let accepted = swshare::format::from_bytes(input).is_ok();
        self.last_work = swshare::format::decode_work() - before;
        Ok(accepted)
    }

    fn cost(&self, input: &[u8]) -> Option<(u64, u64)> {
        Some((self.last_work, super::COST_PER_BYTE * input.len() as u64))
    }
}

/// Sets a `.swb` file's payload length and CRC-32 to match its bytes.
fn fix_swb_frame(input: &mut [u8]) {
    // Header: 7 magic, 2 version, 1 kind, 8 payload length; CRC-32 last.
    let header = swshare::format::HEADER_LEN;
    let crc_len = swshare::format::CHECKSUM_LEN;
    if input.len() < header + crc_len {
        return;
    }
    let payload = (input.len() - header - crc_len) as u64;
    input[header - 8..header].copy_from_slice(&payload.to_le_bytes());
    let body = input.len() - crc_len;
    let crc = crc32fast::hash(&input[..body]);
    input[body..].copy_from_slice(&crc.to_le_bytes());
}

// ---- IDX --------------------------------------------------------------------------------

pub(crate) struct IdxTarget {
    seeds: Vec<Vec<u8>>,
    dir: PathBuf,
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(bytes).expect("writing to memory");
    gz.finish().expect("writing to memory")
}

impl IdxTarget {
    pub(crate) fn new(dir: &Path) -> Self {
        let mut images = 0x0000_0803u32.to_be_bytes().to_vec();
        for d in [3u32, 5, 5] {
            images.extend_from_slice(&d.to_be_bytes());
        }
        images.extend((0..75).map(|i| (i * 7 % 256) as u8));
        let mut labels = 0x0000_0801u32.to_be_bytes().to_vec();
        labels.extend_from_slice(&3u32.to_be_bytes());
        labels.extend([1, 9, 0]);
        // Roles: raw images, raw labels, gzip images, gzip labels.
        let seeds = vec![images.clone(), labels.clone(), gzip(&images), gzip(&labels)];
        Self {
            seeds,
            dir: dir.to_path_buf(),
        }
    }
}

impl Fuzzee for IdxTarget {
    fn seeds(&self) -> &[Vec<u8>] {
        &self.seeds
    }

    fn run(&mut self, role: usize, input: &[u8]) -> Result<bool> {
        let (images, labels) = (self.dir.join("images"), self.dir.join("labels"));
        let is_images = role.is_multiple_of(2);
        harness(std::fs::write(
            if is_images { &images } else { &labels },
            input,
        ))?;
        harness(std::fs::write(
            if is_images { &labels } else { &images },
            &self.seeds[if is_images { 1 } else { 0 }],
        ))?;
        Ok(bnn_data::load_idx_pair(&images, &labels, 10).is_ok())
    }
}

// ---- CIFAR ------------------------------------------------------------------------------

pub(crate) struct CifarTarget {
    seeds: Vec<Vec<u8>>,
    path: PathBuf,
}

impl CifarTarget {
    pub(crate) fn new(dir: &Path) -> Self {
        let record = |labels: &[u8], i: usize| {
            let mut r = labels.to_vec();
            r.extend((0..bnn_data::CIFAR_IMAGE_BYTES).map(|k| ((i * 31 + k) % 256) as u8));
            r
        };
        let c10: Vec<u8> = (0..3).flat_map(|i| record(&[i as u8 * 3], i)).collect();
        let c100: Vec<u8> = (0..2)
            .flat_map(|i| record(&[i as u8 * 7, 40 + i as u8], i))
            .collect();
        Self {
            seeds: vec![c10, c100],
            path: dir.join("batch.bin"),
        }
    }
}

impl Fuzzee for CifarTarget {
    fn seeds(&self) -> &[Vec<u8>] {
        &self.seeds
    }

    fn run(&mut self, role: usize, input: &[u8]) -> Result<bool> {
        harness(std::fs::write(&self.path, input))?;
        let (mut pixels, mut labels) = (Vec::new(), Vec::new());
        let (label_bytes, at, classes) = if role == 0 { (1, 0, 10) } else { (2, 1, 100) };
        Ok(bnn_data::read_cifar_file(
            &self.path,
            label_bytes,
            at,
            classes,
            &mut pixels,
            &mut labels,
        )
        .is_ok())
    }
}

// ---- SVHN MAT ---------------------------------------------------------------------------

pub(crate) struct MatTarget {
    seeds: Vec<Vec<u8>>,
    path: PathBuf,
}

fn mat_element(ty: u32, data: &[u8]) -> Vec<u8> {
    let mut v = ty.to_le_bytes().to_vec();
    v.extend((data.len() as u32).to_le_bytes());
    v.extend_from_slice(data);
    while !v.len().is_multiple_of(8) {
        v.push(0);
    }
    v
}

fn mat_matrix(name: &str, class: u8, dims: &[u32], storage: u32, data: &[u8]) -> Vec<u8> {
    let mut body = Vec::new();
    let mut flags = u32::from(class).to_le_bytes().to_vec();
    flags.extend([0u8; 4]);
    body.extend(mat_element(6, &flags));
    let dims: Vec<u8> = dims
        .iter()
        .flat_map(|d| (*d as i32).to_le_bytes())
        .collect();
    body.extend(mat_element(5, &dims));
    let mut small = (((name.len() as u32) << 16) | 1).to_le_bytes().to_vec();
    let mut padded = name.as_bytes().to_vec();
    padded.resize(4, 0);
    small.extend(padded);
    body.extend(small);
    body.extend(mat_element(storage, data));
    mat_element(14, &body)
}

fn mat_file(elements: &[Vec<u8>]) -> Vec<u8> {
    let mut header = b"MATLAB 5.0 MAT-file, written by cargo xtask fuzz".to_vec();
    header.resize(116, b' ');
    header.extend([0u8; 8]);
    header.extend(0x0100u16.to_le_bytes());
    header.extend(b"IM");
    for e in elements {
        header.extend(e);
    }
    header
}

fn mat_compressed(element: &[u8]) -> Vec<u8> {
    let mut enc = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::fast());
    enc.write_all(element).expect("writing to memory");
    let z = enc.finish().expect("writing to memory");
    let mut v = 15u32.to_le_bytes().to_vec();
    v.extend((z.len() as u32).to_le_bytes());
    v.extend(z);
    v
}

impl MatTarget {
    pub(crate) fn new(dir: &Path) -> Self {
        let n = 3;
        let x: Vec<u8> = (0..4 * 4 * 3 * n).map(|i| (i * 13 % 256) as u8).collect();
        let x = mat_matrix("X", 9, &[4, 4, 3, n as u32], 2, &x);
        let y_u8 = mat_matrix("y", 6, &[n as u32, 1], 2, &[1, 10, 5]);
        let y_f64: Vec<u8> = [1.0f64, 10.0, 5.0]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        let y_f64 = mat_matrix("y", 6, &[n as u32, 1], 9, &y_f64);
        let seeds = vec![
            mat_file(&[x.clone(), y_f64.clone()]),
            mat_file(&[mat_compressed(&x), mat_compressed(&y_u8)]),
        ];
        Self {
            seeds,
            path: dir.join("test_32x32.mat"),
        }
    }
}

impl Fuzzee for MatTarget {
    fn seeds(&self) -> &[Vec<u8>] {
        &self.seeds
    }

    fn run(&mut self, _role: usize, input: &[u8]) -> Result<bool> {
        harness(std::fs::write(&self.path, input))?;
        Ok(bnn_data::load_svhn_mat(&self.path).is_ok())
    }
}

// ---- .npy -------------------------------------------------------------------------------

pub(crate) struct NpyTarget {
    seeds: Vec<Vec<u8>>,
}

impl NpyTarget {
    pub(crate) fn new() -> Result<Self> {
        let data: Vec<f32> = (0..12).map(|i| i as f32 * 0.5 - 2.0).collect();
        let seeds = [&[6usize, 2][..], &[12], &[2, 3, 2]]
            .iter()
            .map(|shape| gmm_minibatch::npy::encode_f32(shape, &data))
            .collect::<Result<_, _>>()?;
        Ok(Self { seeds })
    }
}

impl Fuzzee for NpyTarget {
    fn seeds(&self) -> &[Vec<u8>] {
        &self.seeds
    }

    fn run(&mut self, _role: usize, input: &[u8]) -> Result<bool> {
        Ok(gmm_minibatch::npy::parse_f32(input).is_ok())
    }
}

// ---- model directory and checkpoint -----------------------------------------------------

/// The files of a checkpointed model directory, in role order.
const CHECKPOINT_FILES: [&str; 5] = [
    "config.json",
    "state.json",
    "checkpoints/epoch-1/model.bpk",
    "checkpoints/epoch-1/optimizer.bpk",
    "model.bpk",
];

pub(crate) struct CheckpointTarget {
    seeds: Vec<Vec<u8>>,
    work: PathBuf,
    loader: DataLoader,
    train_config: TrainConfig,
    device: Device,
}

fn tiny_loader() -> Result<DataLoader> {
    let pixels: Vec<u8> = (0..32 * 16).map(|i| ((i * 37) % 251) as u8).collect();
    let labels: Vec<u32> = (0..32).map(|i| i % 4).collect();
    let data = InMemoryDataset::new(pixels, labels, (1, 4, 4), 4)?;
    let config = LoaderConfig {
        batch_size: 16,
        shuffle: true,
        drop_last: false,
        seed: 0,
        workers: 0,
        prefetch: 1,
    };
    Ok(DataLoader::new(data, Compose::new(), config)?)
}

impl CheckpointTarget {
    pub(crate) fn new(dir: &Path) -> Result<Self> {
        let device = bnn_layers::device_by_name("flex")?.autodiff();
        let seed_dir = dir.join("seed");
        let config =
            ModelConfig::for_input(Arch::Mlp, Kind::Bayesian, 4, 1, 4).with_mlp_hidden(vec![6]);
        let mut train_config = TrainConfig::bayes_by_backprop(1);
        train_config.batch_size = 16;
        let loader = tiny_loader()?;
        {
            let ck = Checkpointer::new(&seed_dir)?;
            std::fs::write(
                seed_dir.join("config.json"),
                serde_json::to_vec_pretty(&config)?,
            )?;
            train(
                config.init(&device)?,
                &loader,
                &train_config,
                Some(&ck),
                &mut Silent,
            )?;
        }
        let seeds = CHECKPOINT_FILES
            .iter()
            .map(|f| std::fs::read(seed_dir.join(f)).with_context(|| f.to_string()))
            .collect::<Result<_>>()?;
        Ok(Self {
            seeds,
            work: dir.join("work"),
            loader,
            train_config,
            device,
        })
    }

    /// The CRC-32 that `state.json` records for the epoch file of `role`, replaced by the
    /// mutated file's, so the mutation reaches burn's decoders.
    fn state_with_crc(&self, role: usize, input: &[u8]) -> Option<Vec<u8>> {
        let key = match role {
            2 => "model_crc32",
            3 => "optimizer_crc32",
            _ => return None,
        };
        let mut state: serde_json::Value = serde_json::from_slice(&self.seeds[1]).ok()?;
        state["commit"][key] = crc32fast::hash(input).into();
        serde_json::to_vec(&state).ok()
    }
}

impl Fuzzee for CheckpointTarget {
    fn seeds(&self) -> &[Vec<u8>] {
        &self.seeds
    }

    fn fix(&self, role: usize, input: &mut Vec<u8>) {
        // Marks the input: the state written in `run` then records its checksum.
        if role == 2 || role == 3 {
            input.push(0xC5);
            input.push(0x5C);
        }
    }

    fn run(&mut self, role: usize, input: &[u8]) -> Result<bool> {
        let (input, fixed) = match input {
            [rest @ .., 0xC5, 0x5C] if role == 2 || role == 3 => (rest, true),
            other => (other, false),
        };
        if self.work.exists() {
            harness(std::fs::remove_dir_all(&self.work))?;
        }
        harness(std::fs::create_dir_all(
            self.work.join("checkpoints/epoch-1"),
        ))?;
        for (r, name) in CHECKPOINT_FILES.iter().enumerate() {
            let bytes: &[u8] = if r == role { input } else { &self.seeds[r] };
            harness(std::fs::write(self.work.join(name), bytes))?;
        }
        if fixed && let Some(state) = self.state_with_crc(role, input) {
            harness(std::fs::write(self.work.join("state.json"), state))?;
        }
        // As `swbnn train --resume` and `swbnn eval DIR` read a directory.
        let Ok(text) = std::fs::read_to_string(self.work.join("config.json")) else {
            return Ok(false);
        };
        let Ok(config) = serde_json::from_str::<ModelConfig>(&text) else {
            return Ok(false);
        };
        let Ok(model) = config.init(&self.device) else {
            return Ok(false);
        };
        let evaluated = load_model(&self.work.join("model.bpk"), model.clone()).is_ok();
        let Ok(ck) = Checkpointer::new(&self.work) else {
            return Ok(false);
        };
        let resumed = train(
            model,
            &self.loader,
            &self.train_config,
            Some(&ck),
            &mut Silent,
        )
        .is_ok();
        Ok(evaluated && resumed)
    }
}

// ---- .npz -------------------------------------------------------------------------------

/// A zip archive of `members`, each stored or deflated (as `np.savez` and
/// `np.savez_compressed` write them), written by hand: xtask has no zip writer.
fn zip_archive(members: &[(&str, Vec<u8>)], deflate: bool) -> Vec<u8> {
    let (mut out, mut central) = (Vec::new(), Vec::new());
    let u16le = |v: &mut Vec<u8>, x: u16| v.extend(x.to_le_bytes());
    let u32le = |v: &mut Vec<u8>, x: u32| v.extend(x.to_le_bytes());
    for (name, data) in members {
        let stored = if deflate {
            let mut enc =
                flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::default());
            enc.write_all(data).expect("writing to memory");
            enc.finish().expect("writing to memory")
        } else {
            data.clone()
        };
        let crc = crc32fast::hash(data);
        let offset = out.len() as u32;
        let method = if deflate { 8 } else { 0 };
        // Local header: signature, version 2.0, flags, method, time, date, CRC, sizes, name.
        u32le(&mut out, 0x0403_4b50);
        for x in [20, 0, method, 0, 0x21] {
            u16le(&mut out, x);
        }
        for x in [crc, stored.len() as u32, data.len() as u32] {
            u32le(&mut out, x);
        }
        u16le(&mut out, name.len() as u16);
        u16le(&mut out, 0);
        out.extend(name.as_bytes());
        out.extend(&stored);
        // Central directory record of the same member.
        u32le(&mut central, 0x0201_4b50);
        for x in [20, 20, 0, method, 0, 0x21] {
            u16le(&mut central, x);
        }
        for x in [crc, stored.len() as u32, data.len() as u32] {
            u32le(&mut central, x);
        }
        for x in [name.len() as u16, 0, 0, 0, 0] {
            u16le(&mut central, x);
        }
        u32le(&mut central, 0);
        u32le(&mut central, offset);
        central.extend(name.as_bytes());
    }
    let (cd_offset, cd_len) = (out.len() as u32, central.len() as u32);
    out.extend(central);
    u32le(&mut out, 0x0605_4b50);
    for x in [0, 0, members.len() as u16, members.len() as u16] {
        u16le(&mut out, x);
    }
    u32le(&mut out, cd_len);
    u32le(&mut out, cd_offset);
    u16le(&mut out, 0);
    out
}

/// The `.npy` bytes of an array of `descr` and `shape` holding `data`.
fn npy_array(descr: &str, shape: &[usize], data: &[u8]) -> Vec<u8> {
    let dims: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
    let shape = match dims.len() {
        1 => format!("({},)", dims[0]),
        _ => format!("({})", dims.join(", ")),
    };
    let mut header = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}");
    while (10 + header.len() + 1) % 64 != 0 {
        header.push(' ');
    }
    header.push('\n');
    let mut out = b"\x93NUMPY\x01\x00".to_vec();
    out.extend((header.len() as u16).to_le_bytes());
    out.extend(header.as_bytes());
    out.extend(data);
    out
}

/// Roles 0 and 1 are whole `.npz` files (deflated, stored); roles 2 to 5 are one member's
/// `.npy` bytes (`x_train`, `y_train`, `x_test`, `y_test`), put into an otherwise valid
/// deflated file so that mutations reach the `.npy` reader and not only the zip layer.
pub(crate) struct NpzTarget {
    seeds: Vec<Vec<u8>>,
    members: Vec<(&'static str, Vec<u8>)>,
    path: PathBuf,
}

impl NpzTarget {
    pub(crate) fn new(dir: &Path) -> Self {
        let x: Vec<u8> = (0..6 * 16).map(|i| (i * 37 % 256) as u8).collect();
        let y_train: Vec<u8> = [0i64, 1, 2, 0, 1, 2]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        let x_test: Vec<u8> = (0..2 * 16)
            .flat_map(|i| (i as f32 / 32.0).to_le_bytes())
            .collect();
        let members = vec![
            ("x_train.npy", npy_array("|u1", &[6, 4, 4], &x)),
            ("y_train.npy", npy_array("<i8", &[6], &y_train)),
            ("x_test.npy", npy_array("<f4", &[2, 4, 4, 1], &x_test)),
            ("y_test.npy", npy_array("|u1", &[2], &[2, 0])),
        ];
        let mut seeds = vec![zip_archive(&members, true), zip_archive(&members, false)];
        seeds.extend(members.iter().map(|(_, bytes)| bytes.clone()));
        Self {
            seeds,
            members,
            path: dir.join("data.npz"),
        }
    }
}

impl Fuzzee for NpzTarget {
    fn seeds(&self) -> &[Vec<u8>] {
        &self.seeds
    }

    fn run(&mut self, role: usize, input: &[u8]) -> Result<bool> {
        let file = match role {
            0 | 1 => input.to_vec(),
            r => {
                let mut members = self.members.clone();
                members[r - 2].1 = input.to_vec();
                zip_archive(&members, true)
            }
        };
        harness(std::fs::write(&self.path, file))?;
        // As `swbnn train` reads a `.npz`: whether it has a test split, then both splits.
        let has_test = bnn_data::npz_has_test(&self.path).unwrap_or(false);
        let train = bnn_data::load_npz(&self.path, bnn_data::Split::Train).is_ok();
        let test = bnn_data::load_npz(&self.path, bnn_data::Split::Test).is_ok();
        Ok(has_test && train && test)
    }
}

// ---- images (PNG, JPEG) of class folders ------------------------------------------------

/// Roles: a grey PNG, an RGB PNG and a JPEG, each the one image of class `b` of a class-folder
/// data set whose class `a` holds a valid grey PNG; read as `swbnn train --dataset folder:DIR`
/// reads it (headers, then decoding; with and without a target size) and as an ImageNet-style
/// folder decodes one sample.
pub(crate) struct ImageTarget {
    seeds: Vec<Vec<u8>>,
    root: PathBuf,
}

/// File names of the roles (the reader guesses the format from the bytes, not the name).
const IMAGE_FILES: [&str; 3] = ["grey.png", "rgb.png", "photo.jpg"];

impl ImageTarget {
    pub(crate) fn new(dir: &Path) -> Result<Self> {
        let seeds = vec![
            include_bytes!("seed-grey.png").to_vec(),
            include_bytes!("seed-rgb.png").to_vec(),
            include_bytes!("seed.jpg").to_vec(),
        ];
        let root = dir.join("images");
        std::fs::create_dir_all(root.join("a"))?;
        std::fs::create_dir_all(root.join("b"))?;
        std::fs::write(root.join("a/valid.png"), &seeds[0])?;
        Ok(Self { seeds, root })
    }
}

impl Fuzzee for ImageTarget {
    fn seeds(&self) -> &[Vec<u8>] {
        &self.seeds
    }

    fn run(&mut self, role: usize, input: &[u8]) -> Result<bool> {
        let b = self.root.join("b");
        harness(std::fs::remove_dir_all(&b))?;
        harness(std::fs::create_dir_all(&b))?;
        harness(std::fs::write(b.join(IMAGE_FILES[role]), input))?;
        let sized = bnn_data::FolderImages {
            size: Some(8),
            channels: None,
        };
        let resized =
            bnn_data::load_class_folders(&self.root, bnn_data::Split::Train, sized).is_ok();
        let as_is = bnn_data::load_class_folders(
            &self.root,
            bnn_data::Split::Train,
            bnn_data::FolderImages::default(),
        )
        .is_ok();
        let config = bnn_data::FolderConfig {
            resize_shorter: 8,
            crop: 8,
        };
        let lazy = bnn_data::ImageFolder::open(&self.root, config)
            .and_then(|f| bnn_data::Dataset::get(&f, 1))
            .is_ok();
        // The seeds differ in size from class `a`'s image only for the JPEG: `as_is` refuses
        // mixed sizes, so it counts for the grey and RGB PNGs alone.
        Ok(resized && lazy && (as_is || role == 2))
    }
}
