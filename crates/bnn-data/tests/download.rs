//! The downloader against a local HTTP server on 127.0.0.1, and the search order.

mod common;

use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::Path;
use std::thread::JoinHandle;

use bnn_data::{
    Checksum, DataError, Dataset, DatasetId, Locator, RemoteFile, Split, download_verified,
    open_dir,
};
use common::write_cifar;
use md5::{Digest, Md5};

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Serves `body` to at most `requests` connections (then stops), on 127.0.0.1.
fn serve(body: Vec<u8>, requests: usize) -> (String, JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let handle = std::thread::spawn(move || {
        for stream in listener.incoming().take(requests) {
            let mut stream = stream.unwrap();
            stream
                .set_read_timeout(Some(std::time::Duration::from_secs(5)))
                .unwrap();
            // Read the request head.
            let mut head = Vec::new();
            let mut byte = [0u8; 1];
            while !head.ends_with(b"\r\n\r\n") && stream.read(&mut byte).unwrap_or(0) == 1 {
                head.push(byte[0]);
            }
            let missing = String::from_utf8_lossy(&head).contains("/missing");
            let response = if missing {
                b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".to_vec()
            } else {
                let mut r = format!(
                    "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                    body.len()
                )
                .into_bytes();
                r.extend_from_slice(&body);
                r
            };
            let _ = stream.write_all(&response);
        }
    });
    (url, handle)
}

fn no_temp_files(dir: &Path) -> bool {
    std::fs::read_dir(dir)
        .unwrap()
        .all(|e| !e.unwrap().file_name().to_string_lossy().contains(".tmp-"))
}

#[test]
fn good_checksum_lands_the_file_and_a_wrong_one_leaves_nothing() {
    let body: Vec<u8> = (0..50_000u32).map(|i| (i * 31 % 251) as u8).collect();
    let md5 = hex(&Md5::digest(&body));
    let sha = hex(&sha2::Sha256::digest(&body));
    let (url, server) = serve(body.clone(), 4);
    let tmp = tempfile::tempdir().unwrap();

    let dest = tmp.path().join("file.bin");
    download_verified(
        &format!("{url}/file.bin"),
        &dest,
        &Checksum::Md5(md5.clone()),
    )
    .unwrap();
    assert_eq!(std::fs::read(&dest).unwrap(), body);
    let dest2 = tmp.path().join("file2.bin");
    download_verified(&format!("{url}/file.bin"), &dest2, &Checksum::Sha256(sha)).unwrap();
    assert_eq!(std::fs::read(&dest2).unwrap(), body);

    let wrong = tmp.path().join("wrong.bin");
    let err = download_verified(
        &format!("{url}/file.bin"),
        &wrong,
        &Checksum::Md5("0".repeat(32)),
    )
    .unwrap_err();
    assert!(
        matches!(&err, DataError::Checksum { actual, .. } if *actual == md5),
        "{err}"
    );
    assert!(!wrong.exists());
    assert!(no_temp_files(tmp.path()));

    let err = download_verified(
        &format!("{url}/missing"),
        &tmp.path().join("m"),
        &Checksum::Md5(md5),
    )
    .unwrap_err();
    assert!(err.to_string().contains("404"), "{err}");
    server.join().unwrap();
}

#[test]
fn locate_downloads_and_extracts_a_cifar_tarball_into_the_cache() {
    // Build a tiny cifar-10-binary.tar.gz in the published layout.
    let src = tempfile::tempdir().unwrap();
    let inner = src.path().join("cifar-10-batches-bin");
    std::fs::create_dir(&inner).unwrap();
    for b in 1..=5 {
        write_cifar(&inner.join(format!("data_batch_{b}.bin")), 2, b * 2, |i| {
            vec![(i % 10) as u8]
        });
    }
    write_cifar(&inner.join("test_batch.bin"), 3, 0, |i| {
        vec![(i % 10) as u8]
    });
    let mut tar = tar::Builder::new(flate2::write::GzEncoder::new(
        Vec::new(),
        flate2::Compression::fast(),
    ));
    tar.append_dir_all("cifar-10-batches-bin", &inner).unwrap();
    let archive = tar.into_inner().unwrap().finish().unwrap();
    let md5 = hex(&Md5::digest(&archive));

    let (url, server) = serve(archive, 1);
    let cache = tempfile::tempdir().unwrap();
    let locator = Locator {
        explicit: None,
        env_dir: None,
        cache_dir: Some(cache.path().to_path_buf()),
        system_dir: "/nonexistent".into(),
        download: true,
    };
    // The first mirror answers 404, so the second one is tried.
    let (mirror, mirror_server) = serve(Vec::new(), 1);
    let remote = [RemoteFile {
        name: "cifar-10-binary.tar.gz".into(),
        urls: vec![
            format!("{mirror}/missing"),
            format!("{url}/cifar-10-binary.tar.gz"),
        ],
        checksum: Checksum::Md5(md5),
        extract: true,
    }];
    let dir = locator
        .locate_with(DatasetId::Cifar10, Split::Test, &remote)
        .unwrap();
    assert_eq!(dir, cache.path().join("cifar-10"));
    assert!(!dir.join("cifar-10-binary.tar.gz").exists());
    let test = open_dir(DatasetId::Cifar10, Split::Test, &dir).unwrap();
    assert_eq!(test.len(), 3);
    assert_eq!(test.get(2).unwrap().label, 2);
    // Found in the cache the second time, without any server.
    assert_eq!(
        locator
            .locate_with(DatasetId::Cifar10, Split::Train, &[])
            .unwrap(),
        dir
    );
    server.join().unwrap();
    mirror_server.join().unwrap();
}

#[test]
fn search_order_and_not_found_message() {
    let explicit = tempfile::tempdir().unwrap();
    let env = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let system = tempfile::tempdir().unwrap();
    let put = |dir: &Path| {
        let d = dir.join("svhn");
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("test_32x32.mat"), b"x").unwrap();
        d
    };
    let mut locator = Locator {
        explicit: Some(explicit.path().to_path_buf()),
        env_dir: Some(env.path().to_path_buf()),
        cache_dir: Some(cache.path().to_path_buf()),
        system_dir: system.path().to_path_buf(),
        download: false,
    };
    // An explicit folder is searched alone: without the data it is an error, even though the
    // system folder has a copy (it used to fall back to that copy silently).
    let sys = put(system.path());
    let msg = locator
        .locate(DatasetId::Svhn, Split::Test)
        .unwrap_err()
        .to_string();
    assert!(msg.contains("--data") && msg.contains("svhn"), "{msg}");
    for bad in [
        explicit.path().join("missing"),
        explicit.path().join("a-file"),
    ] {
        std::fs::write(explicit.path().join("a-file"), b"x").unwrap();
        let strict = Locator {
            explicit: Some(bad.clone()),
            ..locator.clone()
        };
        let msg = strict
            .locate(DatasetId::Svhn, Split::Test)
            .unwrap_err()
            .to_string();
        assert!(msg.contains(&bad.display().to_string()), "{msg}");
        std::fs::remove_file(explicit.path().join("a-file")).unwrap();
    }
    let explicit_dir = locator.explicit.take();
    assert_eq!(locator.locate(DatasetId::Svhn, Split::Test).unwrap(), sys);
    let cached = put(cache.path());
    assert_eq!(
        locator.locate(DatasetId::Svhn, Split::Test).unwrap(),
        cached
    );
    let from_env = put(env.path());
    assert_eq!(
        locator.locate(DatasetId::Svhn, Split::Test).unwrap(),
        from_env
    );
    locator.explicit = explicit_dir;
    let from_arg = put(explicit.path());
    assert_eq!(
        locator.locate(DatasetId::Svhn, Split::Test).unwrap(),
        from_arg
    );
    // `--data DIR` may also point straight at the files.
    std::fs::write(explicit.path().join("test_32x32.mat"), b"x").unwrap();
    std::fs::remove_dir_all(&from_arg).unwrap();
    assert_eq!(
        locator.locate(DatasetId::Svhn, Split::Test).unwrap(),
        explicit.path()
    );

    // Nothing anywhere: every remedy is named.
    locator.explicit = None;
    let msg = locator
        .locate(DatasetId::FashionMnist, Split::Train)
        .unwrap_err()
        .to_string();
    for needle in [
        "--data DIR",
        "SWBNN_DATA",
        "apt-get install dataset-fashion-mnist",
        "fashion-mnist",
        "download",
    ] {
        assert!(msg.contains(needle), "`{needle}` missing from: {msg}");
    }
    let msg = locator
        .locate(DatasetId::ImageNet, Split::Train)
        .unwrap_err()
        .to_string();
    assert!(msg.contains("cannot be downloaded automatically"), "{msg}");

    // A failing download is reported in the remedies, and leaves no partial data set.
    let (url, server) = serve(b"not the archive".to_vec(), 1);
    locator.download = true;
    let remote = [RemoteFile {
        name: "train_32x32.mat".into(),
        urls: vec![format!("{url}/train_32x32.mat")],
        checksum: Checksum::Md5("e26dedcc434d2e4c54c9b2d4a06d8373".into()),
        extract: false,
    }];
    let msg = locator
        .locate_with(DatasetId::Svhn, Split::Train, &remote)
        .unwrap_err()
        .to_string();
    assert!(msg.contains("checksum mismatch"), "{msg}");
    assert!(!cache.path().join("svhn/train_32x32.mat").exists());
    server.join().unwrap();

    // The shipped download table only names files the loaders expect.
    for id in DatasetId::ALL {
        for split in [Split::Train, Split::Test] {
            for f in id.remote_files(split) {
                assert!(
                    !f.urls.is_empty() && f.checksum.expected().len() == 32,
                    "{id} {f:?}"
                );
            }
        }
    }
    assert!(DatasetId::ImageNet.remote_files(Split::Train).is_empty());
    assert_eq!(
        "Fashion_MNIST".parse::<DatasetId>().unwrap(),
        DatasetId::FashionMnist
    );
    assert!("cifar-1000".parse::<DatasetId>().is_err());
}
