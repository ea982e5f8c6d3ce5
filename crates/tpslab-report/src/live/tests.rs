use super::*;
use ratatui::backend::TestBackend;
use ratatui::Terminal;

fn frame(t_ms: f64, socket: u64, softnet: u64) -> LiveFrame {
    LiveFrame {
        t_ms,
        interval_ms: 100.0,
        offered_pps: Some(1000.0),
        delivered_pps: Some(900.0),
        socket_drops: socket,
        rcvbuf_errors: socket,
        softnet_drops: softnet,
        rx_queue_bytes: 0,
        latency: None,
        rcvbuf_limit_bytes: None,
        softnet_dropped_per_cpu: vec![],
        threads: vec![],
    }
}

fn header() -> LiveHeader {
    LiveHeader {
        command: "run udp".into(),
        target: "127.0.0.1:9".into(),
        planned_s: Some(10.0),
        planned_requests: None,
        no_latency: None,
    }
}

#[test]
fn an_interval_drops_are_the_difference_of_two_lines() {
    let mut st = LiveState::new(header());
    st.push(frame(100.0, 5, 0));
    assert_eq!(st.interval_drops.socket, 5);
    st.push(frame(200.0, 12, 3));
    assert_eq!(
        st.interval_drops,
        Drops {
            socket: 7,
            rcvbuf_errors: 7,
            softnet: 3
        }
    );
    assert_eq!(st.total_drops.socket, 12);
    st.push(frame(300.0, 12, 3));
    assert_eq!(st.interval_drops, Drops::default());
}

#[test]
fn the_window_lets_old_intervals_go() {
    let mut st = LiveState::new(header());
    for i in 1..=1000 {
        st.push(frame(i as f64 * 100.0, 0, 0));
    }
    // 100 s of intervals, 60 s kept.
    assert_eq!(st.offered.len(), 601);
    assert_eq!(st.window(), [40.0, 100.0]);
    assert_eq!(st.frames, 1000);
}

#[test]
fn per_cpu_softnet_is_kept_between_the_samples_that_read_it() {
    let mut st = LiveState::new(header());
    let mut f = frame(100.0, 0, 4);
    f.softnet_dropped_per_cpu = vec![(0, 1), (1, 3)];
    st.push(f);
    st.push(frame(110.0, 0, 4));
    assert_eq!(st.softnet_per_cpu, vec![(0, 1), (1, 3)]);
    let text = render(&st, 80, 24);
    assert!(text.contains("cpu1 3"), "{text}");
}

fn render(st: &LiveState, w: u16, h: u16) -> String {
    let mut t = Terminal::new(TestBackend::new(w, h)).unwrap();
    t.draw(|f| draw(f, st)).unwrap();
    let buf = t.backend().buffer().clone();
    let mut s = String::new();
    for y in 0..h {
        for x in 0..w {
            s.push_str(buf[(x, y)].symbol());
        }
        s.push('\n');
    }
    s
}

#[test]
fn a_small_terminal_gets_one_line_and_no_panic() {
    let mut st = LiveState::new(header());
    st.push(frame(100.0, 5, 0));
    for (w, h) in [(79, 24), (80, 23), (20, 2), (1, 1), (0, 0)] {
        let text = render(&st, w, h);
        if w >= 20 {
            assert!(text.starts_with("terminal too small"), "{w}x{h}: {text}");
        }
    }
    assert!(render(&st, 80, 24).contains("tpslab run udp"));
}

#[test]
fn a_watch_without_load_names_no_offered_rate() {
    let mut st = LiveState::new(LiveHeader {
        command: "watch".into(),
        target: "pid 1".into(),
        planned_s: Some(10.0),
        planned_requests: None,
        no_latency: Some("a watch sends no load of its own".into()),
    });
    let mut f = frame(100.0, 0, 0);
    f.offered_pps = None;
    st.push(f);
    let text = render(&st, 80, 24);
    assert!(text.contains("pps: delivered 900"), "{text}");
    assert!(!text.contains("offered"), "{text}");
    // Wrapped at 80 columns.
    assert!(
        text.contains("no latency: a watch sends no load of its"),
        "{text}"
    );
}

#[test]
fn the_keys_are_named_in_full_where_they_fit() {
    let mut st = LiveState::new(header());
    st.push(frame(100.0, 0, 0));
    assert!(render(&st, 80, 24)
        .lines()
        .next()
        .unwrap()
        .trim_end()
        .ends_with("q stop (2x quit)  p pause  ? help"));
    st.header.target = "tpslab's server on 127.0.0.1:9000".into();
    let first = render(&st, 80, 24)
        .lines()
        .next()
        .unwrap()
        .trim_end()
        .to_string();
    assert!(first.ends_with("q p ?"), "{first}");
    assert!(render(&st, 160, 48)
        .lines()
        .next()
        .unwrap()
        .contains("q stop (2x quit)  p pause  ? help"));
}

#[test]
fn the_server_threads_are_counted_by_state_and_call_and_kept_between_reads() {
    let mut st = LiveState::new(header());
    let t = |tid: u32, state: char, wait: Option<&str>| LiveThread {
        tid,
        comm: "srv".into(),
        state,
        wait: wait.map(str::to_string),
    };
    let mut f = frame(100.0, 0, 0);
    f.threads = vec![
        t(11, 'S', Some("recvfrom")),
        t(12, 'R', None),
        t(13, 'S', Some("recvfrom")),
    ];
    st.push(f);
    // A fast sample reads no thread: the last ones stay on screen.
    st.push(frame(110.0, 0, 0));
    assert_eq!(st.threads.len(), 3);
    let mut term = Terminal::new(TestBackend::new(160, 48)).unwrap();
    term.draw(|f| draw(f, &st)).unwrap();
    let buf = term.backend().buffer().clone();
    let text: String = (0..48)
        .map(|y| (0..160).map(|x| buf[(x, y)].symbol()).collect::<String>() + "\n")
        .collect();
    assert!(text.contains("threads: 2 S recvfrom, 1 R"), "{text}");
    assert!(text.contains("     12 srv             R"), "{text}");
}
