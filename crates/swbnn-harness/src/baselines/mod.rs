//! The baselines the paper's other tables set beside 2DGBNN: the post-training quantised BNN
//! ([`qbnn`]) and the deep ensemble ([`ensemble`]).

pub mod ensemble;
/// The quantised BNN, now `swbnn_ops::qbnn` (this path is kept for one release).
pub use swbnn_ops::qbnn;
