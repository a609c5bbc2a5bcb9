//! Readers for checkpoint formats whose packed tensors dq dequantizes (SPEC section 11).

pub mod hf;
