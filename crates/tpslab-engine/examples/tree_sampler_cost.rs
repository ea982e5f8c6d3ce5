//! What `ramp --pid`'s step sampler costs on a big process tree: a python parent forks
//! N `sleep` children (a prefork server's shape, default 200), the sampler ticks every
//! 10 ms (ramp's default `--interval`) for 5 s, and this process's CPU time over those
//! seconds (utime+stime of /proc/self/stat: the sampler is its only busy thread) is
//! printed per second of wall time, with the threads in the tree and those sampled.
//! The parent kills its children by PID and exits when its stdin closes. Run:
//! `cargo run --release -p tpslab-engine --example tree_sampler_cost [N]`.

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const PARENT: &str = r#"
import os, sys
n = int(sys.argv[1])
kids = []
for _ in range(n):
    p = os.fork()
    if p == 0:
        os.execvp("sleep", ["sleep", "600"])
    kids.append(p)
print("ready", flush=True)
sys.stdin.read()
for p in kids:
    os.kill(p, 9)
for p in kids:
    os.waitpid(p, 0)
"#;

/// This process's CPU time, seconds (utime+stime of /proc/self/stat).
fn own_cpu_s() -> f64 {
    let s = std::fs::read_to_string("/proc/self/stat").expect("/proc/self/stat");
    let t = tpslab_proc::pid::parse_task_stat(&s, "stat").expect("parse");
    (t.utime + t.stime) as f64 / tpslab_net::clock_ticks_per_s()
}

fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .map_or(200, |a| a.parse().expect("N: a count of children"));
    let mut parent = Command::new("python3")
        .args(["-c", PARENT, &n.to_string()])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("python3");
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(parent.stdout.take().expect("stdout")),
        &mut line,
    )
    .expect("ready");
    let pid = parent.id();
    let secs = 5.0;
    let t0 = Instant::now();
    let cpu0 = own_cpu_s();
    let mut sm = tpslab_engine::observe::step_sampler::StepSampler::start(pid, None);
    let mut next = t0;
    let mut ticks = 0;
    while t0.elapsed().as_secs_f64() < secs {
        sm.sample();
        ticks += 1;
        next += Duration::from_millis(10);
        if let Some(d) = next.checked_duration_since(Instant::now()) {
            std::thread::sleep(d);
        }
    }
    let cov = sm.coverage();
    let (_, per) = sm.finish();
    let (cpu, wall) = (own_cpu_s() - cpu0, t0.elapsed().as_secs_f64());
    if let Some(mut stdin) = parent.stdin.take() {
        let _ = stdin.flush();
    }
    let _ = parent.wait();
    println!(
        "tree of 1 python parent + {n} sleep children, {ticks} ticks of 10 ms over {wall:.2} s: \
         sampler CPU {:.2} % of a core ({cpu:.2} s); threads in the tree {}, \
         read per tick at most {}, threads with samples {}",
        100.0 * cpu / wall,
        cov.threads,
        cov.per_tick,
        per.iter().filter(|t| t.states.samples > 0).count()
    );
}
