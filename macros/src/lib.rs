//! Proc macros of burnc. Skeleton for now: the Rust frontend (`#[derive(Model)]`, `#[model]`)
//! and `include_model!` are later issues; the crate exists so the workspace has its final shape.
