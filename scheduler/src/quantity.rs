//! Kubernetes quantity syntax (`32Gi`, `500m`, `1.5`, `2Ti`, `1G`) and durations (`90s`, `5m`, `2h`).
//!
//! Quantities are parsed into integers: bytes for memory and disk, millicores for CPU.
//! Parsing is exact for the suffixes Kubernetes uses; anything else is an error that
//! names the offending text, never a panic.

use std::fmt;

/// Why a quantity or duration could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid {what} `{text}`: {why}")]
pub struct QuantityError {
    pub what: &'static str,
    pub text: String,
    pub why: String,
}

fn err(what: &'static str, text: &str, why: impl Into<String>) -> QuantityError {
    QuantityError {
        what,
        text: crate::limits::echo(text),
        why: why.into(),
    }
}

fn bounded(
    what: &'static str,
    text: &str,
    v: f64,
    max: u64,
    show: fn(u64) -> String,
) -> Result<u64, QuantityError> {
    if !v.is_finite() || v > max as f64 {
        return Err(err(what, text, format!("above the limit of {}", show(max))));
    }
    Ok(v.ceil() as u64)
}

/// Splits `text` into a decimal number and a suffix, returning the value scaled by
/// `scale(suffix)` and rounded up to an integer (Kubernetes rounds requests up).
fn parse_scaled(
    what: &'static str,
    text: &str,
    scale: impl Fn(&str) -> Option<f64>,
    expected: &str,
) -> Result<f64, QuantityError> {
    let t = text.trim();
    if t.is_empty() {
        return Err(err(what, text, "empty value"));
    }
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, suffix) = t.split_at(split);
    if num.is_empty() {
        return Err(err(what, text, "expected a number first"));
    }
    let value: f64 = num
        .parse()
        .map_err(|_| err(what, text, format!("`{num}` is not a number")))?;
    let factor = scale(suffix).ok_or_else(|| {
        err(
            what,
            text,
            format!("unknown suffix `{suffix}` (expected {expected})"),
        )
    })?;
    Ok(value * factor)
}

/// Parses and checks a quantity against the byte limit.
fn checked_bytes(text: &str) -> Result<u64, QuantityError> {
    let v = parse_scaled(
        "quantity",
        text,
        byte_suffix,
        "one of Ki Mi Gi Ti Pi Ei k M G T P E or none",
    )?;
    bounded("quantity", text, v, crate::limits::MAX_BYTES, fmt_bytes)
}

fn byte_suffix(s: &str) -> Option<f64> {
    Some(match s {
        "" => 1.0,
        "k" => 1e3,
        "M" => 1e6,
        "G" => 1e9,
        "T" => 1e12,
        "P" => 1e15,
        // Kubernetes' largest suffixes: taken so that their size is checked against
        // the limit (and said so), not refused as unknown.
        "E" => 1e18,
        "Ki" => 1024.0,
        "Mi" => 1024.0 * 1024.0,
        "Gi" => 1024.0 * 1024.0 * 1024.0,
        "Ti" => 1024.0f64.powi(4),
        "Pi" => 1024.0f64.powi(5),
        "Ei" => 1024.0f64.powi(6),
        _ => return None,
    })
}

/// Parses a memory or disk quantity into bytes (`32Gi`, `100G`, `512Mi`, `1073741824`).
pub fn parse_bytes(text: &str) -> Result<u64, QuantityError> {
    checked_bytes(text)
}

/// Parses a CPU quantity into millicores (`16` -> 16000, `500m` -> 500, `1.5` -> 1500).
pub fn parse_cpu_milli(text: &str) -> Result<u64, QuantityError> {
    let v = parse_scaled(
        "CPU quantity",
        text,
        |s| match s {
            "" => Some(1000.0),
            "m" => Some(1.0),
            _ => None,
        },
        "`m` or none",
    )?;
    bounded("CPU quantity", text, v, crate::limits::MAX_CPU_MILLI, |m| {
        format!("{} cores", fmt_cpu(m))
    })
}

/// Parses a duration into seconds (`90s`, `5m`, `2h`, `1d`, `1h30m`, or plain seconds).
pub fn parse_duration_s(text: &str) -> Result<u64, QuantityError> {
    let t = text.trim();
    if t.is_empty() {
        return Err(err("duration", text, "empty value"));
    }
    let max = crate::limits::MAX_DURATION_S;
    if let Ok(v) = t.parse::<u64>() {
        return bounded("duration", text, v as f64, max, fmt_duration);
    }
    let mut total = 0f64;
    let mut rest = t;
    while !rest.is_empty() {
        let split = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let (num, tail) = rest.split_at(split);
        if num.is_empty() {
            return Err(err("duration", text, "expected a number before each unit"));
        }
        let unit_len = tail
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(tail.len());
        let (unit, next) = tail.split_at(unit_len);
        let factor = match unit {
            "ms" => 0.001,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            "d" => 86400.0,
            "" => return Err(err("duration", text, "missing unit (s, m, h or d)")),
            other => {
                return Err(err(
                    "duration",
                    text,
                    format!("unknown unit `{other}` (expected ms, s, m, h or d)"),
                ))
            }
        };
        let v: f64 = num
            .parse()
            .map_err(|_| err("duration", text, format!("`{num}` is not a number")))?;
        total += v * factor;
        rest = next;
    }
    bounded("duration", text, total.round(), max, fmt_duration)
}

/// Formats bytes the way operators read them: `80Gi`, `512Mi`, `1.5Ti`.
pub fn fmt_bytes(b: u64) -> String {
    const UNITS: [(&str, u64); 5] = [
        ("Pi", 1 << 50),
        ("Ti", 1 << 40),
        ("Gi", 1 << 30),
        ("Mi", 1 << 20),
        ("Ki", 1 << 10),
    ];
    for (name, size) in UNITS {
        if b >= size {
            let v = b as f64 / size as f64;
            return if (v - v.round()).abs() < 0.05 {
                format!("{}{name}", v.round() as u64)
            } else {
                format!("{v:.1}{name}")
            };
        }
    }
    format!("{b}")
}

/// Formats millicores as cores: `16`, `0.5`.
pub fn fmt_cpu(milli: u64) -> String {
    if milli.is_multiple_of(1000) {
        format!("{}", milli / 1000)
    } else {
        let s = format!("{:.3}", milli as f64 / 1000.0);
        s.trim_end_matches('0').to_string()
    }
}

/// Formats GPU millis as a GPU count: `2`, `0.5`.
pub fn fmt_gpus(milli: u64) -> String {
    fmt_cpu(milli)
}

/// Formats seconds as `1h02m`, `5m30s`, `42s`.
pub fn fmt_duration(s: u64) -> String {
    let (d, h, m, sec) = (s / 86400, (s / 3600) % 24, (s / 60) % 60, s % 60);
    if d > 0 {
        format!("{d}d{h:02}h")
    } else if h > 0 {
        format!("{h}h{m:02}m")
    } else if m > 0 {
        format!("{m}m{sec:02}s")
    } else {
        format!("{sec}s")
    }
}

/// A duration given in a scenario: seconds, parsed from text such as `5m` or a number.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct Duration(pub u64);

impl fmt::Display for Duration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&fmt_duration(self.0))
    }
}

/// Bytes parsed from a Kubernetes quantity string (or a plain integer).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct Bytes(pub u64);

/// Millicores parsed from a CPU quantity (`16`, `500m`) or a plain number of cores.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct CpuMilli(pub u64);

macro_rules! quantity_de {
    ($ty:ident, $parse:path, $expect:literal, $from_f64:expr, $limit:expr) => {
        impl<'de> serde::Deserialize<'de> for $ty {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                struct V;
                impl serde::de::Visitor<'_> for V {
                    type Value = $ty;
                    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                        f.write_str($expect)
                    }
                    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<$ty, E> {
                        $parse(v).map($ty).map_err(E::custom)
                    }
                    fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<$ty, E> {
                        self.visit_f64(v as f64)
                    }
                    fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<$ty, E> {
                        if v < 0 {
                            return Err(E::custom(format!("negative value {v}")));
                        }
                        self.visit_u64(v as u64)
                    }
                    fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<$ty, E> {
                        if !(v >= 0.0 && v.is_finite()) {
                            return Err(E::custom(format!("invalid value {v}")));
                        }
                        #[allow(clippy::redundant_closure_call)]
                        let x: f64 = ($from_f64)(v);
                        let (max, show): (u64, fn(u64) -> String) = $limit;
                        if x > max as f64 {
                            return Err(E::custom(format!(
                                "{v} is above the limit of {}",
                                show(max)
                            )));
                        }
                        Ok($ty(x as u64))
                    }
                }
                d.deserialize_any(V)
            }
        }
        impl serde::Serialize for $ty {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_u64(self.0)
            }
        }
    };
}

quantity_de!(
    Bytes,
    parse_bytes,
    "a quantity such as 32Gi or 100G",
    |v: f64| v.ceil(),
    (crate::limits::MAX_BYTES, fmt_bytes)
);
quantity_de!(
    CpuMilli,
    parse_cpu_milli,
    "a CPU quantity such as 16 or 500m",
    |v: f64| (v * 1000.0).ceil(),
    (crate::limits::MAX_CPU_MILLI, |m| format!(
        "{} cores",
        fmt_cpu(m)
    ))
);
quantity_de!(
    Duration,
    parse_duration_s,
    "a duration such as 90s, 5m or 2h",
    |v: f64| v.round(),
    (crate::limits::MAX_DURATION_S, fmt_duration)
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes() {
        assert_eq!(parse_bytes("32Gi").unwrap(), 32 << 30);
        assert_eq!(parse_bytes("100G").unwrap(), 100_000_000_000);
        assert_eq!(parse_bytes("1.5Ti").unwrap(), 3 << 39);
        assert_eq!(parse_bytes("512").unwrap(), 512);
        let e = parse_bytes("32Gx").unwrap_err();
        assert!(e.to_string().contains("unknown suffix `Gx`"), "{e}");
        // Kubernetes' E and Ei are read, and held to the limit (1 EiB).
        assert_eq!(parse_bytes("1Ei").unwrap(), 1 << 60);
        let e = parse_bytes("2Ei").unwrap_err();
        assert!(e.to_string().contains("above the limit of 1024Pi"), "{e}");
        assert!(parse_bytes("2E").is_err());
        assert!(parse_bytes("Gi").is_err());
        assert!(parse_bytes("").is_err());
        assert!(parse_bytes("1.2.3Gi").is_err());
    }

    #[test]
    fn cpu() {
        assert_eq!(parse_cpu_milli("16").unwrap(), 16000);
        assert_eq!(parse_cpu_milli("500m").unwrap(), 500);
        assert_eq!(parse_cpu_milli("1.5").unwrap(), 1500);
        assert!(parse_cpu_milli("2Gi").is_err());
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration_s("90s").unwrap(), 90);
        assert_eq!(parse_duration_s("5m").unwrap(), 300);
        assert_eq!(parse_duration_s("1h30m").unwrap(), 5400);
        assert_eq!(parse_duration_s("2d").unwrap(), 172800);
        assert_eq!(parse_duration_s("42").unwrap(), 42);
        assert!(parse_duration_s("5x").is_err());
        assert!(parse_duration_s("h").is_err());
    }

    #[test]
    fn limits_are_checked_not_wrapped() {
        let e = parse_duration_s("1000000d").unwrap_err();
        assert!(e.to_string().contains("above the limit of 366d00h"), "{e}");
        assert!(parse_duration_s("366d").is_ok());
        assert!(parse_duration_s("18446744073709551615").is_err());
        let e = parse_bytes("2Pi").unwrap();
        assert_eq!(e, 2 << 50);
        assert!(parse_bytes("2000Pi").is_err());
        assert!(parse_cpu_milli("4294967295").is_err());
        assert_eq!(parse_cpu_milli("1048576").unwrap(), 1_048_576_000);
        let long = "9".repeat(10_000);
        let e = parse_bytes(&format!("{long}x")).unwrap_err().to_string();
        assert!(e.len() < 200, "value cut to a readable length: {e}");
    }

    #[test]
    fn formatting() {
        assert_eq!(fmt_bytes(80 << 30), "80Gi");
        assert_eq!(fmt_bytes(3 << 39), "1.5Ti");
        assert_eq!(fmt_cpu(1500), "1.5");
        assert_eq!(fmt_cpu(16000), "16");
        assert_eq!(fmt_duration(3720), "1h02m");
    }
}
