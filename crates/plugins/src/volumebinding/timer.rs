//! A runtime-agnostic sleep for PreBind's polling: one background thread wakes every pending
//! delay at its deadline, so the plugin works under any executor (the scheduler's tokio runtime,
//! or a plain `block_on` in tests) without depending on one.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

#[derive(Default)]
struct Slot {
    fired: bool,
    waker: Option<Waker>,
}

struct Entry {
    deadline: Instant,
    seq: u64,
    slot: Arc<Mutex<Slot>>,
}

impl PartialEq for Entry {
    fn eq(&self, o: &Self) -> bool {
        (self.deadline, self.seq) == (o.deadline, o.seq)
    }
}
impl Eq for Entry {}
impl PartialOrd for Entry {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Entry {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        (self.deadline, self.seq).cmp(&(o.deadline, o.seq))
    }
}

#[derive(Default)]
struct Timer {
    heap: Mutex<(BinaryHeap<Reverse<Entry>>, u64)>,
    cv: Condvar,
}

fn timer() -> &'static Arc<Timer> {
    static T: OnceLock<Arc<Timer>> = OnceLock::new();
    T.get_or_init(|| {
        let t = Arc::new(Timer::default());
        let worker = t.clone();
        std::thread::Builder::new()
            .name("volumebinding-timer".into())
            .spawn(move || worker.run())
            .expect("spawning the volume binding timer thread");
        t
    })
}

impl Timer {
    fn run(&self) {
        let mut guard = self.heap.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            let now = Instant::now();
            while guard.0.peek().is_some_and(|Reverse(e)| e.deadline <= now) {
                let Reverse(e) = guard.0.pop().expect("peeked");
                let mut slot = e.slot.lock().unwrap_or_else(|p| p.into_inner());
                slot.fired = true;
                if let Some(w) = slot.waker.take() {
                    w.wake();
                }
            }
            guard = match guard.0.peek().map(|Reverse(e)| e.deadline) {
                None => self.cv.wait(guard).unwrap_or_else(|e| e.into_inner()),
                Some(d) => {
                    self.cv.wait_timeout(guard, d.saturating_duration_since(now)).unwrap_or_else(|e| e.into_inner()).0
                }
            };
        }
    }

    fn register(&self, deadline: Instant) -> Arc<Mutex<Slot>> {
        let slot = Arc::new(Mutex::new(Slot::default()));
        let mut g = self.heap.lock().unwrap_or_else(|e| e.into_inner());
        g.1 += 1;
        let seq = g.1;
        g.0.push(Reverse(Entry { deadline, seq, slot: slot.clone() }));
        drop(g);
        self.cv.notify_one();
        slot
    }
}

/// A future completing after `d`.
pub struct Sleep {
    deadline: Instant,
    slot: Option<Arc<Mutex<Slot>>>,
}

/// Sleeps for `d`.
pub fn sleep(d: Duration) -> Sleep {
    Sleep { deadline: Instant::now() + d, slot: None }
}

impl Future for Sleep {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if Instant::now() >= self.deadline {
            return Poll::Ready(());
        }
        let deadline = self.deadline;
        let slot = self.slot.get_or_insert_with(|| timer().register(deadline)).clone();
        let mut s = slot.lock().unwrap_or_else(|e| e.into_inner());
        if s.fired {
            return Poll::Ready(());
        }
        s.waker = Some(cx.waker().clone());
        Poll::Pending
    }
}

#[cfg(test)]
pub(crate) fn block_on<F: Future>(f: F) -> F::Output {
    struct ThreadWaker(std::thread::Thread);
    impl std::task::Wake for ThreadWaker {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = Waker::from(Arc::new(ThreadWaker(std::thread::current())));
    let mut cx = Context::from_waker(&waker);
    let mut f = std::pin::pin!(f);
    loop {
        if let Poll::Ready(v) = f.as_mut().poll(&mut cx) {
            return v;
        }
        std::thread::park_timeout(Duration::from_millis(50));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sleeps_roughly_the_duration() {
        let start = Instant::now();
        block_on(sleep(Duration::from_millis(30)));
        assert!(start.elapsed() >= Duration::from_millis(30));
    }
}
