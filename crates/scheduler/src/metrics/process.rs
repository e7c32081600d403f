//! `process_*` metrics read from `/proc` at scrape time, with client_golang's names and help
//! texts (CPU ticks are USER_HZ = 100, as its procfs library assumes).

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;

const USER_HZ: f64 = 100.0;

/// Collects `process_cpu_seconds_total`, `process_resident_memory_bytes`,
/// `process_virtual_memory_bytes`, `process_start_time_seconds`, `process_open_fds` and
/// `process_max_fds` on every scrape. On systems without `/proc` it collects nothing.
#[derive(Debug, Default)]
pub struct ProcessCollector;

impl ProcessCollector {
    /// The collector.
    pub fn new() -> Self {
        ProcessCollector
    }
}

/// One reading of the process state.
#[derive(Debug, Default, Clone, PartialEq)]
pub(crate) struct ProcessStats {
    pub cpu_seconds: Option<f64>,
    pub start_time_seconds: Option<f64>,
    pub resident_bytes: Option<f64>,
    pub virtual_bytes: Option<f64>,
    pub open_fds: Option<f64>,
    pub max_fds: Option<f64>,
    pub virtual_max_bytes: Option<f64>,
    /// Bytes received and sent over every interface of the process' network namespace.
    pub network: Option<(f64, f64)>,
}

/// Fields of `/proc/<pid>/stat` after the command name: (utime + stime, starttime) in ticks.
fn parse_stat(stat: &str) -> Option<(u64, u64)> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // f[0] is field 3 (state); field N is f[N - 3].
    let utime: u64 = f.get(11)?.parse().ok()?;
    let stime: u64 = f.get(12)?.parse().ok()?;
    let start: u64 = f.get(19)?.parse().ok()?;
    Some((utime + stime, start))
}

/// A `Key:   123 kB` line of `/proc/<pid>/status`, in bytes.
pub(crate) fn status_kb(status: &str, key: &str) -> Option<f64> {
    let line = status.lines().find(|l| l.starts_with(key) && l[key.len()..].starts_with(':'))?;
    let kb: f64 = line[key.len() + 1..].split_whitespace().next()?.parse().ok()?;
    Some(kb * 1024.0)
}

fn boot_time(proc_stat: &str) -> Option<f64> {
    proc_stat.lines().find_map(|l| l.strip_prefix("btime "))?.trim().parse().ok()
}

/// A soft limit of `/proc/<pid>/limits`; `unlimited` reads as the largest u64, as procfs does.
fn soft_limit(limits: &str, name: &str) -> Option<f64> {
    let line = limits.lines().find(|l| l.starts_with(name))?;
    let soft = line[name.len()..].split_whitespace().next()?;
    if soft == "unlimited" {
        return Some(u64::MAX as f64);
    }
    soft.parse().ok()
}

fn max_open_files(limits: &str) -> Option<f64> {
    soft_limit(limits, "Max open files")
}

/// Received and transmitted bytes summed over the interfaces of `/proc/<pid>/net/dev`.
fn net_dev_totals(net_dev: &str) -> Option<(f64, f64)> {
    let mut totals = (0.0, 0.0);
    for line in net_dev.lines().skip(2) {
        let (_, counters) = line.split_once(':')?;
        let f: Vec<&str> = counters.split_whitespace().collect();
        totals.0 += f.first()?.parse::<f64>().ok()?;
        totals.1 += f.get(8)?.parse::<f64>().ok()?;
    }
    Some(totals)
}

impl ProcessStats {
    pub(crate) fn read() -> Self {
        let read = |p: &str| std::fs::read_to_string(p).ok();
        let mut s = ProcessStats::default();
        if let Some((ticks, start)) = read("/proc/self/stat").as_deref().and_then(parse_stat) {
            s.cpu_seconds = Some(ticks as f64 / USER_HZ);
            if let Some(btime) = read("/proc/stat").as_deref().and_then(boot_time) {
                s.start_time_seconds = Some(btime + start as f64 / USER_HZ);
            }
        }
        if let Some(status) = read("/proc/self/status") {
            s.resident_bytes = status_kb(&status, "VmRSS");
            s.virtual_bytes = status_kb(&status, "VmSize");
        }
        s.open_fds = std::fs::read_dir("/proc/self/fd").ok().map(|d| d.count() as f64);
        if let Some(limits) = read("/proc/self/limits") {
            s.max_fds = max_open_files(&limits);
            s.virtual_max_bytes = soft_limit(&limits, "Max address space");
        }
        s.network = read("/proc/self/net/dev").as_deref().and_then(net_dev_totals);
        s
    }
}

fn gauge(encoder: &mut DescriptorEncoder, name: &str, help: &str, v: Option<f64>) -> Result<(), std::fmt::Error> {
    let Some(v) = v else { return Ok(()) };
    let g = ConstGauge::new(v);
    g.encode(encoder.encode_descriptor(name, help, None, g.metric_type())?)
}

impl Collector for ProcessCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let s = ProcessStats::read();
        if let Some(cpu) = s.cpu_seconds {
            let c = ConstCounter::new(cpu);
            c.encode(encoder.encode_descriptor(
                "process_cpu_seconds",
                "Total user and system CPU time spent in seconds.",
                None,
                c.metric_type(),
            )?)?;
        }
        gauge(&mut encoder, "process_max_fds", "Maximum number of open file descriptors.", s.max_fds)?;
        gauge(&mut encoder, "process_open_fds", "Number of open file descriptors.", s.open_fds)?;
        gauge(&mut encoder, "process_resident_memory_bytes", "Resident memory size in bytes.", s.resident_bytes)?;
        gauge(
            &mut encoder,
            "process_start_time_seconds",
            "Start time of the process since unix epoch in seconds.",
            s.start_time_seconds,
        )?;
        gauge(&mut encoder, "process_virtual_memory_bytes", "Virtual memory size in bytes.", s.virtual_bytes)?;
        gauge(
            &mut encoder,
            "process_virtual_memory_max_bytes",
            "Maximum amount of virtual memory available in bytes.",
            s.virtual_max_bytes,
        )?;
        if let Some((rx, tx)) = s.network {
            for (name, help, v) in [
                ("process_network_receive_bytes", "Number of bytes received by the process over the network.", rx),
                ("process_network_transmit_bytes", "Number of bytes sent by the process over the network.", tx),
            ] {
                let c = ConstCounter::new(v);
                c.encode(encoder.encode_descriptor(name, help, None, c.metric_type())?)?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_proc_files() {
        let stat = "1234 (kube sched) S 1 1234 1234 0 -1 4194560 500 0 0 0 250 50 0 0 20 0 8 0 4200 100000 300";
        assert_eq!(parse_stat(stat), Some((300, 4200)));
        assert_eq!(status_kb("Name:\tx\nVmSize:\t  2048 kB\nVmRSS:\t  1024 kB\n", "VmRSS"), Some(1024.0 * 1024.0));
        assert_eq!(boot_time("cpu  1 2 3\nbtime 1700000000\n"), Some(1_700_000_000.0));
        let limits = "Limit                     Soft Limit           Hard Limit           Units     \nMax open files            1048576              1048576              files     \n";
        assert_eq!(max_open_files(limits), Some(1_048_576.0));
        let limits = "Max address space         unlimited            unlimited            bytes     \n";
        assert_eq!(soft_limit(limits, "Max address space"), Some(18446744073709551615.0));
        let net_dev = "Inter-|   Receive                                                |  Transmit\n \
 face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed\n    \
 lo:    1000      10    0    0    0     0          0         0     1000      10    0    0    0     0       0          0\n  \
eth0:   5000      40    0    0    0     0          0         0      700       9    0    0    0     0       0          0\n";
        assert_eq!(net_dev_totals(net_dev), Some((6000.0, 1700.0)));
    }

    #[test]
    fn reads_this_process() {
        let s = ProcessStats::read();
        if std::path::Path::new("/proc/self/stat").exists() {
            assert!(s.cpu_seconds.is_some());
            assert!(s.start_time_seconds.unwrap_or(0.0) > 1.0e9);
            assert!(s.resident_bytes.unwrap_or(0.0) > 0.0);
            assert!(s.open_fds.unwrap_or(0.0) >= 3.0);
        }
    }
}
