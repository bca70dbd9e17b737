//! Durations as error messages show them.

use std::fmt;
use std::time::Duration;

/// A duration as messages show it: rounded to the millisecond from a second
/// up (`1.723s`, `10s`), to a tenth of a millisecond from a millisecond up
/// (`723.4ms`, `45ms`), to the microsecond below (`310µs`), and in
/// nanoseconds under half a microsecond. `Debug` of a `Duration` shows every
/// digit (`1.723052501s`), which no reader needs.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Rounded(pub(crate) Duration);

/// `d`, [`Rounded`] for display.
pub(crate) fn rounded(d: &Duration) -> Rounded {
    Rounded(*d)
}

impl fmt::Display for Rounded {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        /// `value / 10^places` in decimal, without trailing zeros.
        fn decimal(
            f: &mut fmt::Formatter<'_>,
            value: u128,
            places: usize,
            unit: &str,
        ) -> fmt::Result {
            let scale = 10u128.pow(places as u32);
            let (whole, mut fraction, mut places) = (value / scale, value % scale, places);
            if fraction == 0 {
                return write!(f, "{whole}{unit}");
            }
            while fraction % 10 == 0 {
                fraction /= 10;
                places -= 1;
            }
            write!(f, "{whole}.{fraction:0places$}{unit}")
        }
        let nanos = self.0.as_nanos();
        // Units are chosen after rounding, so that 999.9996 ms shows as 1s.
        let millis = (nanos + 500_000) / 1_000_000;
        if millis >= 1_000 {
            return decimal(f, millis, 3, "s");
        }
        let tenths_of_millis = (nanos + 50_000) / 100_000;
        if tenths_of_millis >= 10 {
            return decimal(f, tenths_of_millis, 1, "ms");
        }
        match (nanos + 500) / 1_000 {
            0 if nanos == 0 => f.write_str("0s"),
            0 => write!(f, "{nanos}ns"),
            micros => write!(f, "{micros}µs"),
        }
    }
}
