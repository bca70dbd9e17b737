//! A synchronous client for the Redlock distributed lock.
#![deny(unsafe_code)]
#![deny(missing_docs)]
#![warn(missing_debug_implementations, rust_2018_idioms, unreachable_pub)]
#![doc(test(attr(deny(warnings))))]

#[doc(hidden)]
pub mod resp;

pub use resp::ServerErrorKind;
