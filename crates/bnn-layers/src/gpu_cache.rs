//! CubeCL's persistent kernel caches for the GPU backends, and counts of what a run compiled.
//!
//! On `wgpu` and `cuda`, CubeCL compiles every kernel a run launches and autotunes the
//! matrix products and convolutions, in every process. With its persistence compiled in
//! (the `wgpu` and `cuda` features), it can keep both the compiled kernels and the autotune
//! results in one database file. [`gpu_cache`] turns that on, before the first GPU device is
//! used, under `$XDG_CACHE_HOME/swbnn/cubecl` (else `~/.cache/swbnn/cubecl`):
//! [`device_by_name`](crate::device_by_name) calls it for every GPU backend.
//!
//! What decides, highest first:
//! 1. a CubeCL configuration file of the user's: the first `cubecl.toml` (or `CubeCL.toml`), else
//!    a `burn.toml` (or `Burn.toml`) with a `[cubecl]` table, found from the working directory
//!    upwards, as CubeCL itself looks for them. Each of `[compilation] cache`, `[autotune]
//!    disable_cache` and `[environment] path` that the file sets is kept as it is;
//! 2. CubeCL's environment variables, e.g. `CUBECL_AUTOTUNE_CACHE=0`, `CUBECL_ENVIRONMENT`;
//! 3. `SWBNN_CACHE_DIR`: a directory to keep the caches in, or `off` (also `0`, `false`, `none`)
//!    to keep nothing between processes;
//! 4. the user cache directory above.
//!
//! Kept kernels are only used by the build that compiled them (CubeCL keys them by the
//! binary's build id) and on the same device. On `wgpu` only the `vulkan` feature's SPIR-V
//! compiler has kernels to keep: WGSL shaders are compiled by the driver in every process, so
//! a `wgpu` build without `vulkan` keeps the autotune results only.
//!
//! A cache file that is not a database (a truncated or overwritten file) is moved aside into
//! the cache directory's `quarantine/` folder with a warning on standard error before CubeCL
//! opens it, and the run starts with an empty cache.
//!
//! [`kernel_counts`] reads how many kernels a run compiled and how many autotune searches it
//! ran, from the logs CubeCL writes when `SWBNN_KERNEL_LOG` names a directory (or
//! [`gpu_cache_with_kernel_log`] does).

use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The environment variable naming the directory of the persistent GPU caches, or `off`.
pub const CACHE_DIR_ENV: &str = "SWBNN_CACHE_DIR";

/// The environment variable naming a directory where CubeCL logs each kernel it compiles and
/// each autotune search it runs ([`kernel_counts`] reads them).
pub const KERNEL_LOG_ENV: &str = "SWBNN_KERNEL_LOG";

/// The file, in a kernel log directory, with one line per compiled kernel.
pub const COMPILATION_LOG: &str = "compilation.log";

/// The file, in a kernel log directory, with one line per autotune search.
pub const AUTOTUNE_LOG: &str = "autotune.log";

/// Who chose where (and whether) the GPU caches are kept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CacheOrigin {
    /// swbnn's default: the user cache directory.
    Default,
    /// The `SWBNN_CACHE_DIR` environment variable.
    Environment,
    /// The user's CubeCL configuration file at this path sets the cache directory.
    ConfigFile(PathBuf),
    /// `SWBNN_CACHE_DIR=off`: nothing is kept between processes.
    Disabled,
    /// Neither `XDG_CACHE_HOME` nor `HOME` names a directory: nothing is kept.
    NoCacheDirectory,
    /// CubeCL's configuration was loaded before swbnn could set it (a GPU tensor was made
    /// before the first [`gpu_cache`] call): CubeCL's own settings apply.
    AlreadyLoaded,
    /// This build has no GPU backend: there is nothing to cache.
    NoGpuBackend,
}

/// Where the GPU caches of this process live, as [`gpu_cache`] set them up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GpuCache {
    /// The directory holding CubeCL's cache database, when anything is kept on disk.
    pub dir: Option<PathBuf>,
    /// The database file in `dir` (CubeCL names it after its environment, `default.db`).
    pub database: Option<PathBuf>,
    /// Whether compiled kernels are kept.
    pub kernels: bool,
    /// Whether autotune results are kept.
    pub autotune: bool,
    /// Who chose this.
    pub origin: CacheOrigin,
    /// The directory CubeCL logs compiles and autotune searches into, if any.
    pub kernel_log: Option<PathBuf>,
    /// Cache files found damaged and moved aside, each to its new path.
    pub quarantined: Vec<PathBuf>,
}

impl GpuCache {
    /// Whether anything is kept between processes.
    pub fn persistent(&self) -> bool {
        self.dir.is_some() && (self.kernels || self.autotune)
    }

    /// One line for people: where the caches are, or why there are none.
    pub fn describe(&self) -> String {
        let what = match (self.kernels, self.autotune) {
            (true, true) => "compiled kernels and autotune results",
            (true, false) => "compiled kernels",
            (false, true) => "autotune results",
            (false, false) => "nothing",
        };
        match (&self.origin, &self.dir) {
            (CacheOrigin::NoGpuBackend, _) => {
                "no GPU backend in this build: nothing to cache".to_string()
            }
            (CacheOrigin::Disabled, _) => format!("GPU caches off ({CACHE_DIR_ENV}=off)"),
            (CacheOrigin::NoCacheDirectory, _) => format!(
                "GPU caches off: no user cache directory (set {CACHE_DIR_ENV} to keep them)"
            ),
            (origin, Some(dir)) if self.persistent() => {
                let by = match origin {
                    CacheOrigin::Environment => format!(" (from {CACHE_DIR_ENV})"),
                    CacheOrigin::ConfigFile(file) => format!(" (set by {})", file.display()),
                    CacheOrigin::AlreadyLoaded => " (CubeCL's own settings)".to_string(),
                    _ => String::new(),
                };
                format!("GPU cache: {what} kept in {}{by}", dir.display())
            }
            _ => "GPU caches off: nothing kept between processes".to_string(),
        }
    }
}

static CACHE: OnceLock<GpuCache> = OnceLock::new();

/// Sets up CubeCL's persistent caches for this process, once, and says where they are.
///
/// Call it before the first GPU tensor: [`device_by_name`](crate::device_by_name) does for
/// `wgpu` and `cuda`. Later calls return the first call's answer. A kernel log directory is
/// taken from `SWBNN_KERNEL_LOG` when set. Never fails: a cache that cannot be set up is
/// reported as off, a damaged cache file is moved aside (see the module documentation).
pub fn gpu_cache() -> &'static GpuCache {
    let log = std::env::var_os(KERNEL_LOG_ENV)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from);
    CACHE.get_or_init(|| setup(log.as_deref()))
}

/// [`gpu_cache`], with CubeCL logging every compiled kernel and autotune search into
/// `kernel_log` (a directory, made if missing; [`kernel_counts`] reads it). Only the first
/// call of either function in a process sets things up.
pub fn gpu_cache_with_kernel_log(kernel_log: &Path) -> &'static GpuCache {
    CACHE.get_or_init(|| setup(Some(kernel_log)))
}

/// swbnn's own choice, before CubeCL's configuration file and variables are read.
#[cfg_attr(not(any(feature = "wgpu", feature = "cuda")), allow(dead_code))]
#[derive(Debug)]
enum Choice {
    /// Keep the caches in this directory.
    Dir(PathBuf, CacheOrigin),
    /// Keep nothing.
    Off(CacheOrigin),
}

/// What `SWBNN_CACHE_DIR`, `XDG_CACHE_HOME` and `HOME` choose.
#[cfg_attr(not(any(feature = "wgpu", feature = "cuda")), allow(dead_code))]
fn choice() -> Choice {
    let var = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
    if let Some(dir) = var(CACHE_DIR_ENV) {
        let text = dir.to_string_lossy().to_ascii_lowercase();
        if matches!(text.as_str(), "off" | "0" | "false" | "none") {
            return Choice::Off(CacheOrigin::Disabled);
        }
        let dir = PathBuf::from(dir);
        let dir = if dir.is_absolute() {
            dir
        } else {
            std::env::current_dir()
                .map(|cwd| cwd.join(&dir))
                .unwrap_or(dir)
        };
        return Choice::Dir(dir, CacheOrigin::Environment);
    }
    // XDG: a relative XDG_CACHE_HOME is invalid and is ignored.
    let base = var("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| {
            var("HOME")
                .map(PathBuf::from)
                .filter(|p| p.is_absolute())
                .map(|h| h.join(".cache"))
        });
    match base {
        Some(base) => Choice::Dir(base.join("swbnn").join("cubecl"), CacheOrigin::Default),
        None => Choice::Off(CacheOrigin::NoCacheDirectory),
    }
}

#[cfg(not(any(feature = "wgpu", feature = "cuda")))]
fn setup(kernel_log: Option<&Path>) -> GpuCache {
    GpuCache {
        dir: None,
        database: None,
        kernels: false,
        autotune: false,
        origin: CacheOrigin::NoGpuBackend,
        kernel_log: kernel_log.map(Path::to_path_buf),
        quarantined: Vec::new(),
    }
}

#[cfg(any(feature = "wgpu", feature = "cuda"))]
fn setup(kernel_log: Option<&Path>) -> GpuCache {
    use cubecl_runtime::config::cache::CacheConfig;
    use cubecl_runtime::config::{
        CubeClRuntimeConfig, RuntimeConfig, autotune::AutotuneLogLevel,
        compilation::CompilationLogLevel,
    };

    let user = user_config_file();
    let sets = |path: &[&str]| {
        user.as_ref()
            .is_some_and(|(_, table)| lookup(table, path).is_some())
    };
    // What CubeCL would load itself: the user's file, else its defaults.
    let mut config = CubeClRuntimeConfig::from_current_dir();
    let mut origin = match choice() {
        Choice::Dir(dir, origin) => {
            if !sets(&["environment", "path"]) {
                config.environment.path = CacheConfig::Directory(dir);
            }
            if !sets(&["compilation", "cache"]) {
                config.compilation.cache = true;
            }
            origin
        }
        Choice::Off(origin) => {
            if !sets(&["compilation", "cache"]) {
                config.compilation.cache = false;
            }
            if !sets(&["autotune", "disable_cache"]) {
                config.autotune.disable_cache = true;
            }
            origin
        }
    };
    if let Some((file, _)) = &user
        && sets(&["environment", "path"])
    {
        origin = CacheOrigin::ConfigFile(file.clone());
    }
    let mut log_dir = None;
    if let Some(dir) = kernel_log {
        match fs::create_dir_all(dir) {
            Ok(()) => {
                config.compilation.logger.file = Some(dir.join(COMPILATION_LOG));
                if matches!(
                    config.compilation.logger.level,
                    CompilationLogLevel::Disabled
                ) {
                    config.compilation.logger.level = CompilationLogLevel::Basic;
                }
                config.autotune.logger.file = Some(dir.join(AUTOTUNE_LOG));
                if matches!(config.autotune.logger.level, AutotuneLogLevel::Disabled) {
                    config.autotune.logger.level = AutotuneLogLevel::Minimal;
                }
                log_dir = Some(dir.to_path_buf());
            }
            Err(e) => eprintln!(
                "warning: no kernel log: cannot create {}: {e}",
                dir.display()
            ),
        }
    }
    // CubeCL's variables (CUBECL_AUTOTUNE_CACHE, CUBECL_ENVIRONMENT, ...) over all of the above,
    // as CubeCL applies them over its file.
    let config = config.override_from_env();

    let mut quarantined = Vec::new();
    let mut set = false;
    if CubeClRuntimeConfig::storage().lock().is_none() {
        let kept = config.compilation.cache || !config.autotune.disable_cache;
        if kept {
            let dir = config.environment.path.root();
            let database = dir.join(cubecl_environment::environment::file_name(
                &config.environment.name,
            ));
            quarantined = quarantine_if_damaged(&database);
        }
        set = CubeClRuntimeConfig::try_set(config);
    }
    // What CubeCL runs with: ours, or what it loaded before us.
    let config = CubeClRuntimeConfig::get();
    if !set {
        origin = CacheOrigin::AlreadyLoaded;
    }
    let kernels = config.compilation.cache;
    let autotune = !config.autotune.disable_cache;
    let dir = (kernels || autotune).then(|| config.environment.path.root());
    let database = dir.as_ref().map(|d| {
        d.join(cubecl_environment::environment::file_name(
            &config.environment.name,
        ))
    });
    let kernel_log = if set {
        log_dir
    } else {
        config
            .compilation
            .logger
            .file
            .as_ref()
            .and_then(|f| f.parent().map(Path::to_path_buf))
    };
    GpuCache {
        dir,
        database,
        kernels,
        autotune,
        origin,
        kernel_log,
        quarantined,
    }
}

/// The user's CubeCL configuration file and the table CubeCL reads from it: the first
/// `cubecl.toml` or `CubeCL.toml`, else `burn.toml` or `Burn.toml` with a `[cubecl]` table, from
/// the working directory upwards. A file that does not parse is skipped, as CubeCL skips it.
#[cfg(any(feature = "wgpu", feature = "cuda"))]
fn user_config_file() -> Option<(PathBuf, toml::Table)> {
    let cwd = std::env::current_dir().ok()?;
    for dir in cwd.ancestors() {
        for name in ["cubecl.toml", "CubeCL.toml"] {
            let path = dir.join(name);
            if let Ok(text) = fs::read_to_string(&path)
                && let Ok(table) = toml::from_str::<toml::Table>(&text)
            {
                return Some((path, table));
            }
        }
        for name in ["burn.toml", "Burn.toml"] {
            let path = dir.join(name);
            if let Ok(text) = fs::read_to_string(&path)
                && let Ok(mut table) = toml::from_str::<toml::Table>(&text)
                && let Some(toml::Value::Table(section)) = table.remove("cubecl")
            {
                return Some((path, section));
            }
        }
    }
    None
}

/// The value at a dotted path of a TOML table.
#[cfg(any(feature = "wgpu", feature = "cuda"))]
fn lookup<'a>(table: &'a toml::Table, path: &[&str]) -> Option<&'a toml::Value> {
    let (last, parents) = path.split_last()?;
    let mut table = table;
    for key in parents {
        table = table.get(*key)?.as_table()?;
    }
    table.get(*last)
}

/// The first 16 bytes of every SQLite database file (Turso, CubeCL's store, writes the same
/// format).
const SQLITE_MAGIC: &[u8; 16] = b"SQLite format 3\0";

/// Why the cache database at `path` cannot be a database, or `None` when it looks like one (or
/// does not exist: CubeCL makes it). Checks the file header (magic, page size, file length a
/// whole number of pages) and the write-ahead log's header beside it. An empty file is a new
/// database and passes.
pub fn damaged_cache_file(path: &Path) -> Option<String> {
    let meta = match fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
        Err(e) => return Some(format!("cannot be read: {e}")),
    };
    if !meta.is_file() {
        return Some("is not a regular file".to_string());
    }
    let len = meta.len();
    if len > 0 {
        let mut header = [0u8; 100];
        let read = fs::File::open(path).and_then(|mut f| f.read_exact(&mut header));
        if let Err(e) = read {
            return Some(format!("has no database header ({len} bytes): {e}"));
        }
        if &header[..16] != SQLITE_MAGIC {
            return Some("is not a database (wrong header)".to_string());
        }
        let page = match u16::from_be_bytes([header[16], header[17]]) {
            1 => 65_536,
            p => u64::from(p),
        };
        if !(512..=65_536).contains(&page) || !page.is_power_of_two() {
            return Some(format!("has an invalid page size ({page})"));
        }
        if len % page != 0 {
            return Some(format!(
                "is truncated ({len} bytes, not a whole number of {page}-byte pages)"
            ));
        }
    }
    let wal = sidecar(path, "-wal");
    if let Ok(meta) = fs::metadata(&wal)
        && meta.len() > 0
    {
        let mut header = [0u8; 32];
        let read = fs::File::open(&wal).and_then(|mut f| f.read_exact(&mut header));
        let magic = u32::from_be_bytes([header[0], header[1], header[2], header[3]]);
        if read.is_err() || !matches!(magic, 0x377f_0682 | 0x377f_0683) {
            return Some(format!(
                "has a damaged write-ahead log ({})",
                wal.file_name().unwrap_or_default().to_string_lossy()
            ));
        }
    }
    None
}

/// `path` with `suffix` appended to its file name (`default.db` -> `default.db-wal`).
fn sidecar(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(suffix);
    path.with_file_name(name)
}

/// Moves the cache database at `path` and the files beside it that belong to it
/// (`<name>-wal`, `<name>-shm`, ...) into `quarantine/` next to it, with a warning on standard
/// error, when [`damaged_cache_file`] finds it damaged; returns the new paths (none when the file
/// is sound). A file that cannot be moved is deleted instead; if that fails too, the warning
/// says so and CubeCL is left to fail on it (it then runs without a cache).
pub fn quarantine_if_damaged(path: &Path) -> Vec<PathBuf> {
    let Some(reason) = damaged_cache_file(path) else {
        return Vec::new();
    };
    let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else {
        return Vec::new();
    };
    let name = name.to_string_lossy().into_owned();
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let aside = dir.join("quarantine");
    let mut moved = Vec::new();
    let mut failed = Vec::new();
    let mut files = vec![path.to_path_buf()];
    if let Ok(entries) = fs::read_dir(dir) {
        let prefix = format!("{name}-");
        let mut more: Vec<PathBuf> = entries
            .filter_map(|e| e.ok())
            .filter(|e| e.file_name().to_string_lossy().starts_with(&prefix))
            .map(|e| e.path())
            .collect();
        more.sort();
        files.extend(more);
    }
    let made = fs::create_dir_all(&aside);
    for file in files {
        let file_name = file.file_name().unwrap_or_default().to_string_lossy();
        let target = aside.join(format!("{file_name}.{stamp}"));
        if made.is_ok() && fs::rename(&file, &target).is_ok() {
            moved.push(target);
        } else if fs::remove_file(&file).is_err() && file.exists() {
            failed.push(file);
        }
    }
    let mut message = format!(
        "warning: the GPU kernel cache {} {reason}; ignoring it, kernels will be compiled and \
         tuned again",
        path.display()
    );
    if !moved.is_empty() {
        message.push_str(&format!(" (moved to {})", aside.display()));
    }
    if !failed.is_empty() {
        let names: Vec<String> = failed.iter().map(|f| f.display().to_string()).collect();
        message.push_str(&format!(
            "; could not move or delete {}: delete it, or set {CACHE_DIR_ENV}",
            names.join(", ")
        ));
    }
    eprintln!("{message}");
    moved
}

/// How many kernels a run compiled and how many autotune searches it ran, read from a kernel
/// log directory ([`KERNEL_LOG_ENV`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct KernelCounts {
    /// Kernels compiled (not loaded from the cache).
    pub compiled: usize,
    /// Autotune searches run (not answered by the cache).
    pub autotuned: usize,
}

impl KernelCounts {
    /// What was compiled and tuned after `earlier`, a count of the same log taken before.
    pub fn since(self, earlier: KernelCounts) -> KernelCounts {
        KernelCounts {
            compiled: self.compiled.saturating_sub(earlier.compiled),
            autotuned: self.autotuned.saturating_sub(earlier.autotuned),
        }
    }

    /// Whether nothing was compiled or tuned.
    pub fn is_zero(self) -> bool {
        self.compiled == 0 && self.autotuned == 0
    }
}

/// The counts in the kernel log directory `dir`: one compiled kernel per `[Compiling kernel]`
/// (or, at CubeCL's full level, `[START_KERNEL_COMPILATION]`) line of its compilation log, one
/// autotune search per `Fastest result` line of its autotune log. A missing log counts 0.
///
/// CubeCL writes compile lines from a logging thread, a moment after the compile: call it
/// after [`settle_kernel_log`] in the process that ran the kernels.
pub fn kernel_counts(dir: &Path) -> std::io::Result<KernelCounts> {
    let count = |file: &str, starts: &[&str]| -> std::io::Result<usize> {
        match fs::read_to_string(dir.join(file)) {
            Ok(text) => Ok(text
                .lines()
                .filter(|l| starts.iter().any(|s| l.starts_with(s)))
                .count()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(0),
            Err(e) => Err(e),
        }
    };
    Ok(KernelCounts {
        compiled: count(
            COMPILATION_LOG,
            &["[Compiling kernel]", "[START_KERNEL_COMPILATION]"],
        )?,
        autotuned: count(AUTOTUNE_LOG, &["Fastest result"])?,
    })
}

/// Waits until the logs in the kernel log directory `dir` stop growing: unchanged for 200 ms,
/// at most `limit` in all. CubeCL's logging thread writes a compile's line a moment after the
/// compile; read [`kernel_counts`] after this.
pub fn settle_kernel_log(dir: &Path, limit: Duration) {
    let sizes = || {
        [COMPILATION_LOG, AUTOTUNE_LOG].map(|f| fs::metadata(dir.join(f)).map_or(0, |m| m.len()))
    };
    let start = Instant::now();
    let mut last = sizes();
    let mut since = Instant::now();
    while start.elapsed() < limit {
        std::thread::sleep(Duration::from_millis(25));
        let now = sizes();
        if now != last {
            last = now;
            since = Instant::now();
        } else if since.elapsed() >= Duration::from_millis(200) {
            break;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "bnn-layers-gpu-cache-{name}-{}",
            std::process::id()
        ));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        dir
    }

    /// A page of a well-formed database header: magic, 4096-byte pages, versions 2/2.
    fn database_page() -> Vec<u8> {
        let mut page = vec![0u8; 4096];
        page[..16].copy_from_slice(SQLITE_MAGIC);
        page[16..18].copy_from_slice(&4096u16.to_be_bytes());
        page[18] = 2;
        page[19] = 2;
        page
    }

    #[test]
    fn a_missing_or_empty_or_sound_file_is_left_alone() {
        let dir = scratch("sound");
        let db = dir.join("default.db");
        assert_eq!(damaged_cache_file(&db), None);
        fs::write(&db, b"").unwrap();
        assert_eq!(damaged_cache_file(&db), None);
        fs::write(&db, database_page()).unwrap();
        assert_eq!(damaged_cache_file(&db), None);
        assert!(quarantine_if_damaged(&db).is_empty());
        assert!(db.exists());
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn garbage_in_the_cache_is_moved_aside_with_its_log() {
        let dir = scratch("garbage");
        let db = dir.join("default.db");
        fs::write(&db, b"this is not a database, just garbage bytes").unwrap();
        fs::write(dir.join("default.db-wal"), b"more garbage").unwrap();
        fs::write(dir.join("other.db"), database_page()).unwrap();
        assert!(damaged_cache_file(&db).unwrap().contains("header"));
        let moved = quarantine_if_damaged(&db);
        assert_eq!(moved.len(), 2, "{moved:?}");
        assert!(!db.exists() && !dir.join("default.db-wal").exists());
        assert!(moved.iter().all(|p| p.starts_with(dir.join("quarantine"))));
        assert!(dir.join("other.db").exists(), "another environment is kept");
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn truncated_files_bad_page_sizes_and_bad_logs_are_damaged() {
        let dir = scratch("kinds");
        let db = dir.join("default.db");
        let mut page = database_page();
        page.truncate(3000);
        fs::write(&db, &page).unwrap();
        assert!(damaged_cache_file(&db).unwrap().contains("truncated"));
        let mut page = database_page();
        page[16..18].copy_from_slice(&1000u16.to_be_bytes());
        fs::write(&db, &page).unwrap();
        assert!(damaged_cache_file(&db).unwrap().contains("page size"));
        fs::write(&db, database_page()).unwrap();
        fs::write(dir.join("default.db-wal"), [0u8; 64]).unwrap();
        assert!(damaged_cache_file(&db).unwrap().contains("write-ahead"));
        fs::create_dir_all(dir.join("dir.db")).unwrap();
        assert!(damaged_cache_file(&dir.join("dir.db")).is_some());
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn kernel_counts_read_cubecl_log_lines() {
        let dir = scratch("counts");
        assert_eq!(kernel_counts(&dir).unwrap(), KernelCounts::default());
        fs::write(
            dir.join(COMPILATION_LOG),
            "[Compiling kernel] MatmulKernel\n[Compiling kernel] Reduce\nother\n",
        )
        .unwrap();
        fs::write(
            dir.join(AUTOTUNE_LOG),
            "Fastest result Tiling-key. Top 3 times: []\nvalidate checksum key=1\n",
        )
        .unwrap();
        settle_kernel_log(&dir, Duration::from_secs(1));
        assert_eq!(
            kernel_counts(&dir).unwrap(),
            KernelCounts {
                compiled: 2,
                autotuned: 1
            }
        );
        fs::remove_dir_all(&dir).unwrap();
    }

    #[cfg(not(any(feature = "wgpu", feature = "cuda")))]
    #[test]
    fn a_cpu_build_has_nothing_to_cache() {
        let cache = gpu_cache();
        assert_eq!(cache.origin, CacheOrigin::NoGpuBackend);
        assert!(!cache.persistent());
        assert!(cache.describe().contains("nothing to cache"));
    }
}
