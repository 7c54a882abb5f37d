//! Tests of xrunlab-doctor against fixture machines (each test writes its own trees):
//! findings and fixes per kind of machine, missing and malformed files, applying and undoing
//! settings, whether this user can trace. One test binary.

mod apply;
mod fixture;
mod machines;
mod malformed;
mod tracing_user;
mod trust;
