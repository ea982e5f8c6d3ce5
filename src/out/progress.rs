//! The terminal's progress: a bar on stderr per phase, status lines on stderr.

use super::progress_shown;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Duration;

/// The terminal's progress: a bar on stderr per phase (when stderr is a terminal, not
/// `--quiet`, and the phase lasts over a second), lines on stderr.
pub(crate) struct TermProgress;

/// A bar drawn by its own thread until dropped.
struct Bar {
    done: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Drop for Bar {
    fn drop(&mut self) {
        self.done.store(true, Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl tpslab_run::Progress for TermProgress {
    fn phase(&self, label: &str, secs: f64) -> Box<dyn Send + '_> {
        if !(secs > 1.0 && progress_shown()) {
            return Box::new(());
        }
        let done = Arc::new(AtomicBool::new(false));
        let (d, label) = (done.clone(), label.to_string());
        let thread = std::thread::spawn(move || {
            let pb = indicatif::ProgressBar::new((secs * 10.0) as u64);
            pb.set_style(
                indicatif::ProgressStyle::with_template("{msg} [{bar:30}] {elapsed}/{duration}")
                    .unwrap()
                    .progress_chars("=> "),
            );
            pb.set_message(label);
            let t0 = std::time::Instant::now();
            while !d.load(Relaxed) {
                pb.set_position(
                    ((t0.elapsed().as_secs_f64() * 10.0) as u64).min((secs * 10.0) as u64),
                );
                std::thread::sleep(Duration::from_millis(100));
            }
            pb.finish_and_clear();
        });
        Box::new(Bar {
            done,
            thread: Some(thread),
        })
    }

    fn line(&self, line: &str) {
        eprintln!("tpslab: {line}");
    }
}
