//! Times the convolution kernels (`bnn_layers::flexops::conv`) on ResNet-20's convolutions
//! at batch 128 on 1x28x28 inputs: forward, input gradient, weight gradient, per layer shape,
//! best of `--reps` (default 5) runs. The PyTorch peer is `benches/peers/torch_conv_layers.py`.
//!
//! `--cpu` reports the CPU time of all the process's threads
//! instead of wall-clock time: on a machine shared with other work, CPU time at one thread
//! (`RAYON_NUM_THREADS=1`) compares the kernels' efficiency where wall-clock time cannot.
//!
//! ```text
//! cargo run -p bnn-layers --example conv_kernels -- [--reps 5] [--batch 128]
//! ```

use std::time::Instant;

use bnn_layers::flexops::conv::{ConvShape, backward_input, backward_weight, forward};

/// CPU time of every thread of this process so far, in seconds.
fn cpu_seconds() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes the timespec it is given.
    unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let arg = |name: &str, default: usize| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .map(|v| v.parse().expect("an integer"))
            .unwrap_or(default)
    };
    let reps = arg("--reps", 5);
    let batch = arg("--batch", 128);
    let cpu = args.iter().any(|a| a == "--cpu");
    let clock = || {
        if cpu {
            cpu_seconds()
        } else {
            started().elapsed().as_secs_f64()
        }
    };
    // (c_in, c_out, input size, kernel, stride, padding, count in ResNet-20)
    let layers = [
        (1, 16, 28, 3, 1, 1, 1),
        (16, 16, 28, 3, 1, 1, 6),
        (16, 32, 28, 3, 2, 1, 1),
        (16, 32, 28, 1, 2, 0, 1),
        (32, 32, 14, 3, 1, 1, 5),
        (32, 64, 14, 3, 2, 1, 1),
        (32, 64, 14, 1, 2, 0, 1),
        (64, 64, 7, 3, 1, 1, 5),
    ];
    let mut total = [0.0f64; 3];
    for (c_in, c_out, size, k, stride, pad, count) in layers {
        let s = ConvShape {
            batch,
            c_in,
            input: [size, size],
            c_out,
            kernel: [k, k],
            stride: [stride, stride],
            pad_begin: [pad, pad],
            pad_end: [pad, pad],
            dilation: [1, 1],
        };
        let fill = |n: usize| -> Vec<f32> {
            (0..n)
                .map(|i| ((i * 7919) % 201) as f32 / 100.0 - 1.0)
                .collect()
        };
        let (x, w, dy) = (fill(s.x_len()), fill(s.w_len()), fill(s.y_len()));
        let best = |f: &dyn Fn() -> Vec<f32>| {
            (0..reps)
                .map(|_| {
                    let t = clock();
                    std::hint::black_box(f());
                    clock() - t
                })
                .fold(f64::INFINITY, f64::min)
        };
        let t = [
            best(&|| forward(&s, &x, &w)),
            best(&|| backward_input(&s, &w, &dy)),
            best(&|| backward_weight(&s, &x, &dy)),
        ];
        for (acc, v) in total.iter_mut().zip(t) {
            *acc += v * count as f64;
        }
        println!(
            "{c_in:>3}->{c_out:<3} {size:>2}x{size:<2} k{k} s{stride} x{count}: forward {:7.2} ms, input grad {:7.2} ms, weight grad {:7.2} ms",
            t[0] * 1e3,
            t[1] * 1e3,
            t[2] * 1e3
        );
    }
    println!(
        "ResNet-20 convolutions (counted): forward {:.1} ms, input grad {:.1} ms, weight grad {:.1} ms, total {:.1} ms",
        total[0] * 1e3,
        total[1] * 1e3,
        total[2] * 1e3,
        total.iter().sum::<f64>() * 1e3
    );
}

fn started() -> Instant {
    static START: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    *START.get_or_init(Instant::now)
}
