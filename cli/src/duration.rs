//! Durations on the command line: `500ms`, `5s`, `2m`, `1h`, `1.5s`; a bare
//! number is seconds, as flock's `-w` takes them.

use std::time::Duration;

/// The units a duration may carry, with their length in nanoseconds.
const UNITS: [(&str, u128); 4] = [
    ("ms", 1_000_000),
    ("s", 1_000_000_000),
    ("m", 60_000_000_000),
    ("h", 3_600_000_000_000),
];

/// The longest duration accepted: a year is "no limit" for every use here.
const MAX: Duration = Duration::from_secs(365 * 24 * 3600);

/// Parses `text` as a duration, or says what is wrong with it.
pub(crate) fn parse(text: &str) -> Result<Duration, String> {
    let digits_end = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(digits_end);
    let unit_nanos = match unit {
        "" => 1_000_000_000,
        _ => match UNITS.iter().find(|(name, _)| *name == unit) {
            Some((_, nanos)) => *nanos,
            None => {
                return Err(format!(
                    "{text:?}: unknown unit {unit:?} (use ms, s, m or h)"
                ))
            }
        },
    };
    let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
    if whole.is_empty() && fraction.is_empty() || fraction.contains('.') {
        return Err(format!(
            "{text:?} is not a duration (such as 500ms, 5s, 2m)"
        ));
    }
    // Integer arithmetic throughout: 0.1s is exactly 100 ms.
    let whole: u128 = match whole {
        "" => 0,
        _ => whole.parse().map_err(|_| format!("{text:?} is too long"))?,
    };
    let mut nanos = whole.checked_mul(unit_nanos);
    let mut scale = unit_nanos;
    for digit in fraction.bytes() {
        scale /= 10;
        nanos = nanos.map(|n| n + u128::from(digit - b'0') * scale);
    }
    match nanos.map(|n| Duration::from_nanos(u64::try_from(n).unwrap_or(u64::MAX))) {
        Some(duration) if duration <= MAX => Ok(duration),
        _ => Err(format!("{text:?} is too long (at most a year)")),
    }
}

/// `d` for messages: `250ms`, `1.5s`, `2m30s`.
pub(crate) fn show(d: Duration) -> String {
    let millis = d.as_millis();
    if millis < 1000 {
        return format!("{millis}ms");
    }
    let secs = d.as_secs();
    if secs < 60 {
        let tenths = d.subsec_millis() / 100;
        return match tenths {
            0 => format!("{secs}s"),
            _ => format!("{secs}.{tenths}s"),
        };
    }
    match (secs / 3600, secs / 60 % 60, secs % 60) {
        (0, m, 0) => format!("{m}m"),
        (0, m, s) => format!("{m}m{s}s"),
        (h, m, _) => format!("{h}h{m:02}m"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_forms_the_help_promises() {
        let ms = Duration::from_millis;
        for (text, expected) in [
            ("0", ms(0)),
            ("500ms", ms(500)),
            ("5s", ms(5000)),
            ("2m", ms(120_000)),
            ("1h", ms(3_600_000)),
            ("1.5s", ms(1500)),
            ("0.1s", ms(100)),
            (".25s", ms(250)),
            ("30", ms(30_000)),
            ("0.5", ms(500)),
            ("1.", ms(1000)),
        ] {
            assert_eq!(parse(text), Ok(expected), "{text}");
        }
    }

    #[test]
    fn rejects_what_is_not_a_duration() {
        for text in [
            "",
            "s",
            ".",
            "-1s",
            "1x",
            "1 s",
            "1.2.3s",
            "1e3",
            "5sec",
            "1d",
            "99999999h",
            "340282366920938463463374607431768211456",
        ] {
            assert!(parse(text).is_err(), "{text:?} should be rejected");
        }
    }

    #[test]
    fn shows_durations_briefly() {
        let ms = Duration::from_millis;
        assert_eq!(show(ms(250)), "250ms");
        assert_eq!(show(ms(1500)), "1.5s");
        assert_eq!(show(ms(30_000)), "30s");
        assert_eq!(show(ms(150_000)), "2m30s");
        assert_eq!(show(ms(120_000)), "2m");
        assert_eq!(show(ms(3_660_000)), "1h01m");
    }
}
