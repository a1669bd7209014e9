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
pub fn device_by_name(name: &str) -> Result<Device, LayerError> {
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
