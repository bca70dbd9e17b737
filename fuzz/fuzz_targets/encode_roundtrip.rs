//! Arbitrary argument lists: an encoded command has exactly the predicted
//! length and decodes as an array of the same bulk strings.
#![no_main]

use libfuzzer_sys::fuzz_target;
use redlock_sync::resp::{
    command_len, decode, encode_command, Arg, Decimal, Decoded, Reply, MAX_ARRAY_LEN, MAX_BULK_LEN,
    MAX_REPLY_LEN,
};

#[derive(Debug, arbitrary::Arbitrary)]
enum FuzzArg {
    Bytes(Vec<u8>),
    Uint(u64),
}

fuzz_target!(|args: Vec<FuzzArg>| {
    let args: Vec<Arg<'_>> = args
        .iter()
        .map(|a| match a {
            FuzzArg::Bytes(b) => Arg::Bytes(b),
            FuzzArg::Uint(n) => Arg::Uint(*n),
        })
        .collect();
    let mut out = vec![b'?']; // encode_command appends: keep a prefix byte
    encode_command(&mut out, &args);
    assert_eq!(out.len(), 1 + command_len(&args));
    let frame = &out[1..];

    let fits = args.len() <= MAX_ARRAY_LEN
        && args.iter().all(|a| match a {
            Arg::Bytes(b) => b.len() <= MAX_BULK_LEN,
            Arg::Uint(_) => true,
        })
        && frame.len() <= MAX_REPLY_LEN;
    if !fits {
        return; // the decoder rightly refuses what exceeds its bounds
    }
    let Ok(Decoded::Complete(Reply::Array(array), used)) = decode(frame) else {
        panic!("command did not decode as an array");
    };
    assert_eq!(used, frame.len());
    assert_eq!(array.len(), args.len());
    for (reply, arg) in array.iter().zip(&args) {
        let expected = match arg {
            Arg::Bytes(b) => b.to_vec(),
            Arg::Uint(n) => Decimal::unsigned(*n).as_bytes().to_vec(),
        };
        assert_eq!(reply, Reply::Bulk(&expected));
    }
});
