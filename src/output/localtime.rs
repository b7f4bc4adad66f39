//! Local wall-clock time in the two text forms the result JSON uses: the `date` key and the
//! result file name (`%Y%m%d-%H%M%S`, Python's `datetime.now().strftime(...)`), and
//! `rps_change_events` timestamps (`datetime.now().isoformat()`).
//!
//! Local time needs the system time-zone rules, which only libc has here (no date crate in
//! the dependency set), so this is a thin wrapper over `localtime_r`.

use std::fmt;
use std::time::{SystemTime, UNIX_EPOCH};

/// A broken-down local date and time with microseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LocalDateTime {
    pub year: i32,
    pub month: u32,
    pub day: u32,
    pub hour: u32,
    pub minute: u32,
    pub second: u32,
    pub microsecond: u32,
}

impl LocalDateTime {
    /// The current local time. Falls back to UTC fields if the time zone cannot be applied.
    pub fn now() -> Self {
        Self::at(SystemTime::now())
    }

    /// The local time of `t`.
    pub fn at(t: SystemTime) -> Self {
        let since_epoch = t.duration_since(UNIX_EPOCH).unwrap_or_default();
        let secs = since_epoch.as_secs() as libc::time_t;
        let microsecond = since_epoch.subsec_micros();
        // SAFETY: `libc::tm` is plain old data (integers and, on some targets, a nullable
        // pointer), for which all-zero bytes are a valid value.
        let mut tm: libc::tm = unsafe { std::mem::zeroed() };
        // SAFETY: both pointers come from live references valid for the call;
        // `localtime_r` is the thread-safe variant and writes only into `tm`.
        let ok = unsafe { !libc::localtime_r(&secs, &mut tm).is_null() };
        if !ok {
            // SAFETY: as for `localtime_r` above.
            unsafe { libc::gmtime_r(&secs, &mut tm) };
        }
        LocalDateTime {
            year: tm.tm_year + 1900,
            month: (tm.tm_mon + 1) as u32,
            day: tm.tm_mday as u32,
            hour: tm.tm_hour as u32,
            minute: tm.tm_min as u32,
            second: tm.tm_sec as u32,
            microsecond,
        }
    }

    /// `%Y%m%d-%H%M%S`, e.g. `20261130-084051` (the `date` key and file-name suffix).
    pub fn result_date(&self) -> String {
        format!(
            "{:04}{:02}{:02}-{:02}{:02}{:02}",
            self.year, self.month, self.day, self.hour, self.minute, self.second
        )
    }

    /// Python's naive `isoformat()`: `2026-11-30T08:40:51.123456`, without the fraction
    /// when the microseconds are 0.
    pub fn isoformat(&self) -> String {
        self.to_string()
    }
}

impl fmt::Display for LocalDateTime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}",
            self.year, self.month, self.day, self.hour, self.minute, self.second
        )?;
        if self.microsecond != 0 {
            write!(f, ".{:06}", self.microsecond)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_like_python() {
        let t = LocalDateTime {
            year: 2026,
            month: 11,
            day: 30,
            hour: 8,
            minute: 4,
            second: 5,
            microsecond: 42,
        };
        assert_eq!(t.result_date(), "20261130-080405");
        assert_eq!(t.isoformat(), "2026-11-30T08:04:05.000042");
        assert_eq!(
            LocalDateTime {
                microsecond: 0,
                ..t
            }
            .isoformat(),
            "2026-11-30T08:04:05"
        );
    }

    #[test]
    fn now_is_a_plausible_date() {
        let t = LocalDateTime::now();
        assert!(t.year >= 2024 && (1..=12).contains(&t.month) && (1..=31).contains(&t.day));
        assert_eq!(t.result_date().len(), 15);
    }
}
