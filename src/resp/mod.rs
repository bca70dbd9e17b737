//! The RESP2 wire codec: bytes in, replies out; commands in, bytes out.
//!
//! This module does no I/O and reads no clock. The encoder appends a command
//! (an array of bulk strings) to a caller-owned buffer; the decoder is a push
//! parser over `&[u8]` that answers [`Decoded::Complete`] with the reply and
//! the number of bytes it used, [`Decoded::Partial`] when more bytes are
//! needed, or a [`DecodeError`].
//!
//! Everything a server controls is bounded by a named constant
//! ([`MAX_LINE_LEN`], [`MAX_BULK_LEN`], [`MAX_ARRAY_LEN`], [`MAX_DEPTH`],
//! [`MAX_REPLY_LEN`]); a header that exceeds a bound is rejected as soon as it
//! is read, so the decoder never waits for the announced size. A cluster's
//! topology reply, read only at a cluster voter's set-up and refreshes, is
//! decoded by [`decode_topology`] under two looser bounds of its own
//! ([`MAX_TOPOLOGY_ARRAY_LEN`], [`MAX_TOPOLOGY_REPLY_LEN`]).
//!
//! RESP3 is not spoken: the client never sends `HELLO 3`, so a RESP3 type
//! byte (`_ , # ! = ( % ~ > |`) can only come from a confused or hostile peer
//! and is rejected with [`DecodeError::Resp3`].
//!
//! The module is public only with the `fuzzing` feature, for the fuzz
//! targets in `fuzz/` and the codec benchmark; it is no part of the API and
//! may change at any time.

// The fuzz targets use the whole codec; the crate only part of it.
#![cfg_attr(not(feature = "fuzzing"), allow(dead_code))]

mod decode;
mod encode;
mod server_error;

// Without the `fuzzing` feature, part of this is used by the crate only.
#[allow(unused_imports)]
pub use decode::{
    decode, decode_topology, Array, ArrayIter, DecodeError, Decoded, Reply, MAX_ARRAY_LEN,
    MAX_BULK_LEN, MAX_DEPTH, MAX_LINE_LEN, MAX_REPLY_LEN, MAX_TOPOLOGY_ARRAY_LEN,
    MAX_TOPOLOGY_REPLY_LEN,
};
#[allow(unused_imports)]
pub use encode::{
    command_len, encode_args, encode_array_header, encode_bulk, encode_command, encode_reply, Arg,
    Decimal,
};
pub use server_error::{split_error, ServerErrorKind};

#[cfg(test)]
mod tests;
