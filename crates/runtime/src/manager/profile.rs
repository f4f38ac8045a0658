//! `/debug/pprof/profile?seconds=N`: a CPU profile of the whole process in pprof's
//! protobuf format (feature `profiling`, served when
//! [`ManagerOptions::profiling`](super::ManagerOptions::profiling) is on), as Go
//! operators serve `net/http/pprof`: `go tool pprof http://HOST:8081/debug/pprof/profile`
//! or Google's `pprof` reads it.
//!
//! The profile samples every thread 100 times a second for `seconds` (default 30, at most
//! 300) on a blocking thread; one profile at a time (a second request gets 409 meanwhile).
//! A request dropped before its profile is done (the client gone, the manager stopped)
//! ends the thread at once.

use bytes::Bytes;
use http::Response;
use http_body_util::Full;

use super::server::respond;
#[cfg(feature = "profiling")]
use {
    parking_lot::{Condvar, Mutex},
    std::sync::Arc,
};

/// Default and longest profile, in seconds.
#[cfg(feature = "profiling")]
const DEFAULT_SECONDS: u64 = 30;
#[cfg(feature = "profiling")]
const MAX_SECONDS: u64 = 300;

/// The profile's length the query asks for.
#[cfg(feature = "profiling")]
fn seconds(query: Option<&str>) -> Result<u64, String> {
    let asked = query
        .into_iter()
        .flat_map(|q| q.split('&'))
        .find_map(|pair| pair.strip_prefix("seconds="));
    match asked {
        None => Ok(DEFAULT_SECONDS),
        Some(text) => match text.parse::<u64>() {
            Ok(n) if (1..=MAX_SECONDS).contains(&n) => Ok(n),
            _ => Err(format!("seconds must be 1 to {MAX_SECONDS}, not {text:?}")),
        },
    }
}

/// Takes a CPU profile as the query says.
#[cfg(feature = "profiling")]
pub(super) async fn cpu(query: Option<&str>) -> Response<Full<Bytes>> {
    use std::sync::atomic::{AtomicBool, Ordering};

    static TAKING: AtomicBool = AtomicBool::new(false);
    /// Lets the next profile start, however this one ends.
    struct Taking;
    impl Drop for Taking {
        fn drop(&mut self) {
            TAKING.store(false, Ordering::SeqCst);
        }
    }

    let seconds = match seconds(query) {
        Ok(seconds) => seconds,
        Err(why) => return respond(400, format!("{why}\n"), "text/plain"),
    };
    if TAKING.swap(true, Ordering::SeqCst) {
        let why = "a profile is being taken; try again when it is done\n";
        return respond(409, why.to_owned(), "text/plain");
    }
    let taking = Taking;
    // The profiler's guard is not Send, and symbolizing takes CPU: a blocking thread does it
    // all. It waits for the profile's length on a condition this request owns: a client
    // that goes away (or a manager that stops, dropping its connections) drops the request,
    // which wakes the thread at once — nothing outlives the request by more than that.
    let stop = Arc::new((Mutex::new(false), Condvar::new()));
    let _stop_on_drop = StopOnDrop(stop.clone());
    let profiled = tokio::task::spawn_blocking(move || {
        let _taking = taking;
        let guard = pprof::ProfilerGuardBuilder::default()
            .frequency(100)
            .blocklist(&["libc", "libgcc", "pthread", "vdso"])
            .build()
            .map_err(|e| e.to_string())?;
        if stopped_within(&stop, std::time::Duration::from_secs(seconds)) {
            return Err("the request went away".to_owned());
        }
        let report = guard.report().build().map_err(|e| e.to_string())?;
        let profile = report.pprof().map_err(|e| e.to_string())?;
        Ok::<_, String>(pprof::protos::Message::encode_to_vec(&profile))
    })
    .await;
    match profiled {
        Ok(Ok(bytes)) => {
            let mut response = Response::new(Full::new(Bytes::from(bytes)));
            let headers = response.headers_mut();
            headers.insert(
                http::header::CONTENT_TYPE,
                http::HeaderValue::from_static("application/octet-stream"),
            );
            headers.insert(
                http::header::CONTENT_DISPOSITION,
                http::HeaderValue::from_static("attachment; filename=\"profile\""),
            );
            response
        }
        Ok(Err(why)) => respond(500, format!("profiling failed: {why}\n"), "text/plain"),
        Err(join) => respond(500, format!("profiling failed: {join}\n"), "text/plain"),
    }
}

/// Whether `stop` was set before `length` passed (the profile is then abandoned).
#[cfg(feature = "profiling")]
fn stopped_within(stop: &(Mutex<bool>, Condvar), length: std::time::Duration) -> bool {
    let (stopped, wake) = stop;
    let deadline = std::time::Instant::now() + length;
    let mut stopped = stopped.lock();
    while !*stopped {
        if wake.wait_until(&mut stopped, deadline).timed_out() {
            break;
        }
    }
    *stopped
}

/// Wakes the profiling thread when the request is dropped (or answered).
#[cfg(feature = "profiling")]
struct StopOnDrop(Arc<(Mutex<bool>, Condvar)>);

#[cfg(feature = "profiling")]
impl Drop for StopOnDrop {
    fn drop(&mut self) {
        *self.0.0.lock() = true;
        self.0.1.notify_all();
    }
}

/// Without the `profiling` feature there is nothing to serve.
#[cfg(not(feature = "profiling"))]
pub(super) async fn cpu(_: Option<&str>) -> Response<Full<Bytes>> {
    let why = "this operator was built without kube-informer-runtime's `profiling` feature\n";
    respond(404, why.to_owned(), "text/plain")
}

#[cfg(all(test, feature = "profiling"))]
mod tests {
    use super::*;

    #[test]
    fn the_length_is_asked_for_in_seconds_within_bounds() {
        assert_eq!(seconds(None), Ok(30));
        assert_eq!(seconds(Some("debug=1&seconds=5")), Ok(5));
        assert!(seconds(Some("seconds=0")).is_err());
        assert!(seconds(Some("seconds=301")).is_err());
        assert!(seconds(Some("seconds=abc")).unwrap_err().contains("abc"));
    }
}
