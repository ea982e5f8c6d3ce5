use std::sync::atomic::AtomicBool;
use tpslab_engine::link::LinkConfig;
use tpslab_engine::tcpflow::*;
fn main() {
    let args: Vec<String> = std::env::args().collect();
    let snd: u64 = args[1].parse().unwrap();
    let rcv: u64 = args[2].parse().unwrap();
    let rate: f64 = args[3].parse().unwrap();
    let link = LinkConfig {
        delay_ns: 15_000_000,
        rate_bps: if rate > 0.0 { Some(rate) } else { None },
        ..Default::default()
    };
    let plan = FlowPlan {
        target: "0.0.0.0:5001".parse().unwrap(),
        duration_ns: 6_000_000_000,
        interval_ns: 100_000_000,
        sndbuf: (snd > 0).then_some(snd),
        write_bytes: 128 * 1024,
    };
    let r = run_lab_flow(
        link,
        (rcv > 0).then_some(rcv),
        plan,
        &AtomicBool::new(false),
    )
    .unwrap();
    let a = tpslab_analysis::tcp::analyse(&r.flow.samples, 1_000_000_000, Some(r.flow.sndbuf_granted)).unwrap();
    println!(
        "{:?}\n{:?}\nsndbuf {} rcvbuf {}",
        a, r.link_stats, r.flow.sndbuf_granted, r.sink_rcvbuf_granted
    );
    println!("{}", tpslab_analysis::tcp::verdict(&a));
    let l = r.flow.samples.last().unwrap();
    println!("{l:?}");
}
