//! What counting `skb:kfree_skb` by reason costs the path that drops: the time to send
//! datagrams that die at once (a port nobody listens on, NO_SOCKET: every send is a
//! drop), with and without the per-reason counters, alternated five times in a fresh
//! network namespace; medians and their ratio. Root. Run:
//! `cargo run --release -p tpslab-engine --example drop_reasons_cost`.

use std::net::UdpSocket;
use tpslab_engine::observe::dropwatch::DropReasons;
use tpslab_net::mono_ns;

fn ns_per_drop(n: u32) -> f64 {
    let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
    let closed = UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let t0 = mono_ns();
    for _ in 0..n {
        let _ = tx.send_to(b"x", closed);
    }
    (mono_ns() - t0) as f64 / f64::from(n)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn main() {
    let ns = tpslab_net::ns::NetNs::create().expect("a network namespace (root)");
    let n = 300_000;
    let (mut off, mut on, mut one, mut sampled) = (vec![], vec![], vec![], vec![]);
    let mut lost = 0;
    let mut reasons = 0;
    let id = tpslab_net::perf::tracepoint_id("skb", "kfree_skb").expect("skb:kfree_skb (root)");
    let cpus = tpslab_net::online_cpus() as u32;
    for _ in 0..5 {
        off.push(ns.run(|| ns_per_drop(n)).unwrap());
        let d = DropReasons::start().expect("drop-reason counters (root)");
        reasons = d.reasons();
        on.push(ns.run(|| ns_per_drop(n)).unwrap());
        drop(d);
        // One unfiltered counter per CPU: the cost of the tracepoint alone.
        let all: Vec<_> = (0..cpus)
            .map(|c| tpslab_net::perf::TracepointCounter::open_cpu(id, c, "").unwrap())
            .collect();
        one.push(ns.run(|| ns_per_drop(n)).unwrap());
        drop(all);
        let smp = tpslab_engine::observe::dropwatch::DropSampler::start().expect("sampler (root)");
        sampled.push(ns.run(|| ns_per_drop(n)).unwrap());
        lost += smp.stop().lost;
    }
    let (a, b) = (median(off.clone()), median(on.clone()));
    println!("send to a closed port (each a NO_SOCKET drop), {n} datagrams, 5 alternations:");
    println!("  without counters: {a:.0} ns per datagram (median of {off:.0?})");
    println!(
        "  with {reasons} reasons x {} CPUs: {b:.0} ns per datagram (median of {on:.0?})",
        tpslab_net::online_cpus()
    );
    let c = median(one.clone());
    println!(
        "  with 1 unfiltered counter x {cpus} CPUs: {c:.0} ns per datagram (median of {one:.0?})"
    );
    let e = median(sampled.clone());
    println!(
        "  sampled (one raw record per drop, a ring per CPU): {e:.0} ns per datagram (median of {sampled:.0?}), {lost} samples lost"
    );
    println!(
        "  ratios to without: {:.2}x per-reason counters, {:.2}x one counter, {:.2}x sampled",
        b / a,
        c / a,
        e / a
    );
}
