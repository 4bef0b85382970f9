//! [`CallContext`]: Go's `context.Context` for runtime calls (a deadline and cancellation).

use std::time::Instant;

use tokio::sync::watch;

/// The caller's context: an optional deadline and an optional cancellation, like Go's
/// `context.Context` that every CRI call carries.
#[derive(Debug, Clone, Default)]
pub struct CallContext {
    deadline: Option<Instant>,
    cancel: Option<watch::Receiver<bool>>,
}

/// Cancels the [`CallContext`] made by [`CallContext::with_cancel`]; dropping it cancels nothing.
#[derive(Debug)]
pub struct Canceller(watch::Sender<bool>);

impl Canceller {
    /// Cancels every context made from this canceller.
    pub fn cancel(&self) {
        self.0.send_replace(true);
    }
}

impl CallContext {
    /// No deadline, never cancelled (Go's `context.Background()`).
    pub fn background() -> Self {
        Self::default()
    }

    /// This context with a deadline (monotonic).
    pub fn with_deadline(mut self, deadline: Instant) -> Self {
        self.deadline = Some(self.deadline.map_or(deadline, |d| d.min(deadline)));
        self
    }

    /// The deadline, if any (monotonic).
    pub fn deadline(&self) -> Option<Instant> {
        self.deadline
    }

    /// This context plus a cancellation handle.
    pub fn with_cancel(mut self) -> (Self, Canceller) {
        let (tx, rx) = watch::channel(false);
        self.cancel = Some(rx);
        (self, Canceller(tx))
    }

    /// Completes when the deadline passes or the context is cancelled; never otherwise.
    pub async fn done(&self) {
        let deadline = async {
            match self.deadline {
                Some(d) => tokio::time::sleep_until(d.into()).await,
                None => std::future::pending().await,
            }
        };
        let cancelled = async {
            match &self.cancel {
                Some(rx) => {
                    let mut rx = rx.clone();
                    // A dropped canceller never cancels.
                    if rx.wait_for(|c| *c).await.is_err() {
                        std::future::pending::<()>().await;
                    }
                }
                None => std::future::pending().await,
            }
        };
        tokio::select! { _ = deadline => {}, _ = cancelled => {} }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test]
    async fn context_done_fires_at_the_deadline() {
        let start = Instant::now();
        let ctx = CallContext::background().with_deadline(start + Duration::from_millis(50));
        ctx.done().await;
        assert!(start.elapsed() >= Duration::from_millis(50));
    }

    #[tokio::test]
    async fn context_done_fires_on_cancel_only() {
        let (ctx, cancel) = CallContext::background().with_cancel();
        let not_yet = tokio::time::timeout(Duration::from_millis(20), ctx.done()).await;
        assert!(not_yet.is_err());
        cancel.cancel();
        tokio::time::timeout(Duration::from_secs(1), ctx.done())
            .await
            .expect("cancelled");
    }
}
