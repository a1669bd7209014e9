//! Offline stand-in for `cubecl-llvm` 0.11.3 (see `Cargo.toml`).
//!
//! Only the items `cubecl-cuda` names are here, at the same paths. The LLVM compiler is
//! replaced by one that returns [`CompilationError::Generic`]: a build using this crate must
//! enable cubecl-cuda's `cpp` feature, so that NVRTC compiles every kernel.

use cubecl_core::ir::DeviceProperties;
use cubecl_core::prelude::KernelDefinition;
use cubecl_environment::backtrace::BackTrace;
use cubecl_runtime::{compiler::CompilationError, kernel::BufferIOAttr};

pub mod nvptx {
    //! The NVPTX items `cubecl-cuda` names.

    pub mod ptx_version {
        //! PTX versions by driver version, as in cubecl-llvm 0.11.3.

        use core::fmt;
        use std::ffi::CString;

        /// A PTX ISA version, e.g. 87 for PTX 8.7.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub struct PtxVersion(u32);

        impl PtxVersion {
            /// The newest PTX version a driver (e.g. 12080 for CUDA 12.8) loads.
            pub fn for_driver(driver: i32) -> Option<Self> {
                DRIVER_PTX
                    .iter()
                    .find(|(first_driver, _)| driver >= *first_driver)
                    .map(|(_, ptx)| Self(*ptx))
            }

            /// The LLVM target feature naming this version.
            pub fn target_feature(self) -> CString {
                CString::new(format!("+{self}")).expect("the feature has no NUL")
            }
        }

        impl fmt::Display for PtxVersion {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "ptx{}", self.0)
            }
        }

        // Copied from cubecl-llvm 0.11.3 (`nvptx/ptx_version.rs`).
        const DRIVER_PTX: &[(i32, u32)] = &[
            (13030, 93),
            (13020, 92),
            (13010, 91),
            (13000, 90),
            (12090, 88),
            (12080, 87),
            (12050, 85),
            (12040, 84),
            (12030, 83),
            (12020, 82),
            (12010, 81),
            (12000, 80),
            (11080, 78),
            (11070, 77),
            (11060, 76),
            (11050, 75),
            (11040, 74),
            (11030, 73),
            (11020, 72),
            (11010, 71),
            (11000, 70),
            (10020, 65),
            (10010, 64),
            (10000, 63),
        ];
    }
}

pub mod shared {
    //! The shared items `cubecl-cuda` names.

    pub mod lowered_features {
        //! Narrowing device features for the LLVM backend.

        use super::super::DeviceProperties;

        /// The GPU target a device's features are narrowed for.
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        pub enum GpuTarget {
            /// NVIDIA PTX.
            Nvptx,
        }

        /// Leaves `props` as they are: cubecl-cuda calls this only when the LLVM backend is the
        /// one selected, which the `cpp` feature rules out.
        pub fn restrict_features(_props: &mut DeviceProperties, _target: GpuTarget) {}
    }
}

/// LLVM compilation targets.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LlvmTarget {
    /// The host CPU.
    #[default]
    Cpu,
    /// NVIDIA PTX.
    Nvptx,
}

/// Options of the LLVM compiler; read by nothing here.
#[derive(Clone, Debug, Default)]
pub struct PlironOptions {
    /// AMD architecture (unused).
    pub arch: Option<String>,
    /// NVIDIA architecture.
    pub sm_arch: Option<cubecl_core::ir::nvidia::SmArch>,
    /// PTX version to emit.
    pub ptx_version: Option<nvptx::ptx_version::PtxVersion>,
    /// Pass scalars in the kernel parameter block.
    pub grid_constants: bool,
}

/// A compiled PTX module.
#[derive(Clone, Debug)]
pub struct NvptxModule {
    /// NUL-terminated PTX assembly.
    pub ptx: Vec<core::ffi::c_char>,
    /// Kernel entry point symbol.
    pub entrypoint: String,
    /// IR for logging and cache keys.
    pub ir: String,
    /// Shared memory required per launch, in bytes.
    pub shared_memory_size: usize,
    /// Buffer access modes in binding order.
    pub io: Vec<BufferIOAttr>,
}

/// Compiled kernel artifact.
#[derive(Clone, Debug)]
pub enum PlironArtifact {
    /// PTX for the CUDA driver.
    NvptxCode(NvptxModule),
    /// Never built: keeps matches over this type non-exhaustive, as in the real crate.
    Unavailable,
}

/// The LLVM compiler, absent from this build.
#[derive(Clone, Debug)]
pub struct PlironCompiler {
    /// The target it would compile for.
    pub target: LlvmTarget,
}

impl PlironCompiler {
    /// Always an error: this build has no LLVM, and NVRTC compiles the kernels.
    pub fn compile(
        &mut self,
        _kernel: KernelDefinition,
        _options: &PlironOptions,
    ) -> Result<PlironArtifact, CompilationError> {
        Err(CompilationError::Generic {
            reason: "this build has no LLVM compiler (offline CUDA build, see `cargo xtask \
                     build-cuda`): kernels are compiled by NVRTC, cubecl-cuda's `cpp` feature"
                .to_string(),
            backtrace: BackTrace::capture(),
        })
    }

    /// The language tag of the LLVM compiler.
    pub fn lang_tag(&self) -> &'static str {
        match self.target {
            LlvmTarget::Cpu => "mlir",
            LlvmTarget::Nvptx => "llvm",
        }
    }
}
