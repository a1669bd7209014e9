pub mod npz_fixture;
