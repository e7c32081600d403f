//! `kube-scheduler`: the drop-in scheduler binary (upstream's `cmd/kube-scheduler`).

fn main() -> std::process::ExitCode {
    ksched_scheduler::command::SchedulerCommand::new().run()
}
