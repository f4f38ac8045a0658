//! How long a handler may take for one request: the server's
//! [`handler_timeout`](super::WebhookServer::handler_timeout), cut to the caller's own
//! deadline when it says one. kube-apiserver calls a webhook with `?timeout=<timeoutSeconds>`
//! (client-go's `Request.Timeout`, a Go duration such as `10s`) and gives up at that
//! deadline; a refusal sent after it never arrives, and the client sees the API server's
//! "context deadline exceeded" (or, under `failurePolicy: Ignore`, the object is admitted
//! unchecked). So the handler is stopped a margin before it, and the refusal names why.

use std::time::Duration;

/// The least time kept back for the refusal to reach the caller.
const MIN_MARGIN: Duration = Duration::from_millis(250);

/// The handler's budget for a request whose query is `query`: `handler_timeout`, or less
/// when the caller's deadline (less a margin of a tenth, at least 250 ms) comes first.
pub(super) fn budget(handler_timeout: Duration, query: Option<&str>) -> Duration {
    let Some(caller) = query.and_then(caller_timeout) else {
        return handler_timeout;
    };
    let margin = (caller / 10).max(MIN_MARGIN);
    // A deadline shorter than the margin: answer within half of it.
    let within = caller.checked_sub(margin).unwrap_or(caller / 2);
    handler_timeout.min(within)
}

/// The `timeout` parameter of a query, as a duration.
fn caller_timeout(query: &str) -> Option<Duration> {
    query
        .split('&')
        .filter_map(|pair| pair.split_once('='))
        .find(|(name, _)| *name == "timeout")
        .and_then(|(_, value)| go_duration(value))
        .filter(|d| !d.is_zero())
}

/// A duration as Go writes one (`10s`, `1m30s`, `1.5s`, `500ms`, `2h0m0s`); `None` for
/// anything else.
fn go_duration(text: &str) -> Option<Duration> {
    let mut rest = text;
    let mut total = 0f64;
    if rest.is_empty() {
        return None;
    }
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .filter(|&end| end > 0)?;
        let number: f64 = rest[..digits].parse().ok()?;
        rest = &rest[digits..];
        let unit_end = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let seconds = match &rest[..unit_end] {
            "h" => 3600.0,
            "m" => 60.0,
            "s" => 1.0,
            "ms" => 1e-3,
            "us" | "µs" => 1e-6,
            "ns" => 1e-9,
            _ => return None,
        };
        total += number * seconds;
        rest = &rest[unit_end..];
    }
    Duration::try_from_secs_f64(total).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_durations_as_client_go_writes_them() {
        let ms = Duration::from_millis;
        for (text, want) in [
            ("10s", ms(10_000)),
            ("1m30s", ms(90_000)),
            ("1.5s", ms(1_500)),
            ("500ms", ms(500)),
            ("2h0m0s", ms(7_200_000)),
        ] {
            assert_eq!(go_duration(text), Some(want), "{text}");
        }
        for bad in ["", "10", "s", "10x", "-1s", "1..5s"] {
            assert_eq!(go_duration(bad), None, "{bad}");
        }
    }

    #[test]
    fn the_budget_ends_before_the_callers_deadline() {
        let s = Duration::from_secs;
        let ms = Duration::from_millis;
        // The API server's default timeoutSeconds, 10 s: a second kept back.
        assert_eq!(budget(s(30), Some("timeout=10s")), s(9));
        // Short deadlines keep at least 250 ms back, or half of a tiny one.
        assert_eq!(budget(s(30), Some("timeout=2s")), ms(1_750));
        assert_eq!(budget(s(30), Some("timeout=200ms")), ms(100));
        // The server's own limit when it is shorter, or when the caller says nothing usable.
        assert_eq!(budget(s(5), Some("timeout=30s")), s(5));
        assert_eq!(budget(s(5), None), s(5));
        assert_eq!(budget(s(5), Some("timeout=soon&x=1")), s(5));
        assert_eq!(budget(s(5), Some("x=1&timeout=0s")), s(5));
    }
}
