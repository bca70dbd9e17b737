//! Codec tests: prefixes, round trips, random splits and malformed frames.

use super::*;

/// Valid frames, one per reply shape (and some edge cases of each).
const VALID: &[&[u8]] = &[
    b"+OK\r\n",
    b"+\r\n",
    b"-ERR unknown command\r\n",
    b"-NOSCRIPT No matching script. Please use EVAL.\r\n",
    b"-\r\n",
    b":0\r\n",
    b":1\r\n",
    b":-1\r\n",
    b":007\r\n",
    b":9223372036854775807\r\n",
    b":-9223372036854775808\r\n",
    b"$-1\r\n",
    b"$0\r\n\r\n",
    b"$3\r\nabc\r\n",
    b"$6\r\na\r\nb\0c\r\n",
    b"$2\r\n\xff\xfe\r\n",
    b"*-1\r\n",
    b"*0\r\n",
    b"*2\r\n$3\r\nfoo\r\n:42\r\n",
    b"*3\r\n*1\r\n+a\r\n*0\r\n$-1\r\n",
    b"*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n:1\r\n",
];

fn complete(input: &[u8]) -> (Reply<'_>, usize) {
    match decode(input) {
        Ok(Decoded::Complete(reply, used)) => (reply, used),
        other => panic!(
            "{:?}: expected a complete reply, got {other:?}",
            escape(input)
        ),
    }
}

fn escape(bytes: &[u8]) -> String {
    bytes.escape_ascii().to_string()
}

/// A tiny seeded PRNG (xorshift64*) so the tests need no extra crate and
/// every run sees the same "random" splits.
struct Prng(u64);

impl Prng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

#[test]
fn every_valid_frame_decodes_whole() {
    for frame in VALID {
        let (_, used) = complete(frame);
        assert_eq!(used, frame.len(), "{}", escape(frame));
    }
}

#[test]
fn every_strict_prefix_is_partial() {
    for frame in VALID {
        for cut in 0..frame.len() {
            assert_eq!(
                decode(&frame[..cut]),
                Ok(Decoded::Partial),
                "prefix {:?} of {:?}",
                escape(&frame[..cut]),
                escape(frame)
            );
        }
    }
}

#[test]
fn decoded_values() {
    assert_eq!(complete(b"+OK\r\n").0, Reply::Simple(b"OK"));
    assert_eq!(complete(b"$-1\r\n").0, Reply::Nil);
    assert_eq!(complete(b"*-1\r\n").0, Reply::NilArray);
    assert_eq!(complete(b":-1\r\n").0, Reply::Integer(-1));
    assert_eq!(complete(b":007\r\n").0, Reply::Integer(7));
    assert_eq!(
        complete(b":-9223372036854775808\r\n").0,
        Reply::Integer(i64::MIN)
    );
    assert_eq!(
        complete(b"$6\r\na\r\nb\0c\r\n").0,
        Reply::Bulk(b"a\r\nb\0c")
    );
    assert_eq!(complete(b"-ERR x y\r\n").0, Reply::Error(b"ERR x y"));
    let (reply, _) = complete(b"*3\r\n*1\r\n+a\r\n*0\r\n$-1\r\n");
    let Reply::Array(outer) = reply else {
        panic!("not an array: {reply:?}")
    };
    let elements: Vec<Reply<'_>> = outer.iter().collect();
    assert_eq!(elements.len(), 3);
    let Reply::Array(first) = elements[0] else {
        panic!("not an array: {:?}", elements[0])
    };
    assert_eq!(first.iter().collect::<Vec<_>>(), [Reply::Simple(b"a")]);
    assert!(matches!(elements[1], Reply::Array(a) if a.is_empty()));
    assert_eq!(elements[2], Reply::Nil);
}

#[test]
fn trailing_bytes_are_left_for_the_next_reply() {
    let (reply, used) = complete(b":1\r\n+OK\r\n");
    assert_eq!((reply, used), (Reply::Integer(1), 4));
}

#[test]
fn reply_encode_decode_round_trip() {
    for frame in VALID {
        let (reply, _) = complete(frame);
        let mut out = Vec::new();
        encode_reply(&mut out, &reply);
        let (again, used) = complete(&out);
        assert_eq!(again, reply, "{}", escape(frame));
        assert_eq!(used, out.len());
    }
}

#[test]
fn command_encoding_is_exact_and_binary_safe() {
    let args = [
        Arg::Bytes(b"SET"),
        Arg::Bytes(b"k\r\n\0\xff"),
        Arg::Bytes(b""),
        Arg::Uint(0),
        Arg::Uint(u64::MAX),
    ];
    let mut out = Vec::new();
    encode_command(&mut out, &args);
    assert_eq!(
        out,
        b"*5\r\n$3\r\nSET\r\n$5\r\nk\r\n\0\xff\r\n$0\r\n\r\n$1\r\n0\r\n$20\r\n18446744073709551615\r\n"
    );
    assert_eq!(command_len(&args), out.len());

    // A command decodes as an array of the same bulk strings.
    let (reply, _) = complete(&out);
    let Reply::Array(array) = reply else {
        panic!("not an array: {reply:?}")
    };
    let payloads: Vec<Reply<'_>> = array.iter().collect();
    assert_eq!(
        payloads,
        [
            Reply::Bulk(b"SET"),
            Reply::Bulk(b"k\r\n\0\xff"),
            Reply::Bulk(b""),
            Reply::Bulk(b"0"),
            Reply::Bulk(b"18446744073709551615"),
        ]
    );
}

#[test]
fn command_round_trip_with_random_arguments() {
    let mut rng = Prng(0x9E37_79B9_7F4A_7C15);
    let mut out = Vec::new();
    for _ in 0..500 {
        let count = 1 + rng.below(8);
        let owned: Vec<Vec<u8>> = (0..count)
            .map(|_| (0..rng.below(40)).map(|_| rng.next() as u8).collect())
            .collect();
        let args: Vec<Arg<'_>> = owned.iter().map(|a| Arg::Bytes(a)).collect();
        out.clear();
        encode_command(&mut out, &args);
        assert_eq!(out.len(), command_len(&args));
        let (reply, used) = complete(&out);
        assert_eq!(used, out.len());
        let Reply::Array(array) = reply else {
            panic!("not an array: {reply:?}")
        };
        let back: Vec<&[u8]> = array
            .iter()
            .map(|r| match r {
                Reply::Bulk(b) => b,
                other => panic!("not a bulk string: {other:?}"),
            })
            .collect();
        assert_eq!(back, owned);
    }
}

#[test]
fn decimal_formatting() {
    for n in [0u64, 1, 9, 10, 99, 100, 12345, u64::MAX] {
        assert_eq!(Decimal::unsigned(n).as_bytes(), n.to_string().as_bytes());
    }
    for n in [0i64, -1, 7, -10, i64::MAX, i64::MIN] {
        assert_eq!(Decimal::signed(n).as_bytes(), n.to_string().as_bytes());
    }
}

/// Decodes a stream of replies the way a connection does: bytes arrive in
/// chunks of random sizes, are appended to a buffer, and whole replies are
/// taken off its front. The replies must match decoding the stream whole.
#[test]
fn random_splits_give_the_same_replies() {
    let stream: Vec<u8> = VALID.concat();
    let mut expected = Vec::new();
    let mut rest = &stream[..];
    while !rest.is_empty() {
        let (reply, used) = complete(rest);
        let mut canonical = Vec::new();
        encode_reply(&mut canonical, &reply);
        expected.push(canonical);
        rest = &rest[used..];
    }

    let mut rng = Prng(42);
    for _ in 0..300 {
        let mut got = Vec::new();
        let mut buf: Vec<u8> = Vec::new();
        let mut fed = 0;
        while fed < stream.len() {
            let chunk = 1 + rng.below(12);
            let end = (fed + chunk).min(stream.len());
            buf.extend_from_slice(&stream[fed..end]);
            fed = end;
            while let Decoded::Complete(reply, used) = decode(&buf).expect("valid stream") {
                let mut canonical = Vec::new();
                encode_reply(&mut canonical, &reply);
                got.push(canonical);
                buf.drain(..used);
            }
        }
        assert!(buf.is_empty());
        assert_eq!(got, expected);
    }
}

#[test]
fn malformed_frames_map_to_their_errors() {
    let long_line = [b"+".as_slice(), &[b'a'; MAX_LINE_LEN + 1]].concat();
    let longest_line = [b"+".as_slice(), &[b'a'; MAX_LINE_LEN], b"\r\n"].concat();
    let too_deep = [b"*1\r\n".repeat(MAX_DEPTH + 1), b":1\r\n".to_vec()].concat();
    let table: &[(&[u8], DecodeError)] = &[
        (b"\r\n", DecodeError::MissingType),
        (b"\n", DecodeError::MissingType),
        (b"?OK\r\n", DecodeError::UnknownType(b'?')),
        (b"OK\r\n", DecodeError::UnknownType(b'O')),
        (b"\0", DecodeError::UnknownType(0)),
        (b"_\r\n", DecodeError::Resp3(b'_')),
        (b"#t\r\n", DecodeError::Resp3(b'#')),
        (b",1.5\r\n", DecodeError::Resp3(b',')),
        (b"%1\r\n", DecodeError::Resp3(b'%')),
        (b">2\r\n", DecodeError::Resp3(b'>')),
        (b"|1\r\n", DecodeError::Resp3(b'|')),
        (b"=3\r\n", DecodeError::Resp3(b'=')),
        (b"(1\r\n", DecodeError::Resp3(b'(')),
        (b"!3\r\n", DecodeError::Resp3(b'!')),
        (b"~1\r\n", DecodeError::Resp3(b'~')),
        (&long_line, DecodeError::LineTooLong),
        (b"+OK\n", DecodeError::MissingCrlf),
        (b"+OK\rX", DecodeError::MissingCrlf),
        (b"+O\nK\r\n", DecodeError::MissingCrlf),
        (b"$3\r\nabcde\r\n", DecodeError::MissingCrlf),
        (b"$3\r\nabc\n\n", DecodeError::MissingCrlf),
        (b"$\r\n", DecodeError::InvalidLength),
        (b"$x\r\n", DecodeError::InvalidLength),
        (b"$+3\r\n", DecodeError::InvalidLength),
        (b"$ 3\r\n", DecodeError::InvalidLength),
        (b"$3 \r\n", DecodeError::InvalidLength),
        (b"*1a\r\n", DecodeError::InvalidLength),
        (b"$-\r\n", DecodeError::InvalidLength),
        (b"$-2\r\n", DecodeError::NegativeLength(-2)),
        (b"*-5\r\n", DecodeError::NegativeLength(-5)),
        (b"$99999999999999999999\r\n", DecodeError::LengthOverflow),
        (b"*99999999999999999999\r\n", DecodeError::LengthOverflow),
        (b"$-99999999999999999999\r\n", DecodeError::LengthOverflow),
        (b"$65537\r\n", DecodeError::BulkTooLong(65537)),
        (b"$4294967296\r\n", DecodeError::BulkTooLong(4_294_967_296)),
        (b"*1025\r\n", DecodeError::ArrayTooLong(1025)),
        (b"*3000000000\r\n", DecodeError::ArrayTooLong(3_000_000_000)),
        (&too_deep, DecodeError::TooDeep),
        (b":\r\n", DecodeError::InvalidInteger),
        (b":-\r\n", DecodeError::InvalidInteger),
        (b":1.5\r\n", DecodeError::InvalidInteger),
        (b":+1\r\n", DecodeError::InvalidInteger),
        (b":9223372036854775808\r\n", DecodeError::InvalidInteger),
        (b":-9223372036854775809\r\n", DecodeError::InvalidInteger),
        (b"*2\r\n:1\r\n?\r\n", DecodeError::UnknownType(b'?')),
    ];
    for (frame, error) in table {
        assert_eq!(decode(frame), Err(*error), "{}", escape(frame));
    }
    // The bounds themselves are allowed.
    assert!(matches!(decode(&longest_line), Ok(Decoded::Complete(..))));
    assert!(matches!(decode(b"$65536\r\n"), Ok(Decoded::Partial)));
    assert!(matches!(decode(b"*1024\r\n"), Ok(Decoded::Partial)));
}

#[test]
fn a_huge_array_of_small_elements_hits_the_reply_limit() {
    // 1024 elements per array, 8 deep: far more than MAX_REPLY_LEN bytes of
    // ":0\r\n" elements. The decoder must stop at the limit, not keep waiting.
    let mut frame = b"*1024\r\n".repeat(MAX_DEPTH - 1);
    let innermost = [b"*1024\r\n".to_vec(), b":0\r\n".repeat(1024)].concat();
    while frame.len() <= MAX_REPLY_LEN {
        frame.extend_from_slice(&innermost);
    }
    assert_eq!(decode(&frame), Err(DecodeError::ReplyTooLong));
}

#[test]
fn a_bulk_header_errors_at_once_without_waiting_for_the_payload() {
    // No payload bytes at all: the header alone is enough to reject.
    assert_eq!(
        decode(b"$1000000000\r\n"),
        Err(DecodeError::BulkTooLong(1_000_000_000))
    );
    // Just under the line limit, an unterminated line is still partial...
    let partial = [b"-".as_slice(), &[b'x'; MAX_LINE_LEN]].concat();
    assert_eq!(decode(&partial), Ok(Decoded::Partial));
    // ...and one byte more is an error, not a wait.
    let over = [partial.as_slice(), b"x"].concat();
    assert_eq!(decode(&over), Err(DecodeError::LineTooLong));
}

#[test]
fn server_errors_are_classified() {
    type Case = (&'static [u8], ServerErrorKind, &'static [u8], &'static [u8]);
    let table: &[Case] = &[
        (
            b"ERR syntax error",
            ServerErrorKind::Err,
            b"ERR",
            b"syntax error",
        ),
        (
            b"WRONGTYPE Operation",
            ServerErrorKind::WrongType,
            b"WRONGTYPE",
            b"Operation",
        ),
        (
            b"NOSCRIPT No matching",
            ServerErrorKind::NoScript,
            b"NOSCRIPT",
            b"No matching",
        ),
        (
            b"NOAUTH Authentication required.",
            ServerErrorKind::NoAuth,
            b"NOAUTH",
            b"Authentication required.",
        ),
        (
            b"WRONGPASS invalid",
            ServerErrorKind::WrongPass,
            b"WRONGPASS",
            b"invalid",
        ),
        (b"NOPERM no", ServerErrorKind::NoPerm, b"NOPERM", b"no"),
        (
            b"LOADING loading",
            ServerErrorKind::Loading,
            b"LOADING",
            b"loading",
        ),
        (
            b"READONLY You can't",
            ServerErrorKind::ReadOnly,
            b"READONLY",
            b"You can't",
        ),
        (
            b"BUSY Redis is busy",
            ServerErrorKind::Busy,
            b"BUSY",
            b"Redis is busy",
        ),
        (
            b"MASTERDOWN Link",
            ServerErrorKind::MasterDown,
            b"MASTERDOWN",
            b"Link",
        ),
        (
            b"CROSSSLOT Keys",
            ServerErrorKind::CrossSlot,
            b"CROSSSLOT",
            b"Keys",
        ),
        (
            b"MOVED 3999 127.0.0.1:6381",
            ServerErrorKind::Moved,
            b"MOVED",
            b"3999 127.0.0.1:6381",
        ),
        (b"ASK 1 :7000", ServerErrorKind::Ask, b"ASK", b"1 :7000"),
        (
            b"TRYAGAIN Multiple keys",
            ServerErrorKind::TryAgain,
            b"TRYAGAIN",
            b"Multiple keys",
        ),
        (
            b"CLUSTERDOWN Hash slot not served",
            ServerErrorKind::ClusterDown,
            b"CLUSTERDOWN",
            b"Hash slot not served",
        ),
        (b"ERR", ServerErrorKind::Err, b"ERR", b""),
        (b"", ServerErrorKind::Other, b"", b""),
        (
            b"err lower case",
            ServerErrorKind::Other,
            b"err",
            b"lower case",
        ),
    ];
    for (line, kind, code, message) in table {
        assert_eq!(
            split_error(line),
            (*kind, *code, *message),
            "{}",
            escape(line)
        );
    }
}

/// The codec's hot path allocates nothing: encoding `SET key value NX PX
/// ttl` into a reused buffer and decoding `+OK`, counted by the unit tests'
/// per-thread counting allocator.
#[test]
fn encode_set_and_decode_ok_allocate_nothing() {
    use crate::counting_alloc::counted;
    let mut buf = Vec::with_capacity(128);
    let value = [0xAB_u8; 40];
    let encode = |buf: &mut Vec<u8>, ttl: u64| {
        buf.clear();
        encode_command(
            buf,
            &[
                Arg::Bytes(b"SET"),
                Arg::Bytes(b"orders:42"),
                Arg::Bytes(&value),
                Arg::Bytes(b"NX"),
                Arg::Bytes(b"PX"),
                Arg::Uint(ttl),
            ],
        );
    };
    encode(&mut buf, 1); // the buffer has its final capacity from here on
    let mut checked = 0;
    let (_, counts) = counted(|| {
        for ttl in [1, 10_000, u64::MAX] {
            encode(&mut buf, ttl);
            checked += usize::from(buf.starts_with(b"*6\r\n$3\r\nSET\r\n"));
            if let Ok(Decoded::Complete(Reply::Simple(b"OK"), 5)) = decode(b"+OK\r\n") {
                checked += 1;
            }
        }
    });
    assert_eq!(
        checked, 6,
        "the measured work did not produce the expected bytes"
    );
    assert_eq!(
        counts.allocations, 0,
        "heap allocations on the codec hot path"
    );
    // Guards the assertion above against a counter that never counts.
    let (_, counts) = counted(|| drop(std::hint::black_box(vec![1u8; 64])));
    assert!(counts.allocations >= 1);
}

#[test]
fn topology_replies_have_looser_array_and_size_bounds_and_no_other() {
    // An array of 1025 elements: too long for a reply, fine for a topology.
    let frame = [b"*1025\r\n".to_vec(), b":0\r\n".repeat(1025)].concat();
    assert_eq!(decode(&frame), Err(DecodeError::ArrayTooLong(1025)));
    let Ok(Decoded::Complete(Reply::Array(array), used)) = decode_topology(&frame) else {
        panic!("a 1025-element topology reply decodes");
    };
    assert_eq!((array.len(), used), (1025, frame.len()));
    // The topology's own bounds, and the bounds it shares.
    assert!(matches!(
        decode_topology(b"*16384\r\n"),
        Ok(Decoded::Partial)
    ));
    assert_eq!(
        decode_topology(b"*16385\r\n"),
        Err(DecodeError::ArrayTooLong(16385))
    );
    assert_eq!(
        decode_topology(b"$65537\r\n"),
        Err(DecodeError::BulkTooLong(65537))
    );
    let too_deep = [b"*1\r\n".repeat(MAX_DEPTH + 1), b":1\r\n".to_vec()].concat();
    assert_eq!(decode_topology(&too_deep), Err(DecodeError::TooDeep));
    // More than 1 MiB: a topology reply, up to 8 MiB.
    let bulk = [b"$60000\r\n".to_vec(), vec![b'x'; 60000], b"\r\n".to_vec()].concat();
    let big = [b"*20\r\n".to_vec(), bulk.repeat(20)].concat();
    assert!(big.len() > MAX_REPLY_LEN);
    assert_eq!(decode(&big), Err(DecodeError::ReplyTooLong));
    assert!(matches!(
        decode_topology(&big),
        Ok(Decoded::Complete(_, n)) if n == big.len()
    ));
    let huge = [b"*16384\r\n".to_vec(), bulk.repeat(150)].concat();
    assert!(huge.len() > MAX_TOPOLOGY_REPLY_LEN);
    assert_eq!(decode_topology(&huge), Err(DecodeError::ReplyTooLong));
}

#[test]
fn iterating_a_topology_reply_sees_every_element_of_its_long_arrays() {
    // Elements are re-read on iteration: a nested array longer than the
    // general bound must not end the iteration early.
    let inner = [b"*16384\r\n".to_vec(), b":7\r\n".repeat(16384)].concat();
    let frame = [b"*2\r\n".to_vec(), inner.clone(), inner].concat();
    let Ok(Decoded::Complete(Reply::Array(outer), _)) = decode_topology(&frame) else {
        panic!("decodes");
    };
    let mut count = 0;
    for element in outer.iter() {
        let Reply::Array(inner) = element else {
            panic!("an array");
        };
        assert_eq!(inner.iter().count(), 16384);
        assert!(inner.iter().all(|r| r == Reply::Integer(7)));
        count += 1;
    }
    assert_eq!(count, 2);
}
