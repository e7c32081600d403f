//! `kube-scheduler`: the drop-in scheduler binary (upstream's `cmd/kube-scheduler`).

#[global_allocator]
static GLOBAL: ksched_scheduler::allocator::MiMalloc = ksched_scheduler::allocator::MiMalloc;

// The allocator's options must be set before the first allocation (see `allocator::configure`).
#[cfg(target_os = "linux")]
#[used]
#[link_section = ".init_array"]
static CONFIGURE_ALLOCATOR: extern "C" fn() = ksched_scheduler::allocator::configure;

fn main() -> std::process::ExitCode {
    ksched_scheduler::command::SchedulerCommand::new().run()
}
