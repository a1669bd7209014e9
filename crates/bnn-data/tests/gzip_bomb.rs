//! A gzip bomb posing as an IDX file is refused without inflating it: the reader stops at the
//! size the header declares. Peak heap use is measured with a counting allocator (this test
//! binary's only test, so nothing else allocates meanwhile).

use std::alloc::{GlobalAlloc, Layout, System};
use std::io::Write;
use std::sync::atomic::{AtomicUsize, Ordering};

struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            let now = LIVE.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
            PEAK.fetch_max(now, Ordering::Relaxed);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) };
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

#[test]
fn a_gzip_bomb_is_refused_within_its_declared_size() {
    // A valid 10-image header, then 256 MiB of zeros: 250 kB compressed.
    let mut header = 0x0000_0803u32.to_be_bytes().to_vec();
    for d in [10u32, 28, 28] {
        header.extend_from_slice(&d.to_be_bytes());
    }
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(&header).unwrap();
    let zeros = vec![0u8; 1 << 20];
    for _ in 0..256 {
        gz.write_all(&zeros).unwrap();
    }
    drop(zeros);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t10k-images-idx3-ubyte.gz");
    std::fs::write(&path, gz.finish().unwrap()).unwrap();
    let file_len = std::fs::metadata(&path).unwrap().len() as usize;

    let before = LIVE.load(Ordering::Relaxed);
    PEAK.store(before, Ordering::Relaxed);
    let err = bnn_data::read_idx(&path).unwrap_err().to_string();
    let peak = PEAK.load(Ordering::Relaxed) - before;
    assert!(err.contains("trailing bytes"), "{err}");
    // The compressed file is read whole; the inflated data is bounded by the header's 7,840
    // bytes. Before the cap, all 256 MiB were inflated before the error.
    assert!(
        peak < 2 * file_len + (1 << 20),
        "peak heap {peak} bytes for a {file_len}-byte file"
    );
}
