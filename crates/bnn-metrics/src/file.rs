//! Reading a user-given file with a bound: [`bnn_io::bounded`], re-exported here for the
//! readers that have always used it from this crate.

pub use bnn_io::bounded::{BoundedFile, check_regular, check_regular_within, read_bounded};
