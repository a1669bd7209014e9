pub mod cli;
pub mod npz_fixture;
pub mod table_fixture;
