//! Benchmarks of the project live in `benches/` (criterion) and `peers/` (side-by-side scripts
//! for PyTorch and scikit-learn); the model-level benchmarks are `cargo xtask bench ...`.
