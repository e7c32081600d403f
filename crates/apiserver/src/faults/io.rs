//! Restarts at the connection level: every accepted connection belongs to a generation; a
//! restart ends the generation (its connections fail on their next read or write, which
//! also ends their watches) and refuses new connections until the pause is over.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio_util::sync::{CancellationToken, WaitForCancellationFutureOwned};

use super::Shared;

/// Wraps a listener so that [`super::Faults::restart`] can drop its connections.
pub(crate) struct FaultListener<L> {
    inner: L,
    shared: Arc<Shared>,
}

impl<L> FaultListener<L> {
    pub(crate) fn new(inner: L, shared: Arc<Shared>) -> Self {
        FaultListener { inner, shared }
    }
}

impl<L: axum::serve::Listener> axum::serve::Listener for FaultListener<L> {
    type Io = FaultIo<L::Io>;
    type Addr = L::Addr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            let (io, addr) = self.inner.accept().await;
            if self.shared.is_paused() {
                // Down: the client sees its connection closed at once.
                drop(io);
                continue;
            }
            let generation = self.shared.generation();
            let ended = Box::pin(generation.clone().cancelled_owned());
            return (FaultIo { inner: io, generation, ended }, addr);
        }
    }

    fn local_addr(&self) -> io::Result<Self::Addr> {
        self.inner.local_addr()
    }
}

/// A connection that fails once its generation ended.
pub(crate) struct FaultIo<I> {
    inner: I,
    generation: CancellationToken,
    ended: Pin<Box<WaitForCancellationFutureOwned>>,
}

fn reset() -> io::Error {
    io::Error::new(io::ErrorKind::ConnectionReset, "injected fault: API server restart")
}

impl<I: AsyncRead + Unpin> AsyncRead for FaultIo<I> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        // Polling the generation registers the waker, so an idle connection ends too.
        if self.ended.as_mut().poll(cx).is_ready() {
            return Poll::Ready(Err(reset()));
        }
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<I: AsyncWrite + Unpin> AsyncWrite for FaultIo<I> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        if self.generation.is_cancelled() {
            return Poll::Ready(Err(reset()));
        }
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        if self.generation.is_cancelled() {
            return Poll::Ready(Err(reset()));
        }
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if self.generation.is_cancelled() {
            return Poll::Ready(Err(reset()));
        }
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}
