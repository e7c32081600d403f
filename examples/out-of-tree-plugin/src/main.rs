//! A kube-scheduler binary with one extra plugin: same flags, config, serving and leader election
//! as the stock `kube-scheduler`, plus `ZonePreference` (see README.md).

fn main() -> std::process::ExitCode {
    ksched_scheduler::command::SchedulerCommand::new()
        .with_plugin(zone_preference_scheduler::NAME, zone_preference_scheduler::new)
        .run()
}
