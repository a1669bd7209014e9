//! Picking a backend at run time.

use burn::prelude::*;

use crate::LayerError;

/// Backends compiled into this build, in order of preference for a CPU default.
pub fn available_backends() -> Vec<&'static str> {
    let mut v = Vec::new();
    if cfg!(feature = "flex") {
        v.push("flex");
    }
    if cfg!(feature = "cpu") {
        v.push("cpu");
    }
    if cfg!(feature = "ndarray") {
        v.push("ndarray");
    }
    if cfg!(feature = "wgpu") {
        v.push("wgpu");
    }
    if cfg!(feature = "cuda") {
        v.push("cuda");
    }
    v
}

/// The device for a backend name: `flex` (default CPU backend), `cpu` (CubeCL CPU), `ndarray`
/// (deprecated, slow convolutions), `wgpu` (GPU; Vulkan, Metal or DX12) or `cuda` / `cuda:N`
/// (NVIDIA GPU number N, default 0). Each must be compiled in with the cargo feature of the same
/// name.
///
/// A GPU device is opened here, so that a machine without its driver, device or (for CUDA)
/// NVRTC and headers gets [`LayerError::BackendUnavailable`] naming what is missing, instead of
/// a panic in burn's device thread at the first tensor.
///
/// Before a GPU device is made, CubeCL's persistent kernel caches are set up
/// ([`gpu_cache`](crate::gpu_cache::gpu_cache)): compiled kernels and autotune results are kept
/// between processes.
pub fn device_by_name(name: &str) -> Result<Device, LayerError> {
    if is_gpu_name(name) {
        crate::gpu_cache::gpu_cache();
    }
    let device = device_by_name_unchecked(name)?;
    let unavailable = |reason: String| LayerError::BackendUnavailable {
        name: name.to_string(),
        reason,
    };
    match backend_name(&device) {
        Some("cuda") => {
            check_cuda(&device).map_err(unavailable)?;
            open(&device).map_err(unavailable)?;
        }
        Some("wgpu") => open(&device).map_err(unavailable)?,
        _ => {}
    }
    Ok(device)
}

/// Whether a backend name names a GPU backend (`wgpu`, `cuda`, `cuda:N`), compiled in or not.
pub fn is_gpu_name(name: &str) -> bool {
    name == "wgpu" || name == "cuda" || name.starts_with("cuda:")
}

/// The backend name of a device made by [`device_by_name`], `None` for others.
pub fn backend_name(device: &Device) -> Option<&'static str> {
    let d = device.clone().without_autodiff();
    #[cfg(feature = "flex")]
    if d == Device::flex() {
        return Some("flex");
    }
    #[cfg(feature = "cpu")]
    if d == Device::cpu() {
        return Some("cpu");
    }
    #[cfg(feature = "ndarray")]
    #[allow(deprecated)]
    if d == Device::ndarray() {
        return Some("ndarray");
    }
    #[cfg(feature = "wgpu")]
    if d == Device::wgpu(burn::tensor::DeviceKind::DefaultDevice) {
        return Some("wgpu");
    }
    #[cfg(feature = "cuda")]
    if (0..64).any(|i| d == Device::cuda(i)) {
        return Some("cuda");
    }
    let _ = d;
    None
}

/// The compiler the `cuda` backend's kernels go through: `"nvrtc"` with the `cuda-nvrtc`
/// feature (CUDA C++), `"llvm"` without it (burn's default).
#[cfg(feature = "cuda")]
pub fn cuda_compiler() -> &'static str {
    match cubecl_cuda::compiler::CudaBackend::default() {
        cubecl_cuda::compiler::CudaBackend::Cpp => "nvrtc",
        cubecl_cuda::compiler::CudaBackend::Llvm => "llvm",
    }
}

/// What the `cuda` backend loads at run time, checked before burn does: the driver library,
/// a device of the requested number, and for NVRTC its library and the CUDA headers.
#[cfg(feature = "cuda")]
fn check_cuda(device: &Device) -> Result<(), String> {
    // SAFETY: `is_culib_present` only tries to open the libraries by name and closes them.
    if !unsafe { cudarc::driver::sys::is_culib_present() } {
        return Err(
            "the CUDA driver library (libcuda.so) was not found: is an NVIDIA driver \
                    installed?"
                .to_string(),
        );
    }
    cudarc::driver::result::init().map_err(|e| format!("the CUDA driver failed to start: {e}"))?;
    let count = cudarc::driver::result::device::get_count()
        .map_err(|e| format!("the CUDA driver could not count devices: {e}"))?;
    let index = (0..64)
        .find(|&i| device.clone().without_autodiff() == Device::cuda(i))
        .unwrap_or(0);
    if index >= count as usize {
        return Err(format!("CUDA device {index} requested, {count} present"));
    }
    if cuda_compiler() == "nvrtc" {
        // SAFETY: as above.
        if !unsafe { cudarc::nvrtc::sys::is_culib_present() } {
            return Err(
                "NVRTC (libnvrtc.so) was not found: install the CUDA toolkit or the \
                        `nvidia-cuda-nvrtc` wheel and put its library directory on \
                        LD_LIBRARY_PATH"
                    .to_string(),
            );
        }
        let include = cubecl_cuda::install::cuda_path()
            .map(|p| p.join("include"))
            .ok_or(
                "no CUDA installation for NVRTC's headers: set CUDA_PATH to a folder whose \
                    include/ holds cuda_fp16.h and mma.h (the CUDA toolkit, or the \
                    nvidia-cuda-runtime and nvidia-cuda-crt wheels)",
            )?;
        for header in ["cuda_fp16.h", "mma.h"] {
            if !include.join(header).is_file() {
                return Err(format!(
                    "{} has no {header}: set CUDA_PATH to a folder whose include/ holds the CUDA \
                     headers",
                    include.display()
                ));
            }
        }
    }
    Ok(())
}

#[cfg(not(feature = "cuda"))]
fn check_cuda(_device: &Device) -> Result<(), String> {
    Ok(())
}

/// Runs one small operation on `device`: burn opens a GPU device in its own thread and panics
/// there when it cannot, so the panic is caught (and its message kept from stderr) here.
fn open(device: &Device) -> Result<(), String> {
    use std::sync::{Arc, Mutex};
    // The panic hook is global: two opens at once (tests) must not swap it under each other.
    static OPENING: Mutex<()> = Mutex::new(());
    let _one_at_a_time = OPENING.lock().unwrap_or_else(|e| e.into_inner());
    let message = Arc::new(Mutex::new(None::<String>));
    let previous = std::panic::take_hook();
    let sink = Arc::clone(&message);
    std::panic::set_hook(Box::new(move |info| {
        let text = info
            .payload()
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| info.payload().downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "unknown panic".to_string());
        let mut slot = sink.lock().unwrap_or_else(|e| e.into_inner());
        // The first panic is the device thread's own; later ones only report it gone.
        slot.get_or_insert(text);
    }));
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        Tensor::<1>::zeros([1], device)
            .try_into_data()
            .map(|_| ())
            .map_err(|e| format!("{e:?}"))
    }));
    std::panic::set_hook(previous);
    let panicked = message.lock().unwrap_or_else(|e| e.into_inner()).take();
    match (result, panicked) {
        (Ok(Ok(())), _) => Ok(()),
        (Ok(Err(e)), _) => Err(format!("reading a tensor back failed: {e}")),
        (Err(_), Some(text)) => Err(format!("the device did not open: {}", text.trim())),
        (Err(_), None) => Err("the device did not open".to_string()),
    }
}

fn device_by_name_unchecked(name: &str) -> Result<Device, LayerError> {
    let unknown = || LayerError::UnknownBackend {
        name: name.to_string(),
        available: available_backends().join(", "),
    };
    match name {
        #[cfg(feature = "flex")]
        "flex" => Ok(Device::flex()),
        #[cfg(feature = "cpu")]
        "cpu" => Ok(Device::cpu()),
        #[cfg(feature = "ndarray")]
        #[allow(deprecated)]
        "ndarray" => Ok(Device::ndarray()),
        #[cfg(feature = "wgpu")]
        "wgpu" => Ok(Device::wgpu(burn::tensor::DeviceKind::DefaultDevice)),
        #[cfg(feature = "cuda")]
        "cuda" => Ok(Device::cuda(0)),
        #[cfg(feature = "cuda")]
        s if s.starts_with("cuda:") => s["cuda:".len()..]
            .parse::<usize>()
            .map(Device::cuda)
            .map_err(|_| unknown()),
        _ => Err(unknown()),
    }
}

/// Serialises tests that seed or draw from the backend's random generator.
///
/// The generator is global to the process: a test that seeds it and then draws holds this
/// guard, so a test running in parallel cannot consume draws in between. A test that panicked
/// while holding it does not poison it for the others.
pub fn lock_device_rng() -> std::sync::MutexGuard<'static, ()> {
    static DEVICE_RNG: std::sync::Mutex<()> = std::sync::Mutex::new(());
    DEVICE_RNG.lock().unwrap_or_else(|e| e.into_inner())
}

/// The device tests run on: the backend named by `SWBNN_TEST_BACKEND`, else the first compiled
/// in (`flex` by default).
pub fn test_device() -> Device {
    let name = std::env::var("SWBNN_TEST_BACKEND")
        .ok()
        .or_else(|| available_backends().first().map(|s| s.to_string()))
        .unwrap_or_else(|| "flex".to_string());
    match device_by_name(&name) {
        Ok(d) => d,
        Err(e) => panic!("SWBNN_TEST_BACKEND: {e}"),
    }
}

#[cfg(all(test, feature = "cuda"))]
mod cuda_tests {
    use super::*;

    #[test]
    fn nvrtc_compiles_the_kernels_exactly_with_cuda_nvrtc() {
        let expected = if cfg!(feature = "cuda-nvrtc") {
            "nvrtc"
        } else {
            "llvm"
        };
        assert_eq!(cuda_compiler(), expected);
    }

    #[test]
    fn a_machine_without_the_cuda_driver_gets_an_error_not_a_panic() {
        // SAFETY: only opens and closes the library by name.
        if unsafe { cudarc::driver::sys::is_culib_present() } {
            return; // A CUDA machine: the other tests open the device.
        }
        let err = device_by_name("cuda").unwrap_err().to_string();
        assert!(err.contains("libcuda"), "{err}");
    }
}
