//! Arbitrary bytes into the decoder: it must never panic, and a complete
//! reply must re-encode to bytes that decode to the same reply.
#![no_main]

use libfuzzer_sys::fuzz_target;
use redlock_sync::resp::{decode, encode_reply, Decoded, MAX_REPLY_LEN};

fuzz_target!(|data: &[u8]| {
    let Ok(Decoded::Complete(reply, used)) = decode(data) else {
        return;
    };
    assert!(used > 0 && used <= data.len() && used <= MAX_REPLY_LEN);
    let mut again = Vec::new();
    encode_reply(&mut again, &reply);
    match decode(&again) {
        Ok(Decoded::Complete(back, back_used)) => {
            assert_eq!(back, reply);
            assert_eq!(back_used, again.len());
        }
        other => panic!("re-encoded {reply:?} decodes as {other:?}"),
    }
});
