//! What feeds a live view (`--live`) from a workflow's context: the samples' sinks (each
//! sample turned into the very line `--json-stream` writes, read back) and the progress
//! that tells the view each phase and a capacity search's steps, holding the progress
//! lines for after the view.

mod tty;

pub use tty::{give_back_stderr, gone, hold_stderr, to_dev_null, KeysTty};

use std::sync::mpsc::Sender;
use std::sync::{Arc, Mutex};
use tpslab_engine::client::openloop::{HttpLiveSample, HttpLiveSink};
use tpslab_engine::observe::{LiveSample, LiveSink};
use tpslab_record::capacity::CapacityStep;
use tpslab_report::live::screen::{HttpItem, RunsItem};
use tpslab_report::live::{HttpFrame, LiveFrame};

/// One sample as the view reads it: the `--json-stream` line itself, read back, with the
/// figures the line leaves out (the SO_RCVBUF limit, softnet per CPU, the threads).
pub fn frame(s: &LiveSample) -> Option<LiveFrame> {
    let line = serde_json::to_string(s).ok()?;
    let mut f = LiveFrame::from_line(&line).ok()?;
    f.rcvbuf_limit_bytes = s.rcvbuf_limit_bytes;
    f.softnet_dropped_per_cpu = s.softnet_dropped_per_cpu.clone();
    f.threads = s.threads.clone();
    Some(f)
}

/// A sink sending each UDP sample's frame ([`frame`]) as `wrap` makes it an item.
pub fn udp_sink<T: Send + 'static>(tx: Sender<T>, wrap: fn(LiveFrame) -> T) -> LiveSink {
    let tx = Mutex::new(tx);
    LiveSink(Arc::new(move |s: &LiveSample| {
        if let Some(f) = frame(s) {
            let _ = tx.lock().unwrap_or_else(|e| e.into_inner()).send(wrap(f));
        }
    }))
}

/// A sink handing each HTTP sample to `also` (`--json-stream`'s, if any), then its line,
/// read back, to the view.
pub fn http_sink(also: Option<HttpLiveSink>, tx: Sender<HttpItem>) -> HttpLiveSink {
    let tx = Mutex::new(tx);
    HttpLiveSink(Arc::new(move |s: &HttpLiveSample| {
        if let Some(o) = &also {
            (o.0)(s);
        }
        let f = serde_json::to_string(s).map(|l| HttpFrame::from_line(&l));
        if let Ok(Ok(f)) = f {
            let _ = tx
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .send(HttpItem::Frame(Box::new(f)));
        }
    }))
}

/// Progress while a view holds the terminal: no bars, lines kept for after.
pub struct HeldLines(pub Arc<Mutex<Vec<String>>>);

impl crate::Progress for HeldLines {
    fn phase(&self, _label: &str, _secs: f64) -> Box<dyn Send + '_> {
        Box::new(())
    }

    fn line(&self, line: &str) {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(line.to_string());
    }
}

/// Progress under a view of several runs (`Run`, `Steps` made of its phases and a
/// search's steps) or of an HTTP run: each phase that starts is a run the view shows, a
/// capacity search's steps go to it; lines are held for after.
pub struct ViewProgress<T> {
    /// Where lines are held.
    pub held: HeldLines,
    /// The view's sender.
    pub tx: Mutex<Sender<T>>,
    /// The item of a phase that starts, of a search's steps.
    pub items: Items<T>,
}

/// How a view's items are made of a phase that starts and of a search's steps.
pub type Items<T> = (fn(String) -> T, fn(Vec<CapacityStep>) -> T);

impl<T: Send> ViewProgress<T> {
    fn send(&self, item: T) {
        let _ = self.tx.lock().unwrap_or_else(|e| e.into_inner()).send(item);
    }
}

impl<T: Send> crate::Progress for ViewProgress<T> {
    fn phase(&self, label: &str, _secs: f64) -> Box<dyn Send + '_> {
        self.send((self.items.0)(label.to_string()));
        Box::new(())
    }

    fn line(&self, line: &str) {
        crate::Progress::line(&self.held, line)
    }

    fn capacity_steps(&self, steps: &[CapacityStep]) {
        self.send((self.items.1)(steps.to_vec()));
    }
}

/// [`ViewProgress`] of a view of several runs.
pub fn runs_progress(held: HeldLines, tx: Sender<RunsItem>) -> ViewProgress<RunsItem> {
    ViewProgress {
        held,
        tx: Mutex::new(tx),
        items: (RunsItem::Run, RunsItem::Steps),
    }
}

/// [`ViewProgress`] of an HTTP run's view.
pub fn http_progress(held: HeldLines, tx: Sender<HttpItem>) -> ViewProgress<HttpItem> {
    ViewProgress {
        held,
        tx: Mutex::new(tx),
        items: (HttpItem::Run, HttpItem::Steps),
    }
}
