//! The baselines the paper's other tables set beside 2DGBNN: the post-training quantised BNN
//! ([`qbnn`]) and the deep ensemble ([`ensemble`]).

pub mod ensemble;
pub mod qbnn;
