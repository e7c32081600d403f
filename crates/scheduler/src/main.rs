//! `kube-scheduler`: the drop-in scheduler binary (upstream's `cmd/kube-scheduler`).

ksched_scheduler::install_allocator!();

fn main() -> std::process::ExitCode {
    ksched_scheduler::command::SchedulerCommand::new().run()
}
